package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

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
  void committedBudgetsGiveOneAlertPerServerSidePhaseAndOneForErrors() {
    List<AlertRule> rules = AlertRules.rules(Budgets.load(BUDGETS));
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatInteractiveGatewayBreached",
            "PhasemeterChatInteractiveQueueBreached",
            "PhasemeterChatInteractiveTtftBreached",
            "PhasemeterChatInteractiveTotalBreached",
            "PhasemeterChatInteractiveErrorRateBreached");
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
    assertThat(r.err).contains("wrote 5 rules to " + out);
    assertThat(Files.readString(out))
        .isEqualTo(AlertRules.render(Budgets.load(BUDGETS), BUDGETS.toString()));
    Cli stdout = cli("--budgets", BUDGETS.toString());
    assertThat(stdout.code).isZero();
    assertThat(stdout.out).isEqualTo(Files.readString(out));
  }

  @Test
  void goodputObjectivesChangeNoRule(@TempDir Path dir) throws Exception {
    String shipped = Files.readString(BUDGETS);
    Path withSlo = dir.resolve("budgets.yaml");
    Files.writeString(
        withSlo,
        shipped.replace(
            "    max_error_rate: 0.01\n",
            "    max_error_rate: 0.01\n    slo_ms: {client_ttft: 500, tpot: 50, queue: 250}\n"));
    assertThat(Files.readString(withSlo)).contains("slo_ms:");
    Cli r = cli("--budgets", withSlo.toString());
    assertThat(r.code).as(r.err).isZero();
    assertThat(r.out)
        .isEqualTo(
            cli("--budgets", BUDGETS.toString())
                .out
                .replace(BUDGETS.toString(), withSlo.toString()));
    Files.writeString(
        withSlo,
        shipped.replace(
            "    max_error_rate: 0.01\n", "    slo_ms: {e2el: 5}\n    max_error_rate: 0.01\n"));
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
