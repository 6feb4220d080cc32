package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The one rule for a client late on its schedule: it makes a probe invalid unless the deployment
 * failed on something the lateness cannot explain; a later probe's exit 2 is invalid, not fatal;
 * the run's own exit with no reason found is kept as a failure.
 */
class ProbeJudgeLagTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final ProbeJudge judge =
      new ProbeJudge(Map.of("interactive", 0.95, "lag", 0.95, "errors", 0.95), 0.95);

  private static JsonNode summary(String extra, String budgets, String phases) throws Exception {
    return JSON.readTree(
        """
        {
          "v": 1,
          "requests": {"sent": 130, "ok": 130, "errors": 0, "dropped": 0, "invalid": 0,
                       "error_rate": 0.0},
          "failures": {"failed": 0, "limit": 10, "reasons": [], "other": {"count": 0}},
          "request_throughput": 2.1,
          "output_token_throughput": 260.0,
          %s
          "phases": {%s},
          "budgets": [%s],
          "conditions": {"max_error_rate": 0.01, "max_in_flight": 1024}
        }
        """
            .formatted(extra, phases, budgets));
  }

  private static String budget(String name, String phase, boolean breached, double observed) {
    return """
        {"name": "%s", "phase": "%s", "limit_ms": 250.0, "observed_ms": %s,
         "breached": %s, "over_limit_share": %s, "at_or_below": 0, "count": 130}
        """
        .formatted(name, phase, observed, breached, breached ? 0.5 : 0.0);
  }

  private static final String LATE = "\"schedule_lag\": {\"p95_ms\": 80.0}";

  private Probe judge(JsonNode s, int exit, boolean first) {
    return judge.judge(
        new ProbeJudge.Run(
            3, 10, Probe.Stage.BISECT, 0, Path.of("p"), exit, s, null, List.of("why"), first));
  }

  @Test
  void aScheduleLagBudgetBreachDoesNotHideTheServersFailure() throws Exception {
    Probe p =
        judge(
            summary(
                "",
                budget("interactive", "queue", true, 900)
                    + ","
                    + budget("lag", "schedule_lag", true, 400),
                "\"queue\": {\"p95_ms\": 900.0}, \"schedule_lag\": {\"p95_ms\": 40.0}"),
            3,
            false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.notes()).singleElement().asString().contains("schedule_lag p95 400 ms");

    Probe held =
        judge(
            summary(
                "",
                budget("interactive", "queue", false, 100)
                    + ","
                    + budget("lag", "schedule_lag", true, 400),
                "\"queue\": {\"p95_ms\": 100.0}"),
            3,
            false);
    assertThat(held.verdict()).isEqualTo(Probe.Verdict.INVALID);
  }

  @Test
  void objectivesAloneMissedWhileTheClientLagsIsAFailureNotInvalid() throws Exception {
    String goodput =
        """
        "goodput": {"objectives_ms": {"client_ttft": 500.0}, "source": "--slo",
          "sent": 130, "good": 90, "failed": 0, "attainment": 0.69, "request_goodput": 1.4,
          "missed": {"client_ttft": 40}},
        """;
    Probe p = judge(summary(goodput, "", LATE), 3, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.reasons()).singleElement().asString().startsWith("attainment 69 %");
    assertThat(p.notes()).singleElement().asString().contains("failure stands");
  }

  @Test
  void aBreachOfTheClientsOwnPhaseWhileItLagsIsInvalid() throws Exception {
    Probe p =
        judge(
            summary(
                "",
                budget("interactive", "client_ttft", true, 900),
                "\"client_ttft\": {\"p95_ms\": 900.0}, " + LATE),
            3,
            false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.INVALID);
  }

  @Test
  void anErrorRateBudgetFromTheBudgetsFileFails() throws Exception {
    String budgets =
        """
        {"name": "errors", "phase": "error_rate", "limit_ms": 0.01, "observed_ms": 0.05,
         "breached": true}
        """;
    Probe p = judge(summary("", budgets, LATE), 3, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.reasons()).singleElement().asString().contains("max_error_rate");
    assertThat(p.margin()).isEqualTo(0.01 - 0.05, org.assertj.core.data.Offset.offset(1e-9));
  }

  @Test
  void aLaterProbesExit2IsInvalidAndRepeatedNotFatal() {
    Probe first = judge(null, 2, true);
    assertThat(first.fatal()).isTrue();
    Probe later = judge(null, 2, false);
    assertThat(later.fatal()).isFalse();
    assertThat(later.verdict()).isEqualTo(Probe.Verdict.INVALID);
    assertThat(later.reasons()).containsExactly("why");
  }

  @Test
  void aNonZeroExitWithNoReasonFoundIsKeptAsAFailure() throws Exception {
    Probe p = judge(summary("", budget("interactive", "queue", false, 100), ""), 4, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.reasons()).containsExactly("exit 4 (why)");
  }
}
