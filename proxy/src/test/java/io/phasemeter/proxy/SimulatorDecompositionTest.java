package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Injected truth against the real simulator: a known hold before the first token, a known decode
 * step, and a pool of one slot so the second request's wait is known too. The proxy runs in this
 * JVM, so the test and the proxy share {@code System.nanoTime()} and the truth is exact.
 *
 * <p>Tolerance: 60 ms above the truth, 5 ms below. Vert.x timers have millisecond granularity and
 * the simulator emits tokens from timers; on a loaded two-core CI machine an event loop can be late
 * by tens of milliseconds but never early. Both bounds are far tighter than the differences the
 * test distinguishes (hundreds of milliseconds moved between phases).
 */
class SimulatorDecompositionTest extends ProxyTestBase {
  private static final double LATE_MS = 60;
  private static final double EARLY_MS = 5;

  private Simulator simulator(double decodeStepMs) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(0)
                .withSlots(8)
                .withDecodeStepMs(decodeStepMs)
                .withDecodeStepGrowth(0)
                .withPrefillTokensPerSecond(1_000_000))
        .await(10, TimeUnit.SECONDS);
  }

  /** One request through proxy and simulator first, so class loading is not part of the truth. */
  private void warmUp() throws Exception {
    for (boolean stream : new boolean[] {true, false}) {
      assertThat(send(0, 3, stream).await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    awaitFinished(2);
    finished.clear();
  }

  private static String exact(int tokens, boolean stream) {
    return "{\"model\":\"sim-llama\",\"stream\":"
        + stream
        + ",\"max_tokens\":"
        + tokens
        + ",\"min_tokens\":"
        + tokens
        + ",\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  }

  private Future<Response> send(long holdMs, int tokens, boolean stream) {
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("x-sim-ttft-ms", Long.toString(holdMs));
    return callAsync(HttpMethod.POST, "/v1/chat/completions", exact(tokens, stream), h);
  }

  private static void assertNear(double measuredMs, double truthMs, String what) {
    assertThat(measuredMs)
        .as(what + " (truth " + truthMs + " ms)")
        .isBetween(truthMs - EARLY_MS, truthMs + LATE_MS);
  }

  @Test
  void queueWaitAndGenerationAreAttributedToTheirOwnPhases() throws Exception {
    Simulator sim = simulator(10);
    startProxy(config(sim.port(), 1, null));
    warmUp();

    long sentA = System.nanoTime();
    Future<Response> a = send(400, 5, true);
    Awaitility.await().until(() -> proxy.slotPools().get("default").inUse() == 1);
    long sentB = System.nanoTime();
    Future<Response> b = send(200, 5, true);
    assertThat(a.await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    assertThat(b.await(20, TimeUnit.SECONDS).status()).isEqualTo(200);

    List<Finished> done =
        awaitFinished(2).stream().sorted(Comparator.comparingLong(Finished::rootStart)).toList();
    Finished first = done.get(0);
    Finished second = done.get(1);
    // Generation truth: the hold, then one decode step per further token (prefill ~ 0 here).
    double genA = 400 + 4 * 10;
    double genB = 200 + 4 * 10;
    assertNear(first.phaseMs(Phase.GENERATION), genA, "A generation");
    assertNear(second.phaseMs(Phase.GENERATION), genB, "B generation");
    assertThat(first.phaseMs(Phase.QUEUE)).as("A never waited").isLessThan(EARLY_MS + 10);
    // B waits from its arrival until A's slot comes back at A's end.
    double arrivalGapMs = (sentB - sentA) / 1e6;
    assertNear(second.phaseMs(Phase.QUEUE), genA - arrivalGapMs, "B queue");
    // And the wait is not in B's generation, nor A's generation in B's queue beyond A's end.
    assertThat(second.phaseMs(Phase.GENERATION)).isLessThan(genA);
    // Server TTFT of B = its queue + its hold (the first content token comes right after it).
    assertThat(second.ttftNanos() / 1e6)
        .isCloseTo(second.phaseMs(Phase.QUEUE) + 200, within(LATE_MS));
    // TPOT is the decode step.
    assertThat(first.tpotNanos() / 1e6).isCloseTo(10.0, within(8.0));
    for (Finished f : done) {
      assertThat(f.unattributedNanos() / 1e6).isBetween(0.0, 5.0 + f.rootNanos() / 1e6 / 20);
      assertThat(f.outputTokens()).isEqualTo(5);
    }
    assertIdle();
  }

  @Test
  void nonStreamedGenerationCoversTheWholeUpstreamTime() throws Exception {
    Simulator sim = simulator(20);
    startProxy(config(sim.port(), 2, null));
    warmUp();
    Response r = send(150, 6, false).await(20, TimeUnit.SECONDS);
    assertThat(r.status()).isEqualTo(200);
    Finished f = awaitFinished(1).get(0);
    assertNear(f.phaseMs(Phase.GENERATION), 150 + 5 * 20, "generation");
    assertThat(f.outputTokens()).isEqualTo(6);
    assertThat(r.headers().get("server-timing")).contains("generation;dur=");
  }

  @Test
  void cancelledStreamReleasesTheSimulatorSequenceToo() throws Exception {
    Simulator sim = simulator(20);
    startProxy(config(sim.port(), 1, null));
    var req = openChat();
    var resp = req.send(exact(500, true)).await(5, TimeUnit.SECONDS);
    io.vertx.core.Promise<Void> someTokens = io.vertx.core.Promise.promise();
    int[] chunks = {0};
    resp.handler(
        buf -> {
          if (++chunks[0] >= 3) {
            someTokens.tryComplete();
          }
        });
    someTokens.future().await(10, TimeUnit.SECONDS);
    req.connection().close();
    Awaitility.await().until(() -> sim.stats().cancelled() == 1 && sim.stats().running() == 0);
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("cancelled");
    assertIdle();
  }
}
