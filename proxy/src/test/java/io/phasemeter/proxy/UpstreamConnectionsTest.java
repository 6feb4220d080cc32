package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.Assertions;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The pool's upstream connections ({@code pools[].connections}): their bounds, what a request past
 * the unslotted wait queue gets (503 {@code upstream_busy} at once, the upstream not ejected), and
 * the gauges that report them.
 */
class UpstreamConnectionsTest extends ProxyTestBase {

  @Test
  void theDefaultsAndTheirBoundsAreChecked() {
    ProxyConfig.Pool p = ConfigLoader.defaults().pools().get(0);
    assertThat(p.connections()).isEqualTo(ProxyConfig.Connections.DEFAULT);
    assertThat(p.slottedConnections()).as("slots + 8").isEqualTo(p.slots() + 8);
    assertThat(config(1, 4, "    connections: {max: 2, keep_alive: 0s}\n").pools().get(0))
        .satisfies(
            q -> {
              assertThat(q.slottedConnections()).isEqualTo(2);
              assertThat(q.connections().keepAlive()).isZero();
              assertThat(q.connections().unslotted()).as("unset keys keep defaults").isEqualTo(32);
              assertThat(q.connections().reuse()).isEqualTo(ProxyConfig.Reuse.AUTO);
              assertThat(q.connections().spares())
                  .isEqualTo(ProxyConfig.Connections.DEFAULT_PRECONNECT);
            });
    // YAML 1.1 reads a bare on/off as a boolean: both spellings mean the same.
    for (String off : List.of("off", "'off'", "OFF", "false")) {
      assertThat(
              config(1, 4, "    connections: {reuse: " + off + ", preconnect: 0}\n")
                  .pools()
                  .get(0)
                  .connections())
          .as(off)
          .satisfies(
              c -> {
                assertThat(c.reuse()).isEqualTo(ProxyConfig.Reuse.OFF);
                assertThat(c.spares()).isZero();
              });
    }
    assertThat(config(1, 4, "    connections: {reuse: on}\n").pools().get(0).connections().reuse())
        .isEqualTo(ProxyConfig.Reuse.ON);
    for (String bad :
        List.of(
            "{max: -1}",
            "{unslotted: 0}",
            "{wait_queue: -1}",
            "{keep_alive: -1s}",
            "{keep_alive: 500ms}",
            "{keep_alive: 1.5s}",
            "{preconnect: -2}",
            "{preconnect: 1025}",
            "{max: 2, preconnect: 3}",
            "{reuse: on, preconnect: 1}",
            "{reuse: sometimes}")) {
      Assertions.assertThatThrownBy(() -> config(1, 4, "    connections: " + bad + "\n"))
          .as(bad)
          .isInstanceOf(ConfigException.class)
          .hasMessageStartingWith("test.yaml: pools[0].connections.")
          .hasMessageNotContaining("connections: connections");
    }
  }

  @Test
  void pastTheWaitQueueARequestIsRefusedAtOnceAndTheUpstreamStaysIn() throws Exception {
    Promise<Void> release = Promise.promise();
    List<HttpServerRequest> held = new CopyOnWriteArrayList<>();
    int port =
        startBackend(
            req -> {
              if (req.path().equals("/slow")) {
                held.add(req);
                release.future().onComplete(v -> req.response().end("slow"));
              } else {
                req.response().end("{\"version\":\"x\"}");
              }
            });
    startProxy(config(port, 4, "    connections: {unslotted: 1, wait_queue: 1}\n"));
    MultiMap none = MultiMap.caseInsensitiveMultiMap();
    Future<Response> first = callAsync(HttpMethod.GET, "/slow", null, none);
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> held.size() == 1);
    Future<Response> second = callAsync(HttpMethod.GET, "/slow", null, none);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> metric("llm_upstream_connections_waiting", "unslotted") == 1.0);

    Response third = call(HttpMethod.GET, "/slow", null, none);
    assertThat(third.status()).isEqualTo(503);
    assertThat(third.headers().get("retry-after")).isEqualTo("1");
    assertThat(third.body().toString()).contains("\"code\":\"upstream_busy\"");
    assertThat(metric("llm_upstream_connections", "unslotted")).isEqualTo(1.0);
    assertThat(metric("llm_upstream_connections_max", "unslotted")).isEqualTo(1.0);
    assertThat(metric("llm_upstream_connections_max", "slotted")).isEqualTo(12.0);

    release.complete();
    assertThat(first.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
    assertThat(second.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
    assertThat(held).hasSize(2);
    assertThat(call(HttpMethod.GET, "/version", null, none).status())
        .as("the upstream was not ejected")
        .isEqualTo(200);
    assertThat(metric("llm_upstream_connections_waiting", "unslotted")).isZero();
    assertThat(metric("llm_upstream_connections_opened_total", "unslotted")).isEqualTo(1.0);
    assertThat(metric("llm_upstream_ejections_total", null)).isZero();
    assertIdle();
  }

  @Test
  void slottedConnectionsAreCountedOpenAndClosed() throws Exception {
    int port = startVllmBackend(new ArrayList<>());
    startProxy(config(port, 4, "    connections: {keep_alive: 3s}\n"));
    for (int i = 0; i < 3; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", true)).status()).isEqualTo(200);
    }
    assertThat(metric("llm_upstream_connections", "slotted")).isEqualTo(1.0);
    assertThat(metric("llm_upstream_connections_opened_total", "slotted"))
        .as("one connection, reused")
        .isEqualTo(1.0);
    assertThat(metric("llm_upstream_connections_keep_alive_seconds", null)).isEqualTo(3.0);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(metric("llm_upstream_connections", "slotted"))
                    .as("closed after keep_alive idle")
                    .isZero());
  }

  /** One sample of {@code name} for pool default (and {@code kind}, when given) from /metrics. */
  private double metric(String name, String kind) throws Exception {
    String text = admin("/metrics").body().toString();
    for (String line : text.split("\n")) {
      if (line.startsWith(name + "{")
          && line.contains("llm_pool=\"default\"")
          && (kind == null || line.contains("kind=\"" + kind + "\""))) {
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    throw new AssertionError("no " + name + " (kind " + kind + ") in /metrics:\n" + text);
  }
}
