package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The attainment rules in Prometheus ({@code promtool test rules}, cases of {@link
 * AttainmentCases}): per tenant and pool, the tenant below its target fires alone, a tenant with no
 * request judged does not fire, and the burn-rate pair fires on a burn over both windows only.
 */
class PromtoolAttainmentRulesTest {
  @TempDir Path dir;

  @BeforeEach
  void needPromtool() {
    Promtool.require();
  }

  @Test
  void attainmentAlertsFirePerTenantAndOnlyBelowTheTarget() throws Exception {
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: chat, quantile: 0.95, window: 10m, limits_ms: {ttft: 1200},"
                + " max_error_rate: 0.01, min_join_coverage: 0,"
                + " slo_ms: {server_ttft: 500, tpot: 50}, min_attainment: 0.99}\n"
                + "  - {name: gold, tenant: team-gold, quantile: 0.95, window: 5m,"
                + " limits_ms: {ttft: 800}, max_error_rate: 0.01, min_join_coverage: 0,"
                + " slo_ms: {server_ttft: 300}, min_attainment: 0.95}\n",
            "attainment.yaml");
    List<AlertRule> rules = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatTtftBreached",
            "PhasemeterChatErrorRateBreached",
            "PhasemeterChatAttainmentBreached",
            "PhasemeterGoldTtftBreached",
            "PhasemeterGoldErrorRateBreached",
            "PhasemeterGoldAttainmentBreached");
    assertThat(run(budgets, rules)).contains("SUCCESS");
  }

  @Test
  void attainmentBurnRatesFireOnBothWindowsOfAConditionAndOnlyThen() throws Exception {
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: chat, quantile: 0.95, window: 10m, slo_period: 7d,"
                + " limits_ms: {ttft: 1200}, max_error_rate: 0.01, min_join_coverage: 0,"
                + " slo_ms: {server_ttft: 500}, min_attainment: 0.99}\n"
                + "  - {name: gold, tenant: team-gold, quantile: 0.99, window: 10m,"
                + " slo_period: 7d, limits_ms: {ttft: 800}, max_error_rate: 0.01,"
                + " min_join_coverage: 0, slo_ms: {tpot: 40}, min_attainment: 0.995}\n",
            "attainment-slo.yaml");
    List<AlertRule> rules = AlertRules.rules(budgets);
    // The phase rules' burn rates have their own test (PromtoolRulesTest); a 7d period keeps the
    // slow burn's fixtures to 17 hours, not 3 days.
    List<AlertRule> attainment = rules.stream().filter(AlertRule::attainment).toList();
    assertThat(attainment)
        .extracting(AlertRule::alert)
        .containsExactly(
            "PhasemeterChatAttainmentFastBurn",
            "PhasemeterChatAttainmentSlowBurn",
            "PhasemeterGoldAttainmentFastBurn",
            "PhasemeterGoldAttainmentSlowBurn");
    assertThat(run(budgets, attainment)).contains("SUCCESS");
  }

  private String run(Budgets budgets, List<AlertRule> rules) throws Exception {
    Path rulesFile = dir.resolve("attainment-rules.yaml");
    Files.writeString(rulesFile, AlertRules.render(budgets, "attainment.yaml"));
    assertThat(Promtool.runOk("check", "rules", rulesFile.toString()))
        .contains("SUCCESS: " + AlertRules.rules(budgets).size() + " rules found");
    return PromtoolRulesTest.runUnitTests(
        dir, rulesFile, rules, PromtoolRulesTest.committedRules(rulesFile));
  }
}
