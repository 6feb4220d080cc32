package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The phase named at the knee, from probes made by hand. */
class LimitingPhaseTest {

  private static Probe.Breach breach(String phase, double limit, double observed, double share) {
    return new Probe.Breach("b", phase, limit, 0.95, observed, share, share - 0.05);
  }

  @Test
  void theBudgetBreachedMostIsNamedWithHowItGrew() {
    Probe pass =
        Probes.of(
            1, 18, Probe.Stage.DOUBLE, 0, 0.02, Map.of("queue", 40.0, "gateway", 2.0), List.of());
    Probe fail =
        Probes.of(
            2,
            24,
            Probe.Stage.DOUBLE,
            0,
            -0.26,
            Map.of("queue", 1900.0, "gateway", 70.0),
            List.of(breach("queue", 250, 1900, 0.31), breach("gateway", 60, 70, 0.08)));
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 20, true, false);
    assertThat(l.phase()).isEqualTo("queue");
    assertThat(l.owner()).isEqualTo("inference-pool capacity");
    assertThat(l.reason())
        .isEqualTo(
            "queue p95 grew from 40 ms to 1.9 s between 18 and 24 req/s; its budget (p95 ≤ 250"
                + " ms) was breached by 31 % of requests (5 % allowed)");
    assertThat(l.ties()).isEmpty();
    assertThat(l.basis()).isEqualTo("budget");
  }

  @Test
  void aSumNamesItsPartThatGrewMost() {
    Probe pass =
        Probes.of(
            1,
            10,
            Probe.Stage.BISECT,
            0,
            0.01,
            Map.of("network_envelope", 5.0, "queue", 10.0, "generation", 600.0),
            List.of());
    Probe fail =
        Probes.of(
            2,
            12,
            Probe.Stage.BISECT,
            0,
            -0.1,
            Map.of("network_envelope", 6.0, "queue", 15.0, "generation", 1400.0),
            List.of(breach("client_total", 1000, 1500, 0.15)));
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 11, true, false);
    assertThat(l.phase()).isEqualTo("generation");
    assertThat(l.budgetPhase()).isEqualTo("client_total");
    assertThat(l.reason()).startsWith("client_total's budget (p95 ≤ 1.0 s) was breached by 15 %");
    assertThat(l.reason()).contains("of its parts, generation p95 grew from 600 ms to 1.4 s");

    LimitingPhase unjoined = LimitingPhase.decide(List.of(pass, fail), 11, false, false);
    assertThat(unjoined.phase()).isEqualTo("client_total");
    assertThat(unjoined.reason()).contains("its parts are unknown without the join");
  }

  @Test
  void onObjectivesAloneTheMostMissedObjectiveAndTheServerPhaseThatGrewMost() {
    Probe pass =
        Probes.of(
            1,
            8,
            Probe.Stage.BISECT,
            0,
            0.01,
            Map.of("queue", 3.0, "generation", 500.0),
            List.of());
    Probe fail =
        new Probe(
            2,
            9,
            Probe.Stage.BISECT,
            0,
            Probe.Verdict.FAIL,
            List.of("attainment 90 % is below 95 %"),
            -0.05,
            Map.of("queue", 300.0, "generation", 520.0),
            0.9,
            9,
            90,
            8.1,
            Map.of("client_ttft", 12L, "tpot", 1L),
            List.of(),
            Path.of("p"),
            0,
            false,
            List.of());
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 8.5, true, false);
    assertThat(l.phase()).isEqualTo("queue");
    assertThat(l.objective()).isEqualTo("client_ttft");
    assertThat(l.basis()).isEqualTo("objectives");
    assertThat(l.reason())
        .startsWith("attainment fell to 90 % at 9 req/s (client_ttft missed most often, by 12")
        .contains("queue p95 grew from 3.0 ms to 300 ms between 8 and 9 req/s");

    LimitingPhase unjoined = LimitingPhase.decide(List.of(pass, fail), 8.5, false, false);
    assertThat(unjoined.phase()).isNull();
    assertThat(unjoined.reason()).contains("without --admin there is no join");
  }

  @Test
  void closeSecondsAreListedAsTies() {
    Probe fail =
        Probes.of(
            2,
            24,
            Probe.Stage.DOUBLE,
            0,
            -0.3,
            Map.of("queue", 900.0, "gateway", 900.0),
            List.of(breach("queue", 250, 900, 0.30), breach("gateway", 60, 900, 0.29)));
    LimitingPhase l = LimitingPhase.decide(List.of(fail), 20, true, false);
    assertThat(l.phase()).isEqualTo("queue");
    assertThat(l.ties()).extracting(LimitingPhase.Tie::phase).containsExactly("gateway");
  }

  @Test
  void noFailureAboveTheCapacityNamesNoPhase() {
    Probe pass = Probes.of(1, 20, Probe.Stage.DOUBLE, 0, 0.02);
    LimitingPhase l = LimitingPhase.decide(List.of(pass), 20, true, false);
    assertThat(l.phase()).isNull();
    assertThat(l.reason()).contains("no probe failed above the capacity");
  }
}
