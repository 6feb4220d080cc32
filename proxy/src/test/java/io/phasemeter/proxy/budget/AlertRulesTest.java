package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;

import io.phasemeter.proxy.AlertsMain;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AlertRulesTest {
  /** Tests run in proxy/; the committed files are one level up. */
  static final Path BUDGETS = Path.of("../config/budgets.yaml");

  static final Path ALERTS = Path.of("../dashboards/alerts.yaml");

  private static Budgets parse(String budgetsBody) {
    return Budgets.parse("budgets:\n" + budgetsBody, "test.yaml");
  }

  private static final String SIM =
      "  - name: batch.long\n"
          + "    model: 'sim \"llama\"'\n"
          + "    quantile: 0.999\n"
          + "    window: 1h\n"
          + "    limits_ms: {client_ttft: 100, queue: 5000, itl: 80.5, network_envelope: 9}\n"
          + "    max_error_rate: 0.07\n"
          + "    min_join_coverage: 0.9\n";

  @Test
  void committedRulesMatchTheBudgets() throws Exception {
    String expected = AlertRules.render(Budgets.load(BUDGETS), "config/budgets.yaml");
    assertThat(Files.exists(ALERTS))
        .as(
            "dashboards/alerts.yaml is missing: run ./phasemeter alerts --budgets"
                + " config/budgets.yaml --out dashboards/alerts.yaml")
        .isTrue();
    assertThat(Files.readString(ALERTS))
        .as(
            "dashboards/alerts.yaml no longer matches config/budgets.yaml: run ./phasemeter"
                + " alerts --budgets config/budgets.yaml --out dashboards/alerts.yaml")
        .isEqualTo(expected);
  }

  @Test
  void committedBudgetsGiveOneAlertPerServerSidePhaseOneForErrorsAndOneOnAttainment() {
    List<AlertRule> rules = AlertRules.rules(Budgets.load(BUDGETS));
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatInteractiveGatewayBreached",
            "PhasemeterChatInteractiveQueueBreached",
            "PhasemeterChatInteractiveTtftBreached",
            "PhasemeterChatInteractiveTotalBreached",
            "PhasemeterChatInteractiveErrorRateBreached",
            "PhasemeterChatInteractiveAttainmentBreached");
    AlertRule queue = rules.get(1);
    // The share above 250 ms, read from the bucket whose boundary is the limit.
    assertThat(queue.expr())
        .isEqualTo(
            "1 - (sum by (llm_pool) (rate(llm_phase_duration_seconds_bucket"
                + "{llm_phase=\"queue\",le=\"0.25\"}[10m])) / sum by (llm_pool) (rate("
                + "llm_phase_duration_seconds_count{llm_phase=\"queue\"}[10m]))) > (1 - 0.95)");
    assertThat(queue.forDuration()).isEqualTo(Duration.ofMinutes(2));
    assertThat(queue.labels())
        .containsExactly(
            org.assertj.core.api.Assertions.entry("severity", "page"),
            org.assertj.core.api.Assertions.entry("budget", "chat-interactive"),
            org.assertj.core.api.Assertions.entry("llm_phase", "queue"),
            org.assertj.core.api.Assertions.entry("owner", "inference-pool capacity"));
    assertThat(queue.annotations().get("summary"))
        .contains(
            "{{ $value | humanizePercentage }} of queue took longer than its 250 ms limit",
            "p95 allows 5%",
            "page inference-pool");
    assertThat(queue.annotations().get("description")).contains("le=\"0.25\"", "over the last 10m");
    assertThat(rules.get(3).expr())
        .contains(
            "gen_ai_server_request_duration_seconds_bucket{outcome=\"success\",le=\"6.0\"}[10m]")
        .contains("gen_ai_server_request_duration_seconds_count{outcome=\"success\"}[10m]")
        .endsWith("> (1 - 0.95)");
    assertThat(rules.get(4).expr())
        .isEqualTo(
            "sum by (llm_pool) (rate(gen_ai_server_request_duration_seconds_count"
                + "{outcome!=\"success\"}[10m])) / sum by (llm_pool) (rate("
                + "gen_ai_server_request_duration_seconds_count[10m])) > 0.01");
    assertThat(rules.get(5).expr())
        .isEqualTo(attainment("budget=\"chat-interactive\"", "10m") + " < 0.99");
  }

  /** Met ÷ judged per tenant and pool over {@code w}; met is 0 where no request met. */
  private static String attainment(String selector, String w) {
    String judged =
        "sum by (llm_tenant, llm_pool) (rate(llm_slo_requests_total{" + selector + "}[" + w + "]))";
    return "(sum by (llm_tenant, llm_pool) (rate(llm_slo_requests_total{"
        + selector
        + ",result=\"met\"}["
        + w
        + "])) or 0 * "
        + judged
        + ") / "
        + judged;
  }

  @Test
  void minAttainmentGivesOneRuleOnMetOverJudgedPerTenantAndPool() {
    Budgets budgets =
        parse(
            "  - {name: chat.b, model: m, quantile: 0.95, window: 30m, limits_ms: {queue: 250},"
                + " max_error_rate: 0.01, min_join_coverage: 0,"
                + " slo_ms: {server_ttft: 500, client_ttft: 700, tpot: 50.5},"
                + " min_attainment: 0.975}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatBQueueBreached",
            "PhasemeterChatBErrorRateBreached",
            "PhasemeterChatBAttainmentBreached");
    AlertRule r = rules.get(2);
    assertThat(r.attainment()).isTrue();
    assertThat(r.errorRate()).isFalse();
    assertThat(r.phase()).isNull();
    // The metric has no model label: the budget label already names the requests it judged.
    assertThat(r.expr()).isEqualTo(attainment("budget=\"chat.b\"", "30m") + " < 0.975");
    assertThat(r.forDuration()).isEqualTo(Duration.ofMinutes(6));
    assertThat(r.labels())
        .containsExactly(
            entry("severity", "page"),
            entry("budget", "chat.b"),
            entry("owner", "on-call (triage by objective)"));
    assertThat(r.annotations().get("summary"))
        .isEqualTo(
            "Budget chat.b: SLO attainment of tenant {{ $labels.llm_tenant }} in pool"
                + " {{ $labels.llm_pool }} is {{ $value | humanizePercentage }}, under its 97.5%"
                + " target; page on-call (triage by objective)");
    assertThat(r.annotations().get("description"))
        .contains("Over the last 30m", "llm_slo_requests_total{budget=\"chat.b\"}", "model m")
        .contains("(server_ttft 500 ms, tpot 50.5 ms; x-slo-* headers override per request)")
        .contains("min_attainment of 97.5%", "by objective");
    assertThat(AlertRules.render(budgets, "t.yaml"))
        .contains("# Each attainment alert divides the requests that met every objective")
        .contains("      # slo_ms client_ttft is judged by the load client only (phasemeter load)")
        .contains(
            "      # Attainment: llm_slo_requests_total{budget=\"chat.b\"}, met / judged per tenant"
                + " and pool, at least 97.5% (server_ttft 500 ms, tpot 50.5 ms;");
  }

  @Test
  void minAttainmentWithAnSloPeriodGivesTheBurnRatePairOverItsErrorBudget() {
    Budgets budgets =
        parse(
            "  - {name: chat, quantile: 0.95, window: 10m, slo_period: 30d,"
                + " limits_ms: {queue: 250}, max_error_rate: 0.01, min_join_coverage: 0,"
                + " slo_ms: {server_ttft: 500}, min_attainment: 0.99}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatQueueFastBurn",
            "PhasemeterChatQueueSlowBurn",
            "PhasemeterChatErrorRateBreached",
            "PhasemeterChatAttainmentFastBurn",
            "PhasemeterChatAttainmentSlowBurn");
    String sel = "budget=\"chat\"";
    assertThat(rules.get(3).expr())
        .isEqualTo(
            "(1 - ("
                + attainment(sel, "1h")
                + ") > 14.4 * (1 - 0.99) and 1 - ("
                + attainment(sel, "5m")
                + ") > 14.4 * (1 - 0.99)) or (1 - ("
                + attainment(sel, "6h")
                + ") > 6 * (1 - 0.99) and 1 - ("
                + attainment(sel, "30m")
                + ") > 6 * (1 - 0.99))");
    assertThat(rules.get(3).labels()).containsEntry("severity", "page");
    assertThat(rules.get(3).forDuration()).isEqualTo(Duration.ofMinutes(1));
    assertThat(rules.get(4).expr())
        .isEqualTo(
            "(1 - ("
                + attainment(sel, "72h")
                + ") > 1 * (1 - 0.99) and 1 - ("
                + attainment(sel, "6h")
                + ") > 1 * (1 - 0.99))");
    assertThat(rules.get(4).labels()).containsEntry("severity", "ticket");
    assertThat(rules.get(4).forDuration()).isEqualTo(Duration.ofMinutes(15));
    assertThat(rules.get(4).annotations().get("summary"))
        .contains("missed an objective (99% attainment allows 1%); ticket for on-call");
    assertThat(rules.get(3).annotations().get("description"))
        .contains(
            "over 1h and 5m at 14.4x the allowed 1%; or over 6h and 30m at 6x the allowed 1%");
  }

  @Test
  void aShortWindowAndShortForMakeRulesForARealPrometheusTest() {
    Budgets budgets =
        parse(
            "  - {name: e2e, quantile: 0.95, window: 10s, limits_ms: {ttft: 800},"
                + " max_error_rate: 0.5, min_join_coverage: 0, slo_ms: {server_ttft: 200},"
                + " min_attainment: 0.9}\n");
    String rules = ShortForRules.render(budgets, Duration.ofSeconds(2));
    assertThat(rules).contains("[10s]").doesNotContain("for: 1m");
    assertThat(rules.split("        for: 2s\n", -1)).hasSize(AlertRules.rules(budgets).size() + 1);
  }

  @Test
  void aTenantsBudgetSelectsItsTenantInEveryRule() {
    Budgets budgets =
        parse(
            "  - {name: gold, tenant: team-gold, quantile: 0.95, window: 10m,"
                + " limits_ms: {ttft: 800, queue: 100, itl: 50}, max_error_rate: 0.01,"
                + " min_join_coverage: 0, slo_ms: {tpot: 40}, min_attainment: 0.99}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterGoldTtftBreached",
            "PhasemeterGoldQueueBreached",
            "PhasemeterGoldItlBreached",
            "PhasemeterGoldErrorRateBreached",
            "PhasemeterGoldAttainmentBreached");
    assertThat(rules.get(0).expr())
        .contains(
            "gen_ai_server_time_to_first_token_seconds_bucket{llm_tenant=\"team-gold\",le=\"0.8\"}")
        .contains("gen_ai_server_time_to_first_token_seconds_count{llm_tenant=\"team-gold\"}");
    assertThat(rules.get(3).expr())
        .contains("{outcome!=\"success\",llm_tenant=\"team-gold\"}[10m]")
        .contains("gen_ai_server_request_duration_seconds_count{llm_tenant=\"team-gold\"}[10m]");
    for (AlertRule r : rules.subList(0, 4)) {
      assertThat(r.labels()).as(r.alert()).containsEntry("llm_tenant", "team-gold");
      assertThat(r.annotations().get("description")).contains("all models, tenant team-gold");
    }
    assertThat(rules.get(4).expr())
        .isEqualTo(attainment("budget=\"gold\",llm_tenant=\"team-gold\"", "10m") + " < 0.99");
    // The tenant comes from the series, grouped by it.
    assertThat(rules.get(4).labels()).doesNotContainKey("llm_tenant");
    assertThat(AlertRules.render(budgets, "t.yaml"))
        .contains("# Budget gold: all models, tenant team-gold, p95 over 10m.")
        .contains(
            "# queue (llm_phase_duration_seconds) carries llm_tenant only with"
                + " tenants.phase_histograms: true")
        .contains("# itl (llm_inter_token_latency_seconds) has no llm_tenant label")
        .doesNotContain("# ttft (");
  }

  @Test
  void aTenantsBudgetSelectsItsTenantAndItsAlertsSayWhich() {
    Budgets budgets =
        parse(
            "  - {name: team-a, tenant: team-a, model: sim-llama, quantile: 0.95, window: 10m,"
                + " limits_ms: {ttft: 500, client_ttft: 600}, max_error_rate: 0.01,"
                + " min_join_coverage: 0}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);

    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly("PhasemeterTeamATtftBreached", "PhasemeterTeamAErrorRateBreached");
    assertThat(rules.get(0).expr())
        .isEqualTo(
            "1 - (sum by (llm_pool) (rate(gen_ai_server_time_to_first_token_seconds_bucket"
                + "{gen_ai_request_model=\"sim-llama\",llm_tenant=\"team-a\",le=\"0.5\"}[10m]))"
                + " / sum by (llm_pool) (rate(gen_ai_server_time_to_first_token_seconds_count"
                + "{gen_ai_request_model=\"sim-llama\",llm_tenant=\"team-a\"}[10m])))"
                + " > (1 - 0.95)");
    assertThat(rules.get(1).expr())
        .contains("{outcome!=\"success\",gen_ai_request_model=\"sim-llama\",llm_tenant=\"team-a\"}")
        .contains("_count{gen_ai_request_model=\"sim-llama\",llm_tenant=\"team-a\"}[10m]");
    for (AlertRule r : rules) {
      assertThat(r.labels()).containsEntry("llm_tenant", "team-a");
      assertThat(r.annotations().get("description")).contains("model sim-llama, tenant team-a");
    }
    assertThat(AlertRules.render(budgets, "t.yaml"))
        .contains("# Budget team-a: model sim-llama, tenant team-a, p95 over 10m.");
  }

  @Test
  void modelQuantileWindowAndClientOnlyPhasesShapeTheOutput() {
    Budgets budgets = parse(SIM);
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterBatchLongQueueBreached",
            "PhasemeterBatchLongItlBreached",
            "PhasemeterBatchLongErrorRateBreached");
    assertThat(rules.get(0).expr())
        .isEqualTo(
            "1 - (sum by (llm_pool) (rate(llm_phase_duration_seconds_bucket"
                + "{llm_phase=\"queue\",gen_ai_request_model=\"sim \\\"llama\\\"\",le=\"5.0\"}[1h]))"
                + " / sum by (llm_pool) (rate(llm_phase_duration_seconds_count"
                + "{llm_phase=\"queue\",gen_ai_request_model=\"sim \\\"llama\\\"\"}[1h])))"
                + " > (1 - 0.999)");
    assertThat(rules.get(1).expr())
        .contains("llm_inter_token_latency_seconds_bucket{gen_ai_request_model=")
        .contains(",le=\"0.0805\"}[1h]")
        .endsWith("> (1 - 0.999)");
    assertThat(rules.get(2).expr())
        .contains("{outcome!=\"success\",gen_ai_request_model=\"sim \\\"llama\\\"\"}[1h]")
        .endsWith("> 0.07");
    assertThat(rules.get(0).forDuration()).isEqualTo(Duration.ofMinutes(12));
    String yaml = AlertRules.render(budgets, "test.yaml");
    assertThat(yaml)
        .startsWith("# Prometheus alerting rules generated from test.yaml.\n# Do not edit by hand")
        .contains("# Budget batch.long: model sim \"llama\", p99.9 over 1h.")
        .contains("# client_ttft (100 ms) is judged by the load client")
        .contains("# network_envelope (9 ms) is judged by the load client")
        .contains("over its 7% limit")
        .contains("for: 12m");
    assertThat(AlertRules.render(budgets, "test.yaml")).isEqualTo(yaml);
  }

  @Test
  void anSloPeriodGivesTheWorkbooksFastAndSlowBurnAlerts() {
    Budgets budgets =
        parse(
            "  - {name: chat, quantile: 0.95, window: 10m, slo_period: 30d,"
                + " limits_ms: {queue: 250, client_ttft: 100}, max_error_rate: 0.01,"
                + " min_join_coverage: 0.9}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatQueueFastBurn",
            "PhasemeterChatQueueSlowBurn",
            "PhasemeterChatErrorRateBreached");
    String share1h = share("1h");
    assertThat(rules.get(0).expr())
        .isEqualTo(
            "("
                + share1h
                + " > 14.4 * (1 - 0.95) and "
                + share("5m")
                + " > 14.4 * (1 - 0.95)) or ("
                + share("6h")
                + " > 6 * (1 - 0.95) and "
                + share("30m")
                + " > 6 * (1 - 0.95))");
    assertThat(rules.get(0).labels()).containsEntry("severity", "page");
    assertThat(rules.get(0).forDuration()).isEqualTo(Duration.ofMinutes(1));
    assertThat(rules.get(1).expr())
        .isEqualTo(
            "(" + share("72h") + " > 1 * (1 - 0.95) and " + share("6h") + " > 1 * (1 - 0.95))");
    assertThat(rules.get(1).labels())
        .containsEntry("severity", "ticket")
        .containsEntry("llm_phase", "queue")
        .containsEntry("owner", "inference-pool capacity");
    assertThat(rules.get(1).forDuration()).isEqualTo(Duration.ofMinutes(15));
    assertThat(rules.get(1).annotations().get("summary")).contains("ticket for inference-pool");
    // The error rate keeps its single window.
    assertThat(rules.get(2).expr()).contains("[10m]").endsWith("> 0.01");
    assertThat(AlertRules.render(budgets, "t.yaml"))
        .contains(
            "# Budget chat: all models, p95 over 10m, error budget period 720h (burn rates).");
  }

  @Test
  void burnWindowsScaleWithThePeriod() {
    Budgets budgets =
        parse(
            "  - {name: w, quantile: 0.99, window: 5m, slo_period: 7d, limits_ms: {queue: 100},"
                + " max_error_rate: 0.1, min_join_coverage: 0.1}\n");
    List<AlertRule> rules = AlertRules.rules(budgets);
    // 7/30 of 1h, 5m, 6h, 30m; of 3d, 6h: rounded to minutes, at least one.
    assertThat(rules.get(0).expr())
        .contains("[14m]", "[1m]", "[84m]", "[7m]")
        .doesNotContain("[1h]");
    assertThat(rules.get(1).expr()).contains("[1008m]", "[84m]");
  }

  private static String share(String w) {
    return "1 - (sum by (llm_pool) (rate(llm_phase_duration_seconds_bucket"
        + "{llm_phase=\"queue\",le=\"0.25\"}["
        + w
        + "])) / sum by (llm_pool) (rate(llm_phase_duration_seconds_count{llm_phase=\"queue\"}["
        + w
        + "])))";
  }

  @Test
  void forIsAFifthOfTheWindowBetweenOneAndFifteenMinutes() {
    assertThat(forOf("30s")).isEqualTo(Duration.ofMinutes(1));
    assertThat(forOf("10m")).isEqualTo(Duration.ofMinutes(2));
    assertThat(forOf("7m")).isEqualTo(Duration.ofSeconds(84));
    assertThat(forOf("6h")).isEqualTo(Duration.ofMinutes(15));
  }

  private static Duration forOf(String window) {
    return AlertRules.forDuration(
        parse(
                "  - {name: w, quantile: 0.5, window: "
                    + window
                    + ", limits_ms: {queue: 1}, max_error_rate: 0.1, min_join_coverage: 0.1}\n")
            .budgets()
            .get(0));
  }

  @Test
  void noBudgetsRenderAnEmptyGroup() {
    assertThat(AlertRules.render(Budgets.parse("budgets: []\n", "x"), "x"))
        .endsWith("  - name: phasemeter-budgets\n    rules: []\n");
  }

  @Test
  void expressionsReadsEveryExprOfARulesFile() throws Exception {
    List<String> exprs = AlertRules.expressions(ALERTS);
    assertThat(exprs)
        .containsExactlyElementsOf(
            AlertRules.rules(Budgets.load(BUDGETS)).stream().map(AlertRule::expr).toList());
  }

  @Test
  void cliWritesTheRules(@TempDir Path dir) throws Exception {
    Path out = dir.resolve("sub/alerts.yaml");
    Cli r = cli("--budgets", BUDGETS.toString(), "--out", out.toString());
    assertThat(r.code).isZero();
    assertThat(r.err).contains("wrote 6 rules to " + out);
    assertThat(Files.readString(out))
        .isEqualTo(AlertRules.render(Budgets.load(BUDGETS), BUDGETS.toString()));
    Cli stdout = cli("--budgets", BUDGETS.toString());
    assertThat(stdout.code).isZero();
    assertThat(stdout.out).isEqualTo(Files.readString(out));
  }

  @Test
  void goodputObjectivesWithoutMinAttainmentAddNoRule(@TempDir Path dir) throws Exception {
    String shipped = Files.readString(BUDGETS);
    String target = "    min_attainment: 0.99\n";
    assertThat(shipped).contains(target);
    Path noTarget = dir.resolve("budgets.yaml");
    Files.writeString(noTarget, shipped.replace(target, ""));
    Cli r = cli("--budgets", noTarget.toString());
    assertThat(r.code).as(r.err).isZero();
    List<AlertRule> shippedRules = AlertRules.rules(Budgets.load(BUDGETS));
    assertThat(AlertRules.rules(Budgets.load(noTarget)))
        .extracting(AlertRule::expr)
        .containsExactlyElementsOf(
            shippedRules.stream().filter(x -> !x.attainment()).map(AlertRule::expr).toList());
    assertThat(r.out)
        .contains(
            "      # slo_ms without min_attainment: no attainment alert (/admin/stats shows the"
                + " attainment without a verdict).\n")
        .doesNotContain("AttainmentBreached");
    Path withSlo = dir.resolve("bad.yaml");
    Files.writeString(
        withSlo,
        shipped.replace("    slo_ms: {server_ttft: 1200, tpot: 100}\n", "    slo_ms: {e2el: 5}\n"));
    Cli bad = cli("--budgets", withSlo.toString());
    assertThat(bad.code).isEqualTo(2);
    assertThat(bad.err.strip())
        .isEqualTo(
            "phasemeter alerts: "
                + withSlo
                + ": budgets[0] (chat-interactive).slo_ms.e2el: vLLM's name, for --slo; slo_ms"
                + " takes the catalogue's names: client_total");
  }

  @Test
  void cliBadConfigIsExitTwoWithOneLine(@TempDir Path dir) throws Exception {
    Path bad = dir.resolve("b.yaml");
    Files.writeString(bad, "budgets:\n" + SIM.replace("queue: 5000", "quue: 5000"));
    Cli r = cli("--budgets", bad.toString());
    assertThat(r.code).isEqualTo(2);
    assertThat(r.out).isEmpty();
    assertThat(r.err.strip())
        .startsWith(
            "phasemeter alerts: " + bad + ": budgets[0] (batch.long).limits_ms.quue: unknown phase")
        .doesNotContain("\n");
    Cli missing = cli("--budgets", dir.resolve("none.yaml").toString());
    assertThat(missing.code).isEqualTo(2);
    assertThat(missing.err).contains("none.yaml: file not found");
    assertThat(cli("--bogus").code).isEqualTo(2);
  }

  @Test
  void helpExplainsTheCommand() {
    Cli r = cli("--help");
    assertThat(r.code).isZero();
    assertThat(r.out)
        .contains("--budgets=FILE", "--out=FILE", "network_envelope", "dashboards/alerts.")
        .contains("min_attainment", "AttainmentBreached", "llm_tenant")
        .contains("phasemeter alerts --budgets config/budgets.yaml --out dashboards/alerts.yaml");
  }

  private record Cli(int code, String out, String err) {}

  private static Cli cli(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        AlertsMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(args);
    return new Cli(code, out.toString(), err.toString());
  }
}
