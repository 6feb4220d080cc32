package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

/** A probe's verdict from hand-written summary.json files, as a run writes them. */
class ProbeJudgeTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final ProbeJudge judge = new ProbeJudge(Map.of("interactive", 0.95), 0.95);

  /** The goodput object of summary.json as the goodput change writes it (its contract). */
  private static final String GOODPUT =
      """
      "goodput": {
        "objectives_ms": {"client_ttft": 500.0, "tpot": 50.0, "client_total": 10000.0},
        "source": "--slo",
        "sent": 130, "good": 123, "failed": 2, "attainment": %s,
        "request_goodput": 2.05, "output_token_goodput": 250.1,
        "missed": {"client_ttft": 5, "tpot": 2, "client_total": 0},
        "first_missed": {"client_ttft": 5, "tpot": 0, "client_total": 0, "error": 2},
        "unjudged": {"queue": 0}
      },
      """;

  private static JsonNode summary(String extra, String budgets, String phases) throws Exception {
    return JSON.readTree(
        """
        {
          "v": 1,
          "requests": {"sent": 130, "ok": 130, "errors": 0, "dropped": 0, "invalid": 0,
                       "error_rate": 0.0},
          "failures": {"failed": 0, "limit": 10, "reasons": [], "other": {"count": 0}},
          "join_coverage": 1.0,
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

  private static String queueBudget(boolean breached, double share, double observed) {
    return """
        {"name": "interactive", "phase": "queue", "limit_ms": 250.0, "observed_ms": %s,
         "breached": %s, "over_limit_share": %s, "at_or_below": 0, "count": 130}
        """
        .formatted(observed, breached, share);
  }

  private Probe judge(JsonNode s, int exit, boolean first) {
    return judge.judge(
        new ProbeJudge.Run(
            1, 10, Probe.Stage.DOUBLE, 0, Path.of("p"), exit, s, null, List.of("why"), first));
  }

  @Test
  void aRunThatHoldsEveryBudgetPassesWithItsMargin() throws Exception {
    Probe p =
        judge(
            summary("", queueBudget(false, 0.02, 120), "\"queue\": {\"p95_ms\": 120.0}"), 0, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.PASS);
    assertThat(p.margin()).isCloseTo(0.03, Offset.offset(1e-9));
    assertThat(p.p95("queue")).isEqualTo(120.0);
    assertThat(p.attainment()).isNaN();
  }

  @Test
  void aBreachedBudgetFailsWithItsExcess() throws Exception {
    Probe p =
        judge(
            summary("", queueBudget(true, 0.31, 1900), "\"queue\": {\"p95_ms\": 1900.0}"),
            3,
            false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.breaches())
        .singleElement()
        .satisfies(
            b -> {
              assertThat(b.phase()).isEqualTo("queue");
              assertThat(b.excess()).isCloseTo(0.26, Offset.offset(1e-9));
            });
    assertThat(p.reasons())
        .containsExactly(
            "queue p95 1.9 s > 250 ms (31 % of requests above the limit, 5 % allowed; budget"
                + " interactive)");
    assertThat(p.margin()).isCloseTo(-0.26, Offset.offset(1e-9));
  }

  @Test
  void theGoodputObjectIsRead() throws Exception {
    Probe pass = judge(summary(GOODPUT.formatted("0.96"), "", ""), 0, false);
    assertThat(pass.verdict()).isEqualTo(Probe.Verdict.PASS);
    assertThat(pass.attainment()).isEqualTo(0.96);
    assertThat(pass.requestGoodput()).isEqualTo(2.05);
    assertThat(pass.missed()).containsEntry("client_ttft", 5L).containsEntry("tpot", 2L);
    assertThat(pass.margin()).isCloseTo(0.01, Offset.offset(1e-9));

    Probe fail = judge(summary(GOODPUT.formatted("0.946"), "", ""), 0, false);
    assertThat(fail.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(fail.reasons())
        .containsExactly("attainment 95 % is below 95 % (missed: client_ttft 5, tpot 2)");
  }

  @Test
  void droppedIterationsAreAnOverloadFailure() throws Exception {
    JsonNode s =
        JSON.readTree(summary("", "", "").toString().replace("\"dropped\":0", "\"dropped\":12"));
    Probe p = judge(s, 4, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.reasons()).anyMatch(r -> r.startsWith("overload: 12 iterations dropped"));
  }

  @Test
  void timeoutsFail() throws Exception {
    JsonNode s =
        JSON.readTree(
            summary("", "", "")
                .toString()
                .replace(
                    "\"reasons\":[]",
                    "\"reasons\":[{\"class\":\"TIMEOUT\",\"reason\":\"\",\"count\":1}]"));
    Probe p = judge(s, 0, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(p.reasons()).contains("1 of 130 requests timed out (--timeout)");
  }

  @Test
  void lowJoinCoverageMakesTheProbeInvalid() throws Exception {
    String gate =
        """
        {"name": "interactive", "phase": "join_coverage", "limit_ms": 0.95, "observed_ms": 0.5,
         "breached": true}
        """;
    Probe p = judge(summary("", gate, ""), 4, false);
    assertThat(p.verdict()).isEqualTo(Probe.Verdict.INVALID);
    assertThat(p.reasons())
        .containsExactly("join coverage 50 % is below the budgets' min_join_coverage 95 %");
  }

  @Test
  void aClientLateOnItsScheduleIsInvalidUnlessTheServerGaveWay() throws Exception {
    Probe late =
        judge(
            summary("", queueBudget(false, 0.0, 1), "\"schedule_lag\": {\"p95_ms\": 80.0}"),
            0,
            false);
    assertThat(late.verdict()).isEqualTo(Probe.Verdict.INVALID);
    assertThat(late.reasons()).singleElement().asString().contains("schedule_lag p95 80 ms");

    Probe server =
        judge(
            summary("", queueBudget(true, 0.5, 900), "\"schedule_lag\": {\"p95_ms\": 80.0}"),
            3,
            false);
    assertThat(server.verdict()).isEqualTo(Probe.Verdict.FAIL);
    assertThat(server.notes())
        .singleElement()
        .asString()
        .contains("the deployment's own failure stands");
  }

  @Test
  void nothingSucceedingAtTheFirstProbeIsFatalAndLaterAFailure() throws Exception {
    JsonNode none =
        JSON.readTree(
            summary("", "", "")
                .toString()
                .replace("\"ok\":130", "\"ok\":0")
                .replace(
                    "\"reasons\":[]",
                    "\"reasons\":[{\"class\":\"HTTP_4XX\",\"reason\":\"404\",\"count\":130}]"));
    Probe first = judge(none, 4, true);
    assertThat(first.fatal()).isTrue();
    assertThat(first.reasons().get(0)).contains("no request succeeded").contains("HTTP_4XX 404");
    assertThat(first.reasons()).contains("why");
    Probe later = judge(none, 4, false);
    assertThat(later.fatal()).isFalse();
    assertThat(later.verdict()).isEqualTo(Probe.Verdict.FAIL);
  }

  @Test
  void badInputIsFatalAndNoReportIsInvalid() {
    Probe usage = judge(null, 2, true);
    assertThat(usage.fatal()).isTrue();
    assertThat(usage.reasons()).containsExactly("why");
    Probe none = judge(null, 4, false);
    assertThat(none.fatal()).isFalse();
    assertThat(none.verdict()).isEqualTo(Probe.Verdict.INVALID);
  }
}
