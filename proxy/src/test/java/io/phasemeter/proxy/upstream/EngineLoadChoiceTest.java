package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code routing: engine_load} choosing between two upstreams whose {@code /metrics} the test
 * scripts: the engine's own queue decides, which the proxy's in-flight count cannot see; an
 * upstream without a fresh reading (failed, too large, stale) is scored from this proxy's requests
 * to it, on the readings' scale, and the choice says so; one candidate is no choice. Counted as a
 * user would read it.
 */
class EngineLoadChoiceTest {
  private final Vertx vertx = Vertx.vertx();
  private final List<UpstreamPool> pools = new ArrayList<>();
  private final MeterRegistry registry = new SimpleMeterRegistry();
  private final AtomicLong offset = new AtomicLong();
  // The system clock, moved on by hand: readings age without waiting.
  private final NanoClock clock =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return System.nanoTime() + offset.get();
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return nanoTime;
        }
      };

  @AfterEach
  void tearDown() throws Exception {
    for (UpstreamPool p : pools) {
      p.close().await(10, TimeUnit.SECONDS);
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  /** An engine whose /metrics answers what {@code text} holds (null: 500). */
  private int engine(AtomicReference<String> text) throws Exception {
    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  String t = text.get();
                  if (t == null) {
                    req.response().setStatusCode(500).end("down");
                  } else {
                    req.response().putHeader("content-type", "text/plain").end(t);
                  }
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    return server.actualPort();
  }

  private static String metrics(int waiting, int running, double kv) {
    return "vllm:num_requests_waiting{model_name=\"m\"} "
        + waiting
        + "\nvllm:num_requests_running{model_name=\"m\"} "
        + running
        + "\nvllm:kv_cache_usage_perc{model_name=\"m\"} "
        + kv
        + "\n";
  }

  private UpstreamPool pool(String routing, String interval, int... ports) {
    StringBuilder urls = new StringBuilder();
    for (int p : ports) {
      urls.append(urls.length() == 0 ? "" : ", ").append("http://127.0.0.1:").append(p);
    }
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [%s]
                slots: 8
                health: {path: null}
                routing: %s
                scrape_interval: %s
                scrape_timeout: %s
            """
                .formatted(urls, routing, interval, interval.equals("1h") ? "10s" : "600ms"),
            "test.yaml");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), clock, null);
    pool.bindTo(registry);
    pool.bindUpstreamsTo(registry);
    pool.startHealthChecks();
    pools.add(pool);
    return pool;
  }

  /**
   * Waits until every engine on {@code ports} has a fresh reading (timeouts are generous: a scrape
   * on a busy shared machine may take long, and one that times out leaves no reading).
   */
  private void awaitReadings(int... ports) {
    Awaitility.await()
        .until(
            () -> {
              for (int p : ports) {
                if (Double.isNaN(engineGauge("waiting", p))) {
                  return false;
                }
              }
              return true;
            });
  }

  private double scrapes(String result) {
    return registry.get("llm.upstream.scrapes").tag("result", result).functionCounter().count();
  }

  private double decisions(String reason) {
    return registry.get("llm.route.decisions").tag("reason", reason).functionCounter().count();
  }

  private double engineGauge(String name, int port) {
    return registry
        .get("llm.upstream.engine." + name)
        .tag("upstream", "127.0.0.1:" + port)
        .gauge()
        .value();
  }

  @Test
  void theEngineWithWaitingRequestsLosesThoughTheProxyHasNothingInFlightThere() throws Exception {
    int busy = engine(new AtomicReference<>(metrics(6, 4, 0.9)));
    int idle = engine(new AtomicReference<>(metrics(0, 2, 0.1)));
    UpstreamPool pool = pool("engine_load", "200ms", busy, idle);
    awaitReadings(busy, idle);

    for (int i = 0; i < 10; i++) {
      UpstreamPool.Choice c = pool.choose(List.of());
      assertThat(c.host().address().port()).isEqualTo(idle);
      assertThat(c.reason()).isEqualTo(RouteReason.ENGINE_LOAD);
    }
    assertThat(decisions("engine_load")).isEqualTo(10);
    assertThat(engineGauge("waiting", busy)).isEqualTo(6);
    assertThat(engineGauge("running", busy)).isEqualTo(4);
    assertThat(engineGauge("kv_cache_usage", busy)).isEqualTo(0.9);

    // least_loaded sees nothing in flight anywhere: the two in turn.
    UpstreamPool blind = pool("least_loaded", "200ms", busy, idle);
    List<Integer> ports = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      UpstreamPool.Choice c = blind.choose(List.of());
      assertThat(c.reason()).isEqualTo(RouteReason.LEAST_LOADED);
      ports.add(c.host().address().port());
    }
    assertThat(ports).containsOnly(busy, idle).contains(busy);
  }

  @Test
  void requestsSentSinceTheReadingCountUntilTheNextOne() throws Exception {
    int a = engine(new AtomicReference<>(metrics(0, 0, 0)));
    int b = engine(new AtomicReference<>(metrics(0, 0, 0)));
    // One reading at start, none after (an hour; it may take 10 s on a cold, busy JVM): only the
    // proxy's own count moves.
    UpstreamPool pool = pool("engine_load", "1h", a, b);
    awaitReadings(a, b);
    UpstreamHost first = pool.choose(List.of()).host();
    first.started(); // as open() counts it
    UpstreamPool.Choice next = pool.choose(List.of());
    assertThat(next.host()).isNotSameAs(first);
    assertThat(next.reason()).isEqualTo(RouteReason.ENGINE_LOAD);
    first.ended();
  }

  @Test
  void anUpstreamWithoutAFreshReadingIsScoredFromTheProxysOwnRequestsAndTheChoiceSaysSo()
      throws Exception {
    AtomicReference<String> busyText = new AtomicReference<>(metrics(6, 4, 0.9));
    AtomicReference<String> failingText = new AtomicReference<>(metrics(9, 8, 1.0));
    int busy = engine(busyText);
    int failing = engine(failingText);
    UpstreamPool pool = pool("engine_load", "200ms", busy, failing);
    awaitReadings(busy, failing);
    assertThat(pool.choose(List.of()).host().address().port()).isEqualTo(busy);

    failingText.set(null); // 500 from now on
    Awaitility.await().until(() -> scrapes("failed") >= 1);
    // Nothing in flight: 0, against the busy engine's 2 x 6 + 4 / 4 + 0.9 = 13.9.
    UpstreamPool.Choice c = pool.choose(List.of());
    UpstreamHost unseen = c.host();
    assertThat(unseen.address().port()).isEqualTo(failing);
    assertThat(c.reason()).isEqualTo(RouteReason.ENGINE_LOAD_FALLBACK);
    assertThat(decisions("engine_load_fallback")).isEqualTo(1);
    // Past its 4 slots the proxy's own requests to it weigh as waiting ones: 4 + 6 over them
    // score 2 x 6 + 1 = 13, still below 13.9; one more, 15, and the engine that shows its queue
    // wins (a proxy that cannot see an engine does not pile onto it).
    for (int i = 0; i < 10; i++) {
      unseen.started();
    }
    assertThat(pool.choose(List.of()).host()).isSameAs(unseen);
    unseen.started();
    UpstreamPool.Choice seen = pool.choose(List.of());
    assertThat(seen.host().address().port()).isEqualTo(busy);
    assertThat(seen.reason()).isEqualTo(RouteReason.ENGINE_LOAD);
    for (int i = 0; i < 11; i++) {
      unseen.ended();
    }
    assertThat(engineGauge("waiting", failing)).isNaN();
    assertThat(engineGauge("waiting", busy)).isEqualTo(6);

    // A body past the bound is refused whole.
    failingText.set("# " + "x".repeat(EngineScraper.MAX_BODY_BYTES) + "\n" + metrics(0, 0, 0));
    Awaitility.await().until(() -> scrapes("too_large") >= 1);
    assertThat(pool.choose(List.of()).reason()).isEqualTo(RouteReason.ENGINE_LOAD_FALLBACK);

    // Metrics that are not vLLM's are a failed scrape too.
    failingText.set("llamacpp:requests_processing 0\n");
    double failedBefore = scrapes("failed");
    Awaitility.await().until(() -> scrapes("failed") > failedBefore);
    assertThat(pool.choose(List.of()).reason()).isEqualTo(RouteReason.ENGINE_LOAD_FALLBACK);
  }

  @Test
  void aReadingOlderThanThreeIntervalsIsStale() throws Exception {
    int a = engine(new AtomicReference<>(metrics(0, 1, 0.2)));
    int b = engine(new AtomicReference<>(metrics(3, 1, 0.2)));
    UpstreamPool pool = pool("engine_load", "1h", a, b);
    awaitReadings(a, b);
    assertThat(pool.choose(List.of()).reason()).isEqualTo(RouteReason.ENGINE_LOAD);

    offset.addAndGet(TimeUnit.HOURS.toNanos(3) + 1);
    // Both stale: ranked by in flight (none), so in turn, each choice a fallback.
    List<Integer> ports = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      UpstreamPool.Choice c = pool.choose(List.of());
      assertThat(c.reason()).isEqualTo(RouteReason.ENGINE_LOAD_FALLBACK);
      ports.add(c.host().address().port());
    }
    assertThat(ports).contains(a, b);
    assertThat(engineGauge("waiting", b)).isNaN();
  }

  @Test
  void oneCandidateIsNoChoice() throws Exception {
    int a = engine(new AtomicReference<>(metrics(0, 0, 0)));
    int b = engine(new AtomicReference<>(metrics(0, 0, 0)));
    UpstreamPool pool = pool("engine_load", "200ms", a, b);
    UpstreamHost first = pool.hosts().get(0);
    UpstreamPool.Choice c = pool.choose(List.of(first));
    assertThat(c.host()).isSameAs(pool.hosts().get(1));
    assertThat(c.reason()).isEqualTo(RouteReason.ONLY_AVAILABLE);
    assertThat(pool.choose(List.of(first, pool.hosts().get(1)))).isNull();
    assertThat(decisions("only_available")).isEqualTo(1);
    // The same answer each time: a choice allocates nothing.
    assertThat(pool.choose(List.of(first))).isSameAs(c);
  }
}
