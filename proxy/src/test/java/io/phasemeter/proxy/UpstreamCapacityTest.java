package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Capacity per upstream against two real simulators, each an engine that runs two sequences at once
 * (its {@code max_num_seqs}) and queues the rest inside itself. The pool has two slots on each.
 * With one engine killed the pool admits two, not four: the excess waits in the proxy's {@code
 * queue}, where it is measured as such, and never inside the surviving engine, where it would have
 * been measured as {@code generation}. The injected truth is the hold each request asks the
 * simulator for ({@code x-sim-ttft-ms}): a request that waited inside the engine would show at
 * least two holds of generation.
 */
class UpstreamCapacityTest extends ProxyTestBase {
  private static final long HOLD_MS = 400;
  private static final int ENGINE_SEQS = 2;

  private Simulator simulator(int port) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(port)
                .withSlots(ENGINE_SEQS)
                .withDecodeStepMs(5)
                .withDecodeStepGrowth(0)
                .withPrefillTokensPerSecond(1_000_000))
        .await(10, TimeUnit.SECONDS);
  }

  private Future<Response> held() {
    String body =
        "{\"model\":\"sim-llama\",\"stream\":true,\"max_tokens\":3,\"min_tokens\":3,"
            + "\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("x-sim-ttft-ms", Long.toString(HOLD_MS));
    return callAsync(HttpMethod.POST, "/v1/chat/completions", body, h);
  }

  private String metrics() throws Exception {
    return admin("/metrics").text();
  }

  private static String gauge(String name, String labels) {
    return name + "{" + labels + "}";
  }

  @Test
  void withOneEngineKilledTheExcessWaitsInQueueAndTheCapacityFollowsTheEngines() throws Exception {
    Simulator a = simulator(0);
    Simulator b = simulator(0);
    int bPort = b.port();
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "telemetry: {per_upstream_metrics: true}\n"
                + "pools:\n"
                + "  - name: default\n"
                + "    models: [sim-llama]\n"
                + "    upstreams: [{url: http://127.0.0.1:"
                + a.port()
                + ", slots: 2}, {url: http://127.0.0.1:"
                + bPort
                + ", slots: 2}]\n"
                + "    queue: {max: 100, timeout: 60s}\n"
                + "    health: {path: /health, interval: 100ms, timeout: 1s, failures: 1}\n"
                + "    ejection: {after: 1, backoff: 60s, max_backoff: 60s}\n",
            "test.yaml"));
    // One request through each engine first, so class loading is not part of the truth.
    for (int i = 0; i < 2; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", true)).status()).isEqualTo(200);
    }
    awaitFinished(2);
    finished.clear();
    String pool = "llm_pool=\"default\"";
    String m = metrics();
    assertThat(m).contains(gauge("llm_slots_capacity", pool) + " 4.0");
    assertThat(m).contains(gauge("llm_slots_configured", pool) + " 4.0");
    assertThat(m)
        .contains(
            gauge("llm_upstream_slots", pool + ",upstream=\"127.0.0.1:" + bPort + "\"") + " 2.0");

    // B goes away with nothing in flight: the health check alone takes its slots, at once.
    b.close().await(10, TimeUnit.SECONDS);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> metrics().contains(gauge("llm_upstreams_available", pool) + " 1.0"));
    m = metrics();
    assertThat(m).contains(gauge("llm_slots_capacity", pool) + " 2.0");
    assertThat(m).as("configured stays").contains(gauge("llm_slots_configured", pool) + " 4.0");
    assertThat(m)
        .contains(
            gauge("llm_upstream_available", pool + ",upstream=\"127.0.0.1:" + bPort + "\"")
                + " 0.0");

    // Twice what the surviving engine runs at once, all at the same moment.
    AtomicInteger enginePeakWaiting = new AtomicInteger();
    AtomicInteger poolPeakInUse = new AtomicInteger();
    long sampler =
        vertx.setPeriodic(
            5,
            id -> {
              enginePeakWaiting.accumulateAndGet(a.stats().waiting(), Math::max);
              poolPeakInUse.accumulateAndGet(proxy.slotPools().get("default").inUse(), Math::max);
            });
    int n = 4 * ENGINE_SEQS;
    List<Future<Response>> calls = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      calls.add(held());
    }
    for (Future<Response> c : calls) {
      assertThat(c.await(60, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    vertx.cancelTimer(sampler);

    List<Finished> done = awaitFinished(n);
    assertThat(done).extracting(Finished::outcome).containsOnly("success");
    List<JsonObject> phases = new ArrayList<>();
    for (Finished f : done) {
      phases.add(new JsonObject(proxy.records().get(f.traceId())).getJsonObject("phases_ms"));
    }
    assertThat(phases)
        .as("generation is the engine's own work (one hold), never a wait inside it")
        .allSatisfy(
            p ->
                assertThat(p.getDouble("generation"))
                    .isGreaterThanOrEqualTo(HOLD_MS)
                    .isLessThan(2 * HOLD_MS));
    // Two at a time: six waited in queue for at least one other request's hold.
    assertThat(phases)
        .filteredOn(p -> p.getDouble("queue") >= HOLD_MS * 0.75)
        .hasSize(n - ENGINE_SEQS);
    assertThat(poolPeakInUse.get()).isEqualTo(ENGINE_SEQS);
    assertThat(enginePeakWaiting.get()).as("nothing waited inside the engine").isZero();
    assertThat(a.stats().received()).as("every request went to A").isEqualTo(n + 1);

    // B comes back on its port: the health check gives its slots back, with no request passing.
    Simulator back = simulator(bPort);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> metrics().contains(gauge("llm_slots_capacity", pool) + " 4.0"));
    assertThat(metrics()).contains(gauge("llm_upstreams_available", pool) + " 2.0");
    assertThat(back.stats().received()).isZero();
    finished.clear();
    calls.clear();
    for (int i = 0; i < 2 * ENGINE_SEQS; i++) {
      calls.add(held());
    }
    for (Future<Response> c : calls) {
      assertThat(c.await(60, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    assertThat(back.stats().received()).as("it takes requests again").isPositive();
    assertThat(awaitFinished(2 * ENGINE_SEQS))
        .as("four slots again: none of four waited for another's hold")
        .allSatisfy(f -> assertThat(f.phaseMs(Phase.QUEUE)).isLessThan(HOLD_MS * 0.5));
    back.close().await(10, TimeUnit.SECONDS);
    a.close().await(10, TimeUnit.SECONDS);
  }
}
