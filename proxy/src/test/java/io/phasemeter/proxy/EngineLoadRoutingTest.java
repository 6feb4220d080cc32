package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * {@code routing: engine_load} through the proxy, as a user runs it: two simulators of different
 * speeds (the faster one serves more, and the {@code inference.generate} span and the record say
 * why each upstream was chosen), and an upstream whose {@code /metrics} never answers (requests go
 * on at once, that upstream scored from the proxy's own requests, the scrape counted as a timeout).
 */
class EngineLoadRoutingTest extends ProxyTestBase {
  private static final AttributeKey<Long> PORT = AttributeKey.longKey("server.port");

  private Simulator simulator(double decodeStepMs) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(0)
                .withSlots(4)
                .withDecodeStepMs(decodeStepMs)
                .withDecodeStepGrowth(0)
                .withPrefillTokensPerSecond(1_000_000))
        .await(10, TimeUnit.SECONDS);
  }

  private static ProxyConfig engineLoad(String interval, String timeout, int... ports) {
    String urls =
        java.util.Arrays.stream(ports)
            .mapToObj(p -> "http://127.0.0.1:" + p)
            .collect(Collectors.joining(", "));
    return ConfigLoader.parse(
        """
        listen: {host: 127.0.0.1, port: 0}
        admin: {host: 127.0.0.1, port: 0}
        telemetry: {per_upstream_metrics: true}
        pools:
          - name: default
            models: [sim-llama]
            upstreams: [%s]
            slots: 8
            health: {path: null}
            routing: engine_load
            scrape_interval: %s
            scrape_timeout: %s
        """
            .formatted(urls, interval, timeout),
        "engine-load.yaml");
  }

  private static String exact(int tokens) {
    return "{\"model\":\"sim-llama\",\"max_tokens\":"
        + tokens
        + ",\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  }

  /** The sum of {@code name}'s samples on the admin /metrics whose labels hold every pair. */
  private double metric(String name, String... labels) throws Exception {
    double sum = 0;
    boolean seen = false;
    for (String line : admin("/metrics").text().split("\n")) {
      if (!line.startsWith(name + "{")) {
        continue;
      }
      String set = line.substring(name.length(), line.indexOf('}') + 1);
      boolean all = true;
      for (int i = 0; i + 1 < labels.length; i += 2) {
        all &= set.contains(labels[i] + "=\"" + labels[i + 1] + "\"");
      }
      if (all) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        seen = true;
      }
    }
    return seen ? sum : Double.NaN;
  }

  private String reasonInRecord(String traceId) {
    return new JsonObject(proxy.records().get(traceId)).getString("route_reason");
  }

  private List<SpanData> generationSpans(int n) {
    awaitRoots(n);
    return spans.getFinishedSpanItems().stream()
        .filter(s -> s.getName().equals("inference.generate"))
        .toList();
  }

  @Test
  void theFasterEngineServesMoreAndTheSpanAndTheRecordSayWhy() throws Exception {
    Simulator slow = simulator(40); // 16 tokens: ~640 ms a request
    Simulator fast = simulator(2); // ~32 ms
    startProxy(engineLoad("100ms", "300ms", slow.port(), fast.port()));
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> metric("llm_upstream_scrapes_total", "result", "ok") >= 2);
    assertThat(metric("llm_upstream_engine_waiting", "upstream", "127.0.0.1:" + fast.port()))
        .isZero();

    int n = 48;
    List<Future<Response>> calls = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      calls.add(callAsync("/v1/chat/completions", exact(16)));
    }
    for (Future<Response> c : calls) {
      assertThat(c.await(60, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    awaitFinished(n);

    long fastServed = fast.stats().completed();
    long slowServed = slow.stats().completed();
    assertThat(fastServed + slowServed).isEqualTo(n);
    assertThat(fastServed).as("fast %d, slow %d", fastServed, slowServed).isGreaterThan(slowServed);

    // The span names the upstream and why; the record says the same; the counts are the engines'.
    List<SpanData> gen = generationSpans(n);
    assertThat(gen).hasSize(n);
    Map<Long, Long> byPort = new HashMap<>();
    Map<String, Long> byReason = new HashMap<>();
    for (SpanData s : gen) {
      String reason = s.getAttributes().get(SpanAttributes.ROUTE_REASON);
      assertThat(reason).isIn("engine_load", "engine_load_fallback");
      assertThat(reasonInRecord(s.getTraceId())).isEqualTo(reason);
      byPort.merge(s.getAttributes().get(PORT), 1L, Long::sum);
      byReason.merge(reason, 1L, Long::sum);
    }
    assertThat(byPort.get((long) fast.port())).isEqualTo(fastServed);
    assertThat(byPort.getOrDefault((long) slow.port(), 0L)).isEqualTo(slowServed);
    assertThat(byReason.get("engine_load")).as("scores from the scrapes").isPositive();
    for (String reason : List.of("engine_load", "engine_load_fallback")) {
      assertThat(metric("llm_route_decisions_total", "reason", reason))
          .as(reason)
          .isEqualTo(byReason.getOrDefault(reason, 0L).doubleValue());
    }
    assertThat(metric("llm_route_decisions_total", "reason", "least_loaded")).isZero();
    assertThat(metric("llm_upstream_scrapes_total", "result", "too_large")).isZero();
    assertIdle();
  }

  @Test
  void leastLoadedOnlyAvailableAndNoUpstreamAtAll() throws Exception {
    Simulator a = simulator(1);
    Simulator b = simulator(1);
    Simulator solo =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withModels(List.of("solo"))
                    .withDecodeStepMs(1))
            .await(10, TimeUnit.SECONDS);
    startProxy(
        ConfigLoader.parse(
            """
            listen: {host: 127.0.0.1, port: 0}
            admin: {host: 127.0.0.1, port: 0}
            pools:
              - name: two
                models: [sim-llama]
                upstreams: [http://127.0.0.1:%d, http://127.0.0.1:%d]
                health: {path: null}
              - name: one
                models: [solo]
                upstreams: [http://127.0.0.1:%d]
                health: {path: null}
            """
                .formatted(a.port(), b.port(), solo.port()),
            "least-loaded.yaml"));
    assertThat(call("/v1/chat/completions", exact(2)).status()).isEqualTo(200);
    assertThat(call("/v1/chat/completions", exact(2).replace("sim-llama", "solo")).status())
        .isEqualTo(200);
    assertThat(call("/v1/chat/completions", exact(2).replace("sim-llama", "nobody")).status())
        .isEqualTo(404);
    List<Finished> done = awaitFinished(3);
    Map<String, String> byPool = new HashMap<>();
    for (Finished f : done) {
      byPool.put(
          f.pool(), new JsonObject(proxy.records().get(f.traceId())).getString("route_reason"));
    }
    assertThat(byPool.get("two")).isEqualTo("least_loaded");
    assertThat(byPool.get("one")).isEqualTo("only_available");
    assertThat(byPool.values()).containsNull(); // the unknown model: no upstream was chosen
    assertThat(metric("llm_route_decisions_total", "llm_pool", "two", "reason", "least_loaded"))
        .isEqualTo(1);
    assertThat(metric("llm_route_decisions_total", "llm_pool", "one", "reason", "only_available"))
        .isEqualTo(1);
    assertThat(metric("llm_upstream_scrapes_total")).as("no scrapes without engine_load").isNaN();
  }

  @Test
  void aScrapeTargetThatHangsDoesNotHoldUpRouting() throws Exception {
    // Answers completions at once; its /metrics is accepted and never answered.
    Queue<HttpServerRequest> hanging = new ConcurrentLinkedQueue<>();
    HttpServer stub =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  if (req.path().equals("/metrics")) {
                    hanging.add(req);
                    return;
                  }
                  req.body()
                      .onSuccess(
                          b ->
                              req.response()
                                  .putHeader("content-type", "application/json")
                                  .end(VllmScript.COMPLETION));
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    Simulator sim = simulator(1);
    // A scrape may take up to 6 s, the longest allowed for a 2 s interval.
    startProxy(engineLoad("2s", "6s", stub.actualPort(), sim.port()));
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(
            () -> metric("llm_upstream_scrapes_total", "result", "ok") >= 1 && !hanging.isEmpty());

    int n = 20;
    for (int i = 0; i < n; i++) {
      assertThat(call("/v1/chat/completions", exact(2)).status()).isEqualTo(200);
    }
    List<Finished> done = awaitFinished(n);
    // Every request ended while the first scrape of the hanging target was still open: none
    // waited for it.
    assertThat(metric("llm_upstream_scrapes_total", "result", "timeout")).isZero();
    assertThat(hanging).hasSize(1);

    Map<Long, List<String>> reasons = new HashMap<>();
    for (SpanData s : generationSpans(n)) {
      reasons
          .computeIfAbsent(s.getAttributes().get(PORT), k -> new ArrayList<>())
          .add(s.getAttributes().get(SpanAttributes.ROUTE_REASON));
    }
    assertThat(reasons.get((long) stub.actualPort()))
        .as("the hanging one has no reading: scored from the proxy's own requests")
        .isNotEmpty()
        .containsOnly("engine_load_fallback");
    assertThat(reasons.get((long) sim.port())).isNotEmpty().containsOnly("engine_load");
    assertThat(done.stream().map(f -> reasonInRecord(f.traceId())))
        .containsOnly("engine_load", "engine_load_fallback");
    assertThat(metric("llm_upstream_engine_waiting", "upstream", "127.0.0.1:" + stub.actualPort()))
        .isNaN();

    // Then the scrape ends as a timeout, counted; the next one hangs again, alone.
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> metric("llm_upstream_scrapes_total", "result", "timeout") >= 1);
    assertThat(done).allMatch(f -> f.outcome().equals("success"));
    assertIdle();
  }
}
