package io.phasemeter.bench;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;

/**
 * An upstream that answers every request with the same small chat.completion after a fixed delay,
 * for the load client's timing-error check in bench/run (measured minus the known delay). Usage:
 * {@code DelayStub PORT DELAY_MS}.
 */
public final class DelayStub {
  private static final Buffer BODY =
      Buffer.buffer(
          ("{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1767052800,"
                  + "\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                  + "\"assistant\",\"content\":\"one two three four five six seven eight\"},"
                  + "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":16,"
                  + "\"total_tokens\":24,\"completion_tokens\":8}}")
              .getBytes(StandardCharsets.UTF_8));

  private DelayStub() {}

  public static void main(String[] args) {
    int port = Integer.parseInt(args[0]);
    long delayMs = Long.parseLong(args[1]);
    Vertx vertx = Vertx.vertx();
    vertx
        .createHttpServer()
        .requestHandler(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            vertx.setTimer(
                                delayMs,
                                id ->
                                    req.response()
                                        .putHeader("content-type", "application/json")
                                        .end(BODY))))
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
}
