package io.phasemeter.bench;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;

/**
 * An upstream that answers every request with the same small chat.completion after a fixed delay,
 * for the load client's timing-error check in bench/run. Usage: {@code DelayStub PORT DELAY_MS}.
 *
 * <p>The truth is measured here, not assumed: a Vert.x timer fires up to a millisecond or more
 * after its delay, so the stub keeps, per request, the time from the request's last byte to the
 * response's {@code end} (its hold, in nanoseconds) under the request's W3C trace id, and serves
 * them as CSV on {@code GET /holds}. bench/report.py joins them with the load client's {@code
 * pairs.csv}: the client's error is its {@code client_total} minus that hold. At most {@link
 * #MAX_HOLDS} are kept; later requests are counted as {@code dropped} on the last line.
 */
public final class DelayStub {
  static final int MAX_HOLDS = 1_000_000;

  private static final Buffer BODY =
      Buffer.buffer(
          ("{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1767052800,"
                  + "\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                  + "\"assistant\",\"content\":\"one two three four five six seven eight\"},"
                  + "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":16,"
                  + "\"total_tokens\":24,\"completion_tokens\":8}}")
              .getBytes(StandardCharsets.UTF_8));

  // Written and read on one event loop only: a single server instance, listening from a
  // non-Vert.x thread, puts every connection on its one context, and setTimer from a handler fires
  // there too; /holds is served there as well. Several instances would break this.
  private final String[] traceIds = new String[MAX_HOLDS];
  private final long[] holds = new long[MAX_HOLDS];
  private int kept;
  private long dropped;

  private DelayStub() {}

  public static void main(String[] args) {
    int port = Integer.parseInt(args[0]);
    long delayMs = Long.parseLong(args[1]);
    Vertx vertx = Vertx.vertx();
    DelayStub stub = new DelayStub();
    vertx
        .createHttpServer()
        .requestHandler(
            req -> {
              if (req.path().equals("/holds")) {
                req.response().putHeader("content-type", "text/csv").end(stub.holdsCsv());
                return;
              }
              req.body()
                  .onSuccess(
                      b -> {
                        long received = System.nanoTime();
                        String traceparent = req.getHeader("traceparent");
                        vertx.setTimer(
                            delayMs,
                            id -> {
                              stub.keep(traceparent, System.nanoTime() - received);
                              req.response()
                                  .putHeader("content-type", "application/json")
                                  .end(BODY);
                            });
                      });
            })
        .listen(port, "127.0.0.1")
        .onSuccess(
            s ->
                System.out.println(
                    "delay stub on 127.0.0.1:" + s.actualPort() + ", " + delayMs + " ms"))
        .onFailure(
            err -> {
              err.printStackTrace();
              System.exit(1);
            });
  }

  private void keep(String traceparent, long holdNanos) {
    // 00-<32 hex trace id>-<16 hex span id>-<flags>
    if (traceparent == null || traceparent.length() < 35) {
      return;
    }
    if (kept == MAX_HOLDS) {
      dropped++;
      return;
    }
    traceIds[kept] = traceparent.substring(3, 35);
    holds[kept] = holdNanos;
    kept++;
  }

  private String holdsCsv() {
    StringBuilder sb = new StringBuilder(kept * 48 + 64).append("trace_id,hold_ms\n");
    for (int i = 0; i < kept; i++) {
      sb.append(traceIds[i]).append(',').append(holds[i] / 1e6).append('\n');
    }
    return sb.append("# dropped ").append(dropped).append('\n').toString();
  }
}
