package io.phasemeter.load.http;

import io.phasemeter.load.workload.Api;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The client's own endpoint: an HTTP server on loopback, in the client's process, that answers
 * every request at once in the shape its API expects (an event stream of {@link #EVENTS} content
 * events, each written and flushed on its own, or a whole body), with the usage the request asked
 * for, so that the client's own path (connect, send, read, parse, validate) runs exactly as against
 * a real server. What the client measures against it is its floor: its own cost on top of a server
 * that costs nothing ({@link ClientFloor}). It also takes the warm-up when the target must not see
 * extra requests ({@code --warmup-target self}).
 *
 * <p>The request's lengths come in the {@link #LENGTHS_HEADER} header ({@code "<prompt tokens> <max
 * tokens>"}), sent only to this endpoint, so that nothing of the body needs parsing here; a
 * streamed answer is chosen by the request's {@code accept: text/event-stream}, its shape by the
 * path.
 */
public final class CalibrationServer {
  /** The header that carries the prompt and output lengths the answer's usage reports. */
  public static final String LENGTHS_HEADER = "x-phasemeter-calibration";

  /** Content events a streamed answer carries at most (fewer when fewer tokens were asked for). */
  static final int EVENTS = 8;

  private final HttpServer server;
  private final AtomicLong requests = new AtomicLong();

  private CalibrationServer(HttpServer server) {
    this.server = server;
  }

  /** Starts the endpoint on 127.0.0.1, on a free port, on {@code vertx}. */
  public static Future<CalibrationServer> start(Vertx vertx) {
    HttpServer server =
        vertx.createHttpServer(new HttpServerOptions().setHost("127.0.0.1").setPort(0));
    CalibrationServer cal = new CalibrationServer(server);
    server.requestHandler(cal::handle);
    return server.listen().map(s -> cal);
  }

  /** The port it listens on. */
  public int port() {
    return server.actualPort();
  }

  /** Requests answered so far. */
  public long requests() {
    return requests.get();
  }

  /** Stops listening. */
  public Future<Void> close() {
    return server.close();
  }

  private void handle(HttpServerRequest req) {
    // Answered once the whole request is read, as a server would.
    req.end()
        .onComplete(
            ar -> {
              requests.incrementAndGet();
              long[] lengths = lengths(req.getHeader(LENGTHS_HEADER));
              String accept = req.getHeader("accept");
              boolean stream = accept != null && accept.contains("text/event-stream");
              answer(req.response(), Api.ofPath(req.path()), stream, lengths[0], lengths[1]);
            });
  }

  private static void answer(
      HttpServerResponse res, Api api, boolean stream, long prompt, long completion) {
    if (api == Api.EMBEDDINGS) {
      res.putHeader("content-type", "application/json")
          .end(
              "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                  + "\"embedding\":[0.0]}],\"usage\":{\"prompt_tokens\":"
                  + prompt
                  + ",\"total_tokens\":"
                  + prompt
                  + "}}");
      return;
    }
    if (!stream) {
      res.putHeader("content-type", "application/json").end(whole(api, prompt, completion));
      return;
    }
    res.setChunked(true).putHeader("content-type", "text/event-stream");
    int events = (int) Math.max(1, Math.min(EVENTS, completion));
    if (api == Api.RESPONSES) {
      res.write("event: response.created\ndata: {\"type\":\"response.created\"}\n\n");
      for (int i = 0; i < events; i++) {
        res.write(
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
                + "\"delta\":\" x\"}\n\n");
      }
      res.end(
          "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
              + "{\"status\":\"completed\",\"usage\":{\"input_tokens\":"
              + prompt
              + ",\"output_tokens\":"
              + completion
              + "}}}\n\n");
      return;
    }
    String content =
        api == Api.CHAT
            ? "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" x\"},\"finish_reason\":null}]}"
            : "{\"choices\":[{\"index\":0,\"text\":\" x\",\"finish_reason\":null}]}";
    for (int i = 0; i < events; i++) {
      res.write("data: " + content + "\n\n");
    }
    res.end(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":"
            + prompt
            + ",\"completion_tokens\":"
            + completion
            + "}}\n\ndata: [DONE]\n\n");
  }

  private static Buffer whole(Api api, long prompt, long completion) {
    if (api == Api.RESPONSES) {
      return Buffer.buffer(
          "{\"object\":\"response\",\"status\":\"completed\",\"output\":[],\"usage\":"
              + "{\"input_tokens\":"
              + prompt
              + ",\"output_tokens\":"
              + completion
              + "}}");
    }
    String choice =
        api == Api.CHAT
            ? "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\" x\"},"
                + "\"finish_reason\":\"length\"}"
            : "{\"index\":0,\"text\":\" x\",\"finish_reason\":\"length\"}";
    return Buffer.buffer(
        "{\"choices\":["
            + choice
            + "],\"usage\":{\"prompt_tokens\":"
            + prompt
            + ",\"completion_tokens\":"
            + completion
            + "}}");
  }

  /** {@code "<prompt> <completion>"}; a missing or unreadable value is -1 (no usage checked). */
  static long[] lengths(String header) {
    long[] v = {-1, -1};
    if (header == null) {
      return v;
    }
    String[] parts = header.trim().split("\\s+");
    for (int i = 0; i < Math.min(2, parts.length); i++) {
      try {
        v[i] = Long.parseLong(parts[i]);
      } catch (NumberFormatException e) {
        v[i] = -1;
      }
    }
    return v;
  }
}
