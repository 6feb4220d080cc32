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
 * <p>The usage it reports is read from the request body with a scan, not a JSON parse (the run's
 * requests are sent unchanged): {@code max_tokens} (or {@code max_output_tokens}) and, for a
 * token-id prompt or input ({@code [1,2,…]}), the number of ids; a streamed answer is chosen by the
 * request's {@code accept: text/event-stream}, its shape by the path.
 */
public final class CalibrationServer {
  /** Content events a streamed answer carries at most (fewer when fewer tokens were asked for). */
  static final int EVENTS = 8;

  /** The longest request body it reads (as the exchange's response bodies): 413 past it. */
  static final int MAX_BODY_BYTES = 64 * 1024 * 1024;

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
    // Answered once the whole request is read, as a server would; a body past MAX_BODY_BYTES is
    // not kept: 413, and the connection closes.
    Buffer body = Buffer.buffer();
    boolean[] tooLarge = {false};
    req.handler(
        chunk -> {
          if (tooLarge[0]) {
            return;
          }
          if ((long) body.length() + chunk.length() > MAX_BODY_BYTES) {
            tooLarge[0] = true;
            requests.incrementAndGet();
            req.response()
                .setStatusCode(413)
                .putHeader("connection", "close")
                .putHeader("content-type", "application/json")
                .end("{\"error\":{\"message\":\"request body too large\"}}")
                .onComplete(v -> req.connection().close());
            return;
          }
          body.appendBuffer(chunk);
        });
    req.exceptionHandler(e -> tooLarge[0] = true);
    req.endHandler(
        v -> {
          if (tooLarge[0]) {
            return;
          }
          requests.incrementAndGet();
          String accept = req.getHeader("accept");
          boolean stream = accept != null && accept.contains("text/event-stream");
          Api api = Api.ofPath(req.path());
          long prompt = tokenIds(body, api == Api.EMBEDDINGS ? "\"input\":" : "\"prompt\":");
          long max = number(body, "\"max_tokens\":");
          if (max < 0) {
            max = number(body, "\"max_output_tokens\":");
          }
          answer(req.response(), api, stream, prompt, Math.max(1, max));
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

  /** The whole number after {@code key} in {@code body}, or -1. */
  static long number(Buffer body, String key) {
    int i = indexOf(body, key);
    if (i < 0) {
      return -1;
    }
    int at = i + key.length();
    while (at < body.length() && body.getByte(at) == ' ') {
      at++;
    }
    long v = 0;
    int digits = 0;
    for (; at < body.length() && digits < 12; at++, digits++) {
      byte b = body.getByte(at);
      if (b < '0' || b > '9') {
        break;
      }
      v = v * 10 + (b - '0');
    }
    return digits == 0 ? -1 : v;
  }

  /** How many numbers the array after {@code key} holds ({@code [1,2,3]}: 3), or -1 when none. */
  static long tokenIds(Buffer body, String key) {
    int i = indexOf(body, key);
    if (i < 0) {
      return -1;
    }
    int at = i + key.length();
    while (at < body.length() && body.getByte(at) == ' ') {
      at++;
    }
    if (at >= body.length() || body.getByte(at) != '[') {
      return -1; // free text
    }
    long n = 0;
    boolean digit = false;
    for (at++; at < body.length(); at++) {
      byte b = body.getByte(at);
      if (b == ']') {
        return n + (digit ? 1 : 0);
      }
      if (b == ',') {
        if (!digit) {
          return -1;
        }
        n++;
        digit = false;
      } else if (b >= '0' && b <= '9') {
        digit = true;
      } else if (b != ' ') {
        return -1; // not a list of token ids
      }
    }
    return -1;
  }

  private static int indexOf(Buffer body, String key) {
    int n = body.length() - key.length();
    outer:
    for (int i = 0; i <= n; i++) {
      for (int k = 0; k < key.length(); k++) {
        if (body.getByte(i + k) != key.charAt(k)) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }
}
