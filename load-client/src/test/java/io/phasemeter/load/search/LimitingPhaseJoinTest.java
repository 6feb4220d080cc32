package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The limiting phase decided from the join where a sum hides its parts: a TTFT sum counts
 * generation only up to the first token (the BREACH line's rule), and the engine's own queue is
 * compared as a leaf inside generation.
 */
class LimitingPhaseJoinTest {

  private static Probe probe(
      int index,
      double load,
      boolean passed,
      Map<String, Double> p95,
      Map<String, Long> missed,
      List<Probe.Breach> breaches) {
    return new Probe(
        index,
        load,
        Probe.Stage.BISECT,
        0,
        passed ? Probe.Verdict.PASS : Probe.Verdict.FAIL,
        passed ? List.of() : List.of("over"),
        passed ? 0.01 : -0.2,
        p95,
        passed ? 0.99 : 0.6,
        load,
        load * 10,
        Double.NaN,
        missed,
        breaches,
        Path.of("probes", index + ""),
        passed ? 0 : 3,
        false,
        List.of());
  }

  /** Queue grows 300 ms, TTFT about 300 ms, generation (to the last byte) a whole second. */
  private static Map<String, Double> ttftParts(double queue, double generation, double ttft) {
    return Map.of(
        "ttft_envelope", 5.0,
        "gateway", 2.0,
        "receive", 1.0,
        "queue", queue,
        "generation", generation,
        "client_ttft", ttft,
        "network_envelope", 6.0);
  }

  @Test
  void aTtftBudgetBreachedByTheQueueNamesTheQueueNotTheWholeGeneration() {
    Probe pass = probe(1, 10, true, ttftParts(20, 1000, 60), Map.of(), List.of());
    Probe fail =
        probe(
            2,
            12,
            false,
            ttftParts(320, 2000, 362),
            Map.of(),
            List.of(new Probe.Breach("b", "client_ttft", 250, 0.95, 362, 0.4, 0.35)));
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 11, true, false);
    assertThat(l.phase()).isEqualTo("queue");
    assertThat(l.owner()).isEqualTo("inference-pool capacity");
    assertThat(l.budgetPhase()).isEqualTo("client_ttft");
  }

  @Test
  void aTtftObjectiveMissedMostComparesGenerationOnlyToTheFirstToken() {
    Probe pass = probe(1, 10, true, ttftParts(20, 1000, 60), Map.of(), List.of());
    Probe fail =
        probe(
            2,
            12,
            false,
            ttftParts(320, 2000, 362),
            Map.of("client_ttft", 40L, "tpot", 3L),
            List.of());
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 11, true, false);
    assertThat(l.objective()).isEqualTo("client_ttft");
    assertThat(l.basis()).isEqualTo("objectives");
    assertThat(l.phase()).isEqualTo("queue");
  }

  @Test
  void theEnginesOwnQueueIsNamedWhenTheEngineReportsItsSplit() {
    Map<String, Double> before =
        Map.of(
            "queue", 20.0,
            "generation", 500.0,
            "engine_queue", 10.0,
            "prefill", 50.0,
            "decode", 440.0);
    Map<String, Double> after =
        Map.of(
            "queue", 30.0,
            "generation", 1500.0,
            "engine_queue", 900.0,
            "prefill", 60.0,
            "decode", 540.0);
    Probe pass = probe(1, 10, true, before, Map.of(), List.of());
    Probe fail = probe(2, 12, false, after, Map.of("client_total", 30L), List.of());
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 11, true, false);
    assertThat(l.phase()).isEqualTo("engine_queue");
    assertThat(l.owner()).isEqualTo(LimitingPhase.owner("engine_queue"));
    assertThat(l.ties()).isEmpty();
  }

  @Test
  void withoutTheEnginesSplitGenerationIsComparedWhole() {
    Probe pass =
        probe(1, 10, true, Map.of("queue", 20.0, "generation", 500.0), Map.of(), List.of());
    Probe fail =
        probe(
            2,
            12,
            false,
            Map.of("queue", 30.0, "generation", 1500.0),
            Map.of("client_total", 30L),
            List.of());
    assertThat(LimitingPhase.decide(List.of(pass, fail), 11, true, false).phase())
        .isEqualTo("generation");
  }
}
