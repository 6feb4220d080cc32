package io.phasemeter.proxy;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The drain scenario shared by the in-process and the process-level test: an upstream with finite
 * and held streams, and a client that keeps whatever part of a stream it saw.
 */
final class DrainScenario {
  private DrainScenario() {}

  /** A prompt containing this is held by the upstream until its connection is cut. */
  static final String HOLD = "hold";

  /** The content of the first event of every stream, sent before anything is released. */
  static final String FIRST = "t0";

  /**
   * An upstream that starts every stream at once (role chunk, one content event); a request whose
   * prompt contains {@link #HOLD} then streams a token every 100 ms until its connection closes
   * (counted in {@code cut}); any other waits for {@code release}, then streams four more tokens,
   * the finish, usage and {@code [DONE]} events 20 ms apart and ends.
   */
  static Handler<HttpServerRequest> backend(Vertx vertx, Future<Void> release, AtomicInteger cut) {
    return req ->
        req.body()
            .onSuccess(
                b -> {
                  Context context = vertx.getOrCreateContext();
                  HttpServerResponse resp = req.response();
                  resp.setChunked(true).putHeader("content-type", "text/event-stream");
                  resp.write(VllmScript.ROLE);
                  resp.write(VllmScript.content(FIRST));
                  if (b.toString().contains(HOLD)) {
                    long timer =
                        vertx.setPeriodic(
                            100,
                            id -> {
                              if (!resp.closed()) {
                                resp.write(VllmScript.content("t"));
                              }
                            });
                    resp.closeHandler(
                        v -> {
                          vertx.cancelTimer(timer);
                          cut.incrementAndGet();
                        });
                    return;
                  }
                  List<String> rest = new ArrayList<>();
                  for (int i = 1; i <= 4; i++) {
                    rest.add(VllmScript.content("t" + i));
                  }
                  rest.add(VllmScript.FINISH);
                  rest.add(VllmScript.USAGE);
                  rest.add(VllmScript.DONE);
                  release.onComplete(
                      v -> context.runOnContext(x -> writeNext(vertx, resp, rest, 0)));
                });
  }

  private static void writeNext(Vertx vertx, HttpServerResponse resp, List<String> events, int i) {
    if (resp.closed()) {
      return;
    }
    if (i == events.size()) {
      resp.end();
      return;
    }
    resp.write(events.get(i));
    vertx.setTimer(20, t -> writeNext(vertx, resp, events, i + 1));
  }

  /** A streamed chat request whose prompt says whether the upstream holds it. */
  static String chat(int i, boolean hold) {
    return "{\"model\":\"sim-llama\",\"stream\":true,\"messages\":[{\"role\":\"user\","
        + "\"content\":\""
        + (hold ? HOLD : "finite")
        + "-"
        + i
        + "\"}],\"max_tokens\":8}";
  }

  /** The W3C trace id the test gives request {@code i}, so records can be matched to clients. */
  static String traceId(int i) {
    return String.format("%032x", 0x5eed_0000L + i);
  }

  static String traceparent(int i) {
    return "00-" + traceId(i) + "-" + String.format("%016x", 0xab_0000L + i) + "-01";
  }

  /** The records in a record-feed body ({@code data: {json}} events), in order. */
  static List<JsonObject> records(String feedBody) {
    List<JsonObject> out = new ArrayList<>();
    for (String line : feedBody.split("\n")) {
      if (line.startsWith("data: ")) {
        out.add(new JsonObject(line.substring("data: ".length())));
      }
    }
    return out;
  }

  /** One exchange as its client saw it: the status, every byte received, and how it ended. */
  static final class Seen {
    final Promise<Void> firstBytes = Promise.promise();

    /** True when the response ended normally, false when the connection was cut. */
    final Promise<Boolean> ended = Promise.promise();

    final StringBuffer body = new StringBuffer();
    volatile int status;
    volatile Throwable failure;

    /** Opens the exchange on {@code context}, so every handler runs where the response arrives. */
    static Seen open(
        HttpClient client,
        Context context,
        HttpMethod method,
        int port,
        String uri,
        String body,
        String traceparent) {
      Seen seen = new Seen();
      RequestOptions options =
          new RequestOptions().setMethod(method).setHost("127.0.0.1").setPort(port).setURI(uri);
      if (body != null) {
        options.putHeader("content-type", "application/json");
      }
      if (traceparent != null) {
        options.putHeader("traceparent", traceparent);
      }
      context.runOnContext(
          v ->
              client
                  .request(options)
                  .compose(req -> body == null ? req.send() : req.send(body))
                  .onSuccess(
                      resp -> {
                        seen.status = resp.statusCode();
                        resp.handler(
                            b -> {
                              seen.body.append(b.toString());
                              seen.firstBytes.tryComplete();
                            });
                        resp.exceptionHandler(
                            t -> {
                              seen.failure = t;
                              seen.ended.tryComplete(false);
                            });
                        resp.endHandler(x -> seen.ended.tryComplete(true));
                      })
                  .onFailure(
                      t -> {
                        seen.failure = t;
                        seen.firstBytes.tryFail(t);
                        seen.ended.tryComplete(false);
                      }));
      return seen;
    }

    boolean started() {
      return body.indexOf(FIRST) >= 0;
    }

    String text() {
      return body.toString();
    }
  }
}
