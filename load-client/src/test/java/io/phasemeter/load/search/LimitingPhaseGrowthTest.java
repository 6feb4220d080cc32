package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The growth path's ties and its errors-only basis; the run's own reasons read from its log. */
class LimitingPhaseGrowthTest {
  @TempDir Path dir;

  private static Probe probe(int i, double load, boolean passed, Map<String, Double> p95) {
    return new Probe(
        i,
        load,
        Probe.Stage.BISECT,
        0,
        passed ? Probe.Verdict.PASS : Probe.Verdict.FAIL,
        passed ? List.of() : List.of("error rate 5 % is above --max-error-rate 1 %"),
        passed ? 0.01 : -0.04,
        p95,
        Double.NaN,
        load,
        load * 10,
        Double.NaN,
        Map.of(),
        List.of(),
        Path.of("probes", i + ""),
        passed ? 0 : 3,
        false,
        List.of());
  }

  @Test
  void aFailureOnErrorsAloneNamesTheGrowthWithItsTies() {
    Probe pass = probe(1, 10, true, Map.of("queue", 10.0, "gateway", 5.0, "receive", 1.0));
    Probe fail = probe(2, 12, false, Map.of("queue", 210.0, "gateway", 195.0, "receive", 2.0));
    LimitingPhase l = LimitingPhase.decide(List.of(pass, fail), 11, true, false);
    assertThat(l.basis()).isEqualTo("errors");
    assertThat(l.objective()).isNull();
    assertThat(l.phase()).isEqualTo("queue");
    assertThat(l.ties()).extracting(LimitingPhase.Tie::phase).containsExactly("gateway");
    assertThat(l.reason()).startsWith("the probe at 12 req/s failed: error rate 5 %");
  }

  @Test
  void theRunsOwnReasonsAreTheLinesUnderInvalidRunOrItsLastLines() throws Exception {
    Path log = dir.resolve("run.log");
    Files.writeString(
        log,
        "phasemeter load: starting\n"
            + "phasemeter load: INVALID RUN (exit 4):\n"
            + "  no request succeeded\n"
            + "  join coverage 0 %\n"
            + "phasemeter load: done\n");
    assertThat(SearchRunner.logReasons(log, 4))
        .containsExactly("no request succeeded", "join coverage 0 %");
    Files.writeString(log, "a\nb\n\nphasemeter load: admin feed did not answer\n");
    assertThat(SearchRunner.logReasons(log, 2))
        .containsExactly("b", "phasemeter load: admin feed did not answer");
    assertThat(SearchRunner.logReasons(log, 0)).isEmpty();
    assertThat(SearchRunner.logReasons(dir.resolve("none.log"), 2)).isEmpty();
  }
}
