package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The committed rules are valid Prometheus rules, and each alert fires when its phase's quantile is
 * over the limit and stays silent under it ({@code promtool test rules}).
 */
class PromtoolRulesTest {
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final String POOL = "default";

  @TempDir Path dir;

  @BeforeEach
  void needPromtool() {
    Promtool.require();
  }

  @Test
  void committedRulesPassCheckRules() {
    assertThat(Promtool.runOk("check", "rules", AlertRulesTest.ALERTS.toString()))
        .contains("SUCCESS: 5 rules found");
  }

  @Test
  void prometheusConfigIsValidAndLoadsTheRules() {
    assertThat(Promtool.runOk("check", "config", "../dashboards/prometheus.yml"))
        .contains("SUCCESS")
        .contains("alerts.yaml");
  }

  @Test
  void everyCommittedAlertFiresOverItsLimitAndOnlyThen() throws Exception {
    List<AlertRule> rules = AlertRules.rules(Budgets.load(AlertRulesTest.BUDGETS));
    Map<String, JsonNode> committed = committedRules(AlertRulesTest.ALERTS);
    assertThat(committed.keySet())
        .as("alerts in dashboards/alerts.yaml")
        .containsExactlyElementsOf(rules.stream().map(AlertRule::alert).toList());
    String out = runUnitTests(AlertRulesTest.ALERTS.toAbsolutePath(), rules, committed);
    assertThat(out).contains("SUCCESS");
  }

  @Test
  void everyServerSidePhaseAndAModelBudgetWorkInPrometheus() throws Exception {
    StringBuilder limits = new StringBuilder();
    // Round limits, so that 1.5 x limit prints the same however Prometheus's floats round.
    int ms = 40;
    for (BudgetPhase p : BudgetPhase.values()) {
      limits.append(limits.length() == 0 ? "" : ", ").append(p.key()).append(": ").append(ms);
      ms += 20;
    }
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: every-phase, quantile: 0.9, window: 5m, limits_ms: {"
                + limits
                + "}, max_error_rate: 0.02, min_join_coverage: 0.9}\n"
                + "  - {name: sim.only, model: sim-llama, quantile: 0.99, window: 30m,"
                + " limits_ms: {queue: 5000, tpot: 80}, max_error_rate: 0, min_join_coverage: 0}\n",
            "test.yaml");
    Path rulesFile = dir.resolve("rules.yaml");
    Files.writeString(rulesFile, AlertRules.render(budgets, "test.yaml"));
    Promtool.runOk("check", "rules", rulesFile.toString());
    List<AlertRule> rules = AlertRules.rules(budgets);
    // 15 server-side phases of every-phase and its error rate, 2 phases of sim.only and its error
    // rate
    assertThat(rules).hasSize(15 + 1 + 2 + 1);
    runUnitTests(rulesFile, rules, committedRules(rulesFile));
  }

  private String runUnitTests(Path rulesFile, List<AlertRule> rules, Map<String, JsonNode> yaml)
      throws Exception {
    StringBuilder t = new StringBuilder();
    t.append("rule_files:\n  - ").append(q(rulesFile.toAbsolutePath().toString())).append('\n');
    t.append("evaluation_interval: 1m\n");
    t.append("tests:\n");
    for (AlertRule r : rules) {
      JsonNode annotations = yaml.get(r.alert()).path("annotations");
      if (r.errorRate()) {
        errorRateCase(t, r, annotations, true);
        errorRateCase(t, r, annotations, false);
      } else {
        phaseCase(t, r, annotations, true);
        phaseCase(t, r, annotations, false);
      }
    }
    Path testFile = dir.resolve("alerts_test.yaml");
    Files.writeString(testFile, t.toString());
    String out = Promtool.runOk("test", "rules", testFile.toString());
    return out;
  }

  /**
   * Over: per minute 18 requests in (L/2, L] and 2 in (L, 2L]: p95 = 1.5 L although 90% are under.
   * Under: 39 in (L/2, L] and 1 in (L, 2L]: the quantile stays just under L. For quantiles other
   * than 0.95 the counts are scaled so the same holds.
   */
  private static void phaseCase(StringBuilder t, AlertRule r, JsonNode annotations, boolean over) {
    Budget b = r.budget();
    BudgetPhase p = r.phase();
    double limit = b.limitMs(p) / 1000.0;
    double q = b.quantile();
    // "over": a share (1 - q) * 2 above the limit puts the quantile in the middle of (L, 2L].
    // "under": a share (1 - q) / 2 above the limit keeps the quantile below L.
    long total = Math.round(40 / (1 - q));
    long above = over ? Math.round(total * (1 - q) * 2) : Math.round(total * (1 - q) / 2);
    long below = total - above;
    String labels = join(p.matcher(), modelLabel(b), "llm_pool=\"" + POOL + "\"");
    double[] le = {limit / 2, limit, limit * 2, Double.POSITIVE_INFINITY};
    long[] cumulative = {0, below, total, total};
    Duration eval = evalTime(r);
    long steps = eval.toMinutes() + 1;
    caseHeader(t, r, over, eval);
    for (int i = 0; i < le.length; i++) {
      t.append("      - series: ")
          .append(
              q(
                  p.metric()
                      + "_bucket{"
                      + labels
                      + ",le=\""
                      + (Double.isInfinite(le[i]) ? "+Inf" : plain(le[i]))
                      + "\"}"))
          .append('\n');
      t.append("        values: ").append(q("0+" + cumulative[i] + "x" + steps)).append('\n');
    }
    // histogram_quantile: rank = q * total falls in (L, 2L] at (rank - below) / above of the way.
    double rank = q * total;
    double value = limit + limit * (rank - below) / above;
    String human = GoFormat.humanizeDuration(value);
    expectation(t, r, annotations, over, eval, "{{ $value | humanizeDuration }}", human);
  }

  private static void errorRateCase(
      StringBuilder t, AlertRule r, JsonNode annotations, boolean over) {
    Budget b = r.budget();
    // Over: errors at twice the limit (at least 5%); under: none at all when the limit is 0,
    // otherwise half the limit.
    long total = 1000;
    double share = over ? Math.max(2 * b.maxErrorRate(), 0.05) : b.maxErrorRate() / 2;
    long errors = Math.round(total * share);
    Duration eval = evalTime(r);
    long steps = eval.toMinutes() + 1;
    caseHeader(t, r, over, eval);
    String base =
        join(modelLabel(b), "llm_pool=\"" + POOL + "\"", "gen_ai_operation_name=\"chat\"");
    t.append("      - series: ")
        .append(q("gen_ai_server_request_duration_seconds_count{" + base + ",outcome=\"success\"}"))
        .append('\n');
    t.append("        values: ").append(q("0+" + (total - errors) + "x" + steps)).append('\n');
    t.append("      - series: ")
        .append(
            q(
                "gen_ai_server_request_duration_seconds_count{"
                    + base
                    + ",outcome=\"upstream_error\"}"))
        .append('\n');
    t.append("        values: ").append(q("0+" + errors + "x" + steps)).append('\n');
    String human = GoFormat.humanizePercentage((double) errors / total);
    expectation(t, r, annotations, over, eval, "{{ $value | humanizePercentage }}", human);
  }

  /** Past the window and the for duration, so the rate covers only the injected traffic. */
  private static Duration evalTime(AlertRule r) {
    return r.budget().window().plus(r.forDuration()).plusMinutes(2);
  }

  private static void caseHeader(StringBuilder t, AlertRule r, boolean over, Duration eval) {
    t.append("  - name: ").append(q(r.alert() + (over ? " over the limit" : " under the limit")));
    t.append("\n    interval: 1m\n    input_series:\n");
  }

  private static void expectation(
      StringBuilder t,
      AlertRule r,
      JsonNode annotations,
      boolean over,
      Duration eval,
      String template,
      String value) {
    t.append("    alert_rule_test:\n");
    t.append("      - eval_time: ").append(eval.toMinutes()).append("m\n");
    t.append("        alertname: ").append(r.alert()).append('\n');
    if (!over) {
      t.append("        exp_alerts: []\n");
      return;
    }
    t.append("        exp_alerts:\n");
    t.append("          - exp_labels:\n");
    Map<String, String> labels = new LinkedHashMap<>(r.labels());
    labels.put("llm_pool", POOL);
    labels.forEach(
        (k, v) -> t.append("              ").append(k).append(": ").append(q(v)).append('\n'));
    t.append("            exp_annotations:\n");
    annotations
        .fields()
        .forEachRemaining(
            e ->
                t.append("              ")
                    .append(e.getKey())
                    .append(": ")
                    .append(
                        q(
                            e.getValue()
                                .asText()
                                .replace(template, value)
                                .replace("{{ $labels.llm_pool }}", POOL)))
                    .append('\n'));
  }

  private static Map<String, JsonNode> committedRules(Path rulesFile) throws Exception {
    Map<String, JsonNode> out = new LinkedHashMap<>();
    for (JsonNode group : YAML.readTree(Files.readString(rulesFile)).path("groups")) {
      for (JsonNode rule : group.path("rules")) {
        out.put(rule.path("alert").asText(), rule);
      }
    }
    return out;
  }

  private static String modelLabel(Budget b) {
    return "gen_ai_request_model=\"" + (b.anyModel() ? "sim-llama" : b.model()) + "\"";
  }

  private static String join(String... parts) {
    List<String> kept = new ArrayList<>();
    for (String s : parts) {
      if (!s.isEmpty()) {
        kept.add(s);
      }
    }
    return String.join(",", kept);
  }

  private static String plain(double v) {
    return BigDecimal.valueOf(v).stripTrailingZeros().toPlainString();
  }

  private static String q(String s) {
    return "'" + s.replace("'", "''") + "'";
  }
}
