package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.http.HttpConnection;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * An upstream that closes each kept-alive connection a moment after a streamed response without
 * saying {@code Connection: close}, as llama.cpp's server does; a request that arrives on such a
 * connection is never answered. Before, a request the proxy sent on such a pooled connection failed
 * with {@code upstream_disconnected} (about a third of the streams of a closed-loop run through the
 * proxy to llama-server). Now it goes once more on a fresh connection, before any byte reached the
 * client, and is counted.
 */
class StaleUpstreamConnectionTest extends ProxyTestBase {
  private static final Pattern STALE =
      Pattern.compile("(?m)^llm_upstream_stale_retries_total\\{[^}]*\\} (\\S+)$");

  @Test
  void sequentialStreamsToAnUpstreamThatClosesAfterEachAllSucceedAndEveryRetryIsCounted()
      throws Exception {
    Set<HttpConnection> closing = ConcurrentHashMap.newKeySet();
    AtomicInteger answered = new AtomicInteger();
    AtomicInteger unanswered = new AtomicInteger();
    int port =
        startBackend(
            req -> {
              HttpConnection conn = req.connection();
              if (closing.contains(conn)) {
                unanswered.incrementAndGet();
                conn.close();
                return;
              }
              req.body()
                  .onSuccess(
                      b -> {
                        answered.incrementAndGet();
                        closing.add(conn);
                        req.response()
                            .setChunked(true)
                            .putHeader("content-type", "text/event-stream")
                            .putHeader("keep-alive", "timeout=5, max=100")
                            .end(VllmScript.stream(false))
                            .onComplete(v -> vertx.setTimer(20, t -> conn.close()));
                      });
            });
    startProxy(config(port, 4, null));
    for (int i = 0; i < 100; i++) {
      Response r = call("/v1/chat/completions", chat("hi " + i, true));
      assertThat(r.status()).as(r.text()).isEqualTo(200);
      assertThat(r.text()).endsWith(VllmScript.DONE);
    }
    assertThat(awaitFinished(100)).allMatch(f -> f.outcome().equals("success"));
    assertThat(answered).hasValue(100);
    Matcher m = STALE.matcher(admin("/metrics").text());
    assertThat(m.find()).isTrue();
    // Each request the upstream read on a closing connection was resent; so was any the proxy wrote
    // after the close, which the upstream never saw.
    assertThat((long) Double.parseDouble(m.group(1))).isGreaterThanOrEqualTo(unanswered.get());
    System.out.printf(
        "stale upstream connections: 100 streams ok, %d sent again on a fresh connection%n",
        unanswered.get());
    assertIdle();
  }
}
