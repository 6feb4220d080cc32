package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.proxy.telemetry.BucketLayout;
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
  static final String POOL = "default";

  /**
   * Whether fixtures write {@code le} as Prometheus 3 stores it ({@code 0.0003}) rather than as
   * {@code /metrics} prints it ({@code 3.0E-4}); see {@link #subMillisecondLimits}.
   */
  private static boolean normalisedLe;

  @TempDir Path dir;

  @BeforeEach
  void needPromtool() {
    Promtool.require();
  }

  @Test
  void committedRulesPassCheckRules() {
    assertThat(Promtool.runOk("check", "rules", AlertRulesTest.ALERTS.toString()))
        .contains("SUCCESS: 6 rules found");
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
    String out = runUnitTests(dir, AlertRulesTest.ALERTS.toAbsolutePath(), rules, committed);
    assertThat(out).contains("SUCCESS");
  }

  @Test
  void burnRateAlertsFireOnBothWindowsOfAConditionAndOnlyThen() throws Exception {
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: chat, quantile: 0.95, window: 10m, slo_period: 30d,"
                + " limits_ms: {queue: 250, ttft: 1200}, max_error_rate: 0.01,"
                + " min_join_coverage: 0}\n"
                + "  - {name: batch.slo, model: sim-llama, quantile: 0.99, window: 30m,"
                + " slo_period: 28d, limits_ms: {total: 60000}, max_error_rate: 0.05,"
                + " min_join_coverage: 0}\n",
            "slo.yaml");
    Path rulesFile = dir.resolve("slo-rules.yaml");
    Files.writeString(rulesFile, AlertRules.render(budgets, "slo.yaml"));
    Promtool.runOk("check", "rules", rulesFile.toString());
    List<AlertRule> rules = AlertRules.rules(budgets);
    // Fast and slow burn per phase, and each budget's error rate.
    assertThat(rules).hasSize(2 * 2 + 1 + 2 + 1);
    assertThat(runUnitTests(dir, rulesFile, rules, committedRules(rulesFile))).contains("SUCCESS");
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
                + " limits_ms: {queue: 5000, tpot: 80}, max_error_rate: 0, min_join_coverage: 0}\n"
                + "  - {name: team.a, tenant: team-a, quantile: 0.95, window: 10m,"
                + " limits_ms: {ttft: 500, tpot: 50, total: 3000}, max_error_rate: 0.05,"
                + " min_join_coverage: 0}\n",
            "test.yaml");
    Path rulesFile = dir.resolve("rules.yaml");
    Files.writeString(rulesFile, AlertRules.render(budgets, "test.yaml"));
    Promtool.runOk("check", "rules", rulesFile.toString());
    List<AlertRule> rules = AlertRules.rules(budgets);
    // 15 server-side phases of every-phase and its error rate, 2 phases of sim.only and its error
    // rate, 3 of team.a (one tenant's, beside another tenant's series that break every limit) and
    // its error rate
    assertThat(rules).hasSize(15 + 1 + 2 + 1 + 3 + 1);
    runUnitTests(dir, rulesFile, rules, committedRules(rulesFile));
  }

  /**
   * Below 1 ms Java prints a boundary as {@code 3.0E-4}, and Prometheus 3 (or 2.x scraping
   * protobuf) stores it as {@code 0.0003}: the rules match either, and fire and hold alike.
   */
  @Test
  void subMillisecondLimits() throws Exception {
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: fast, quantile: 0.95, window: 5m, limits_ms: {gateway: 0.3,"
                + " receive: 0.05, write: 0.15, queue: 250}, max_error_rate: 0.02,"
                + " min_join_coverage: 0}\n",
            "fast.yaml");
    Path rulesFile = dir.resolve("fast-rules.yaml");
    Files.writeString(rulesFile, AlertRules.render(budgets, "fast.yaml"));
    Promtool.runOk("check", "rules", rulesFile.toString());
    assertThat(Files.readString(rulesFile))
        .contains("le=~`3\\.0E-4|0\\.0003`")
        .contains("le=~`5\\.0E-5|5e-05`")
        .contains("le=~`1\\.5E-4|0\\.00015`")
        .contains("le=\"0.25\"");
    List<AlertRule> rules = AlertRules.rules(budgets);
    try {
      for (boolean normalised : new boolean[] {false, true}) {
        normalisedLe = normalised;
        assertThat(runUnitTests(dir, rulesFile, rules, committedRules(rulesFile)))
            .as("le as %s", normalised ? "Prometheus 3 stores it" : "/metrics prints it")
            .contains("SUCCESS");
      }
    } finally {
      normalisedLe = false;
    }
  }

  /**
   * Writes and runs a {@code promtool test rules} file for {@code rules} (of {@code rulesFile},
   * whose annotations {@code yaml} holds by alert name): each fires over its limit and holds under
   * it.
   */
  static String runUnitTests(
      Path dir, Path rulesFile, List<AlertRule> rules, Map<String, JsonNode> yaml)
      throws Exception {
    boolean burns = rules.stream().anyMatch(r -> r.budget().burnRates());
    StringBuilder t = new StringBuilder();
    t.append("rule_files:\n  - ").append(q(rulesFile.toAbsolutePath().toString())).append('\n');
    // Burn-rate fixtures span days: evaluating them every minute would take promtool minutes.
    t.append("evaluation_interval: ").append(burns ? "10m" : "1m").append('\n');
    t.append("tests:\n");
    for (AlertRule r : rules) {
      JsonNode annotations = yaml.get(r.alert()).path("annotations");
      if (r.errorRate()) {
        errorRateCase(t, r, annotations, true);
        errorRateCase(t, r, annotations, false);
      } else if (r.attainment() && !r.budget().burnRates()) {
        AttainmentCases.simple(t, r, annotations);
      } else if (r.budget().burnRates()) {
        burnCases(t, r, annotations);
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
   * The simple form: per minute {@code total} requests, of which a share of twice {@code 1 − q}
   * (over) or one request fewer than {@code 1 − q} (just inside) took longer than the limit. The
   * series are the bucket whose {@code le} is the limit, {@code +Inf} and {@code _count}.
   */
  private static void phaseCase(StringBuilder t, AlertRule r, JsonNode annotations, boolean over) {
    Budget b = r.budget();
    long total = Math.round(40 / (1 - b.quantile()));
    // Under: one request a minute fewer than the tie (at an exact tie, rate()'s floating point
    // can land an ulp either side; the counts themselves hold, see BudgetVerdictAgreementTest).
    long above =
        over
            ? Math.round(total * (1 - b.quantile()) * 2)
            : Math.round(total * (1 - b.quantile())) - 1;
    Duration eval = evalTime(r);
    caseHeader(t, r, over, eval, "1m");
    long steps = eval.toMinutes() + 1;
    phaseSeries(t, b, r.phase(), List.of(new long[] {steps, total, above}));
    String human = GoFormat.humanizePercentage((double) above / total);
    expectation(t, r, annotations, over, eval, human);
  }

  /**
   * The burn-rate forms, with {@code a = 1 − q} the allowed share above the limit ({@code 1 −
   * min_attainment}, the share allowed to miss, for an attainment rule). Fast burn (page): 16a
   * above for two long windows fires on the first condition (value 16a); 8a for the second's long
   * window and an hour fires on the second only (value 8a); 4a stays silent; and 16a followed by a
   * recovery longer than the second's short window is silent, the long windows still hot. Slow burn
   * (ticket): 2a for its long window and 8h fires (value 2a); a/2 stays silent; and 2a followed by
   * a recovery longer than its short window is silent.
   */
  private static void burnCases(StringBuilder t, AlertRule r, JsonNode annotations) {
    Budget b = r.budget();
    // The allowed share: above a phase's limit, or of requests that missed an objective.
    double a = r.attainment() ? 1 - b.minAttainment() : 1 - b.quantile();
    if (r.alert().endsWith("FastBurn")) {
      long long1 = AlertRules.FAST_BURN.get(0).longWindow(b).toMinutes();
      long long2 = AlertRules.FAST_BURN.get(1).longWindow(b).toMinutes();
      long short2 = AlertRules.FAST_BURN.get(1).shortWindow(b).toMinutes();
      burnCase(t, r, annotations, "fast", "1m", 1, List.of(seg(2 * long1, 16 * a)), 16 * a);
      burnCase(t, r, annotations, "slow", "1m", 1, List.of(seg(long2 + 60, 8 * a)), 8 * a);
      burnCase(t, r, annotations, "under", "1m", 1, List.of(seg(long2 + 60, 4 * a)), -1);
      burnCase(
          t,
          r,
          annotations,
          "recovered",
          "1m",
          1,
          List.of(seg(2 * long1, 16 * a), seg(short2 + 15, 0)),
          -1);
    } else {
      // Ten-minute samples: three days at one a minute would only slow promtool down.
      long long1 = AlertRules.SLOW_BURN.get(0).longWindow(b).toMinutes() / 10;
      long short1 = AlertRules.SLOW_BURN.get(0).shortWindow(b).toMinutes() / 10;
      burnCase(t, r, annotations, "burning", "10m", 10, List.of(seg(long1 + 48, 2 * a)), 2 * a);
      burnCase(t, r, annotations, "under", "10m", 10, List.of(seg(long1 + 48, a / 2)), -1);
      burnCase(
          t,
          r,
          annotations,
          "recovered",
          "10m",
          10,
          List.of(seg(long1 + 12, 2 * a), seg(short1 + 6, 0)),
          -1);
    }
  }

  /** {steps, 1000 requests a step, the share above the limit of them}. */
  private static long[] seg(long steps, double shareAbove) {
    return new long[] {steps, 1000, Math.round(1000 * shareAbove)};
  }

  /** One burn fixture; {@code fires} is the expected value, or negative for silence. */
  private static void burnCase(
      StringBuilder t,
      AlertRule r,
      JsonNode annotations,
      String name,
      String interval,
      long minutesPerStep,
      List<long[]> segments,
      double fires) {
    caseHeader(t, r.alert() + " " + name, interval);
    long steps = segments.stream().mapToLong(x -> x[0]).sum() - 1;
    // On an evaluation (every 10m), at most 9m before the series end.
    Duration eval = Duration.ofMinutes(steps * minutesPerStep / 10 * 10);
    String human =
        fires < 0 ? null : GoFormat.humanizePercentage(Math.round(1000 * fires) / 1000.0);
    if (r.attainment()) {
      AttainmentCases.burnSeries(t, r, segments);
      expectation(t, r, annotations, fires >= 0, eval, human, AttainmentCases.firing(r));
      return;
    }
    phaseSeries(t, r.budget(), r.phase(), segments);
    expectation(t, r, annotations, fires >= 0, eval, human);
  }

  /**
   * The input series of one phase: {@code segments} of {steps, total per step, above the limit per
   * step}, as the bucket at the limit, {@code +Inf} and {@code _count}.
   */
  private static void phaseSeries(StringBuilder t, Budget b, BudgetPhase p, List<long[]> segments) {
    String labels = join(p.matcher(), modelLabel(b), tenantLabel(b), "llm_pool=\"" + POOL + "\"");
    long[] atOrBelow = new long[segments.size()];
    long[] all = new long[segments.size()];
    List<long[]> steps = new ArrayList<>();
    for (int i = 0; i < segments.size(); i++) {
      atOrBelow[i] = segments.get(i)[1] - segments.get(i)[2];
      all[i] = segments.get(i)[1];
      steps.add(new long[] {segments.get(i)[0]});
    }
    String le =
        normalisedLe
            ? BucketLayout.leNormalized(b.limitNanos(p))
            : BucketLayout.le(b.limitNanos(p));
    series(t, p.metric() + "_bucket{" + labels + ",le=\"" + le + "\"}", steps, atOrBelow);
    series(t, p.metric() + "_bucket{" + labels + ",le=\"+Inf\"}", steps, all);
    series(t, p.metric() + "_count{" + labels + "}", steps, all);
    if (!b.anyTenant()) {
      // Another tenant's requests, every one above the limit: outside the budget's selector.
      String decoy = join(p.matcher(), decoyLabel(b));
      series(
          t, p.metric() + "_bucket{" + decoy + ",le=\"" + le + "\"}", steps, new long[all.length]);
      series(t, p.metric() + "_bucket{" + decoy + ",le=\"+Inf\"}", steps, all);
      series(t, p.metric() + "_count{" + decoy + "}", steps, all);
    }
  }

  /** A counter rising by {@code increments[i]} per step for {@code steps[i][0]} steps each. */
  static void series(StringBuilder t, String name, List<long[]> steps, long[] increments) {
    StringBuilder v = new StringBuilder();
    long value = 0;
    for (int i = 0; i < increments.length; i++) {
      long n = steps.get(i)[0];
      if (i == 0) {
        v.append("0+").append(increments[0]).append('x').append(n);
        value = increments[0] * n;
      } else {
        value += increments[i];
        v.append(' ').append(value).append('+').append(increments[i]).append('x').append(n - 1);
        value += increments[i] * (n - 1);
      }
    }
    t.append("      - series: ").append(q(name)).append('\n');
    t.append("        values: ").append(q(v.toString())).append('\n');
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
    caseHeader(t, r, over, eval, "1m");
    String base =
        join(
            modelLabel(b),
            tenantLabel(b),
            "llm_pool=\"" + POOL + "\"",
            "gen_ai_operation_name=\"chat\"");
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
    if (!b.anyTenant()) {
      // Another tenant's requests, every one failed: outside the budget's selector.
      t.append("      - series: ")
          .append(
              q(
                  "gen_ai_server_request_duration_seconds_count{"
                      + decoyLabel(b)
                      + ",gen_ai_operation_name=\"chat\",outcome=\"upstream_error\"}"))
          .append('\n');
      t.append("        values: ").append(q("0+" + total + "x" + steps)).append('\n');
    }
    String human = GoFormat.humanizePercentage((double) errors / total);
    expectation(t, r, annotations, over, eval, human);
  }

  /** Past the window and the for duration, so the rate covers only the injected traffic. */
  static Duration evalTime(AlertRule r) {
    // Rounded up to ten minutes: an evaluation when they run every 10m (burn-rate fixtures).
    long minutes = r.budget().window().plus(r.forDuration()).plusMinutes(2).toMinutes();
    return Duration.ofMinutes((minutes + 9) / 10 * 10);
  }

  private static void caseHeader(
      StringBuilder t, AlertRule r, boolean over, Duration eval, String interval) {
    caseHeader(t, r.alert() + (over ? " over the limit" : " at or under the limit"), interval);
  }

  static void caseHeader(StringBuilder t, String name, String interval) {
    t.append("  - name: ").append(q(name));
    t.append("\n    interval: ").append(interval).append("\n    input_series:\n");
  }

  private static void expectation(
      StringBuilder t,
      AlertRule r,
      JsonNode annotations,
      boolean over,
      Duration eval,
      String value) {
    expectation(t, r, annotations, over, eval, value, Map.of());
  }

  /**
   * One alert test: at {@code eval}, {@code r} fires once, with the rule's labels, {@code llm_pool}
   * and {@code seriesLabels}, and its annotations with {@code value} and those labels filled in (or
   * nothing fires when not {@code over}).
   */
  static void expectation(
      StringBuilder t,
      AlertRule r,
      JsonNode annotations,
      boolean over,
      Duration eval,
      String value,
      Map<String, String> seriesLabels) {
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
    labels.putAll(seriesLabels);
    labels.forEach(
        (k, v) -> t.append("              ").append(k).append(": ").append(q(v)).append('\n'));
    t.append("            exp_annotations:\n");
    annotations
        .fields()
        .forEachRemaining(
            e -> {
              String text =
                  e.getValue().asText().replace("{{ $value | humanizePercentage }}", value);
              for (Map.Entry<String, String> l : labels.entrySet()) {
                text = text.replace("{{ $labels." + l.getKey() + " }}", l.getValue());
              }
              t.append("              ")
                  .append(e.getKey())
                  .append(": ")
                  .append(q(text))
                  .append('\n');
            });
  }

  static Map<String, JsonNode> committedRules(Path rulesFile) throws Exception {
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

  /**
   * The same model and pool, another tenant: a budget of one tenant that read it would judge
   * another tenant's requests.
   */
  private static String decoyLabel(Budget b) {
    return "gen_ai_request_model=\""
        + (b.anyModel() ? "sim-llama" : b.model())
        + "\",llm_tenant=\"decoy\",llm_pool=\""
        + POOL
        + "\"";
  }

  /**
   * The budget's tenant on the fixture's series; every request is other's when the budget's is *.
   */
  private static String tenantLabel(Budget b) {
    return "llm_tenant=\"" + (b.anyTenant() ? "other" : b.tenant()) + "\"";
  }

  static String join(String... parts) {
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

  static String q(String s) {
    return "'" + s.replace("'", "''") + "'";
  }
}
