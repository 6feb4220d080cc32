package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The budgets file's per-request objectives (issue 37): {@code slo_ms} kept on the budget, {@code
 * min_attainment}, {@code tenant}, and a budget of objectives alone (no {@code limits_ms}) that
 * every reader of the phase limits takes without a rule, a series or a crash.
 */
class SloBudgetsTest {
  private static final String SRC = "budgets.yaml";

  private static String budget(String fields) {
    return "budgets:\n  - name: chat\n    quantile: 0.95\n    window: 5m\n"
        + "    max_error_rate: 0.01\n    min_join_coverage: 0\n"
        + fields;
  }

  @Test
  void aBudgetOfObjectivesAloneKeepsThemAndEveryPhaseReaderSkipsIt() {
    Budgets budgets =
        Budgets.parse(
            budget(
                "    model: sim-llama\n    tenant: team-a\n"
                    + "    slo_ms: {client_ttft: 900, server_ttft: 500, tpot: 50}\n"
                    + "    min_attainment: 0.99\n"),
            SRC);
    Budget b = budgets.byName("chat");
    assertThat(b.limitsMs()).isEmpty();
    assertThat(b.phases()).isEmpty();
    assertThat(b.slo().keys()).containsExactly("client_ttft", "server_ttft", "tpot");
    assertThat(b.slo().judgedByProxy().keys()).containsExactly("server_ttft", "tpot");
    assertThat(b.minAttainment()).isEqualTo(0.99);
    assertThat(b.tenant()).isEqualTo("team-a");
    assertThat(b.matches("sim-llama", "team-a")).isTrue();
    assertThat(b.matches("sim-llama", "team-b")).isFalse();
    assertThat(b.matches("other", "team-a")).isFalse();

    // The proxy's histograms: no extra boundary.
    assertThat(budgets.bucketLayout()).isEqualTo(new Budgets(java.util.List.of()).bucketLayout());
    // Its live verdicts: no llm_budget_ratio series; the error rate still in /admin/stats.
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    RollingQuantiles q =
        new RollingQuantiles(Duration.ofSeconds(10), 30, 100, BudgetTracker.limits(budgets));
    BudgetTracker tracker = new BudgetTracker(budgets, q);
    tracker.bindTo(registry);
    assertThat(registry.getMeters()).isEmpty();
    JsonObject status = tracker.status().getJsonObject(0);
    assertThat(status.getJsonArray("phases")).isEmpty();
    assertThat(status.getString("name")).isEqualTo("chat");
    // The alert rules: the error-rate rule and the attainment rule, no phase rule.
    assertThat(AlertRules.rules(budgets))
        .extracting(AlertRule::alert)
        .containsExactly("PhasemeterChatErrorRateBreached", "PhasemeterChatAttainmentBreached");
    assertThat(AlertRules.render(budgets, SRC)).contains("# Budget chat:");
  }

  @Test
  void anAttainmentTargetOnClientObjectivesAloneGivesNoRuleThatCouldNeverFire() {
    Budgets budgets =
        Budgets.parse(
            budget(
                "    slo_ms: {client_ttft: 900, network_envelope: 50}\n    min_attainment: 0.99\n"),
            SRC);
    // The proxy counts no request under it: a rule on its counter would never see one.
    assertThat(AlertRules.rules(budgets))
        .extracting(AlertRule::alert)
        .containsExactly("PhasemeterChatErrorRateBreached");
    assertThat(AlertRules.render(budgets, SRC))
        .contains("min_attainment without an objective the proxy judges: no attainment alert");
  }

  @Test
  void tenantDefaultsToEveryTenantAndLimitsAloneStillLoad() {
    Budget b = Budgets.parse(budget("    limits_ms: {queue: 250}\n"), SRC).budgets().get(0);
    assertThat(b.tenant()).isEqualTo(Budget.ANY_TENANT);
    assertThat(b.anyTenant()).isTrue();
    assertThat(b.slo()).isEqualTo(Objectives.NONE);
    assertThat(b.hasSlo()).isFalse();
    assertThat(b.minAttainment()).isNull();
    assertThat(b.matches("anything", "other")).isTrue();
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "neither | '' | : give limits_ms (phase limits at the quantile, e.g. {queue: 250, ttft:"
            + " 1200}), slo_ms (per-request objectives, e.g. {server_ttft: 500}) or both",
        "attainment without slo_ms | '    limits_ms: {queue: 250}\n    min_attainment: 0.99\n'"
            + " | .min_attainment: needs slo_ms",
        "attainment 1 | '    slo_ms: {tpot: 50}\n    min_attainment: 1\n'"
            + " | .min_attainment: 1.0 is not a share between 0 and 1 (exclusive), e.g. 0.99",
        "attainment 0 | '    slo_ms: {tpot: 50}\n    min_attainment: 0\n'"
            + " | .min_attainment: 0.0 is not a share",
        "attainment text | '    slo_ms: {tpot: 50}\n    min_attainment: 99%\n'"
            + " | .min_attainment: expected a number, got '99%'",
        "tenant | '    slo_ms: {tpot: 50}\n    tenant: team a\n'"
            + " | .tenant: 'team a' is not \"*\" (every tenant) or a tenant",
        "empty slo_ms alone | '    slo_ms: {}\n' | : give limits_ms",
      })
  void badObjectivesAreOneLineNamingTheBudgetAndKey(String what, String fields, String expected) {
    assertThatThrownBy(() -> Budgets.parse(budget(fields), SRC))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(SRC + ": budgets[0] (chat)" + expected)
        .hasMessageNotContaining("\n");
  }
}
