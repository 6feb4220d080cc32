package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.config.ConfigException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class BudgetsTest {
  private static final String SRC = "config/budgets.yaml";

  private static String one(String fields) {
    return "budgets:\n  - name: chat-interactive\n" + fields;
  }

  private static final String OK_REST =
      "    quantile: 0.95\n"
          + "    window: 10m\n"
          + "    limits_ms: {network_envelope: 120, gateway: 60, queue: 250}\n"
          + "    max_error_rate: 0.01\n"
          + "    min_join_coverage: 0.95\n";

  @Test
  void committedBudgetsLoadAsDesignSays() {
    Budgets budgets = Budgets.load(Path.of("../config/budgets.yaml"));
    Budget b = budgets.byName("chat-interactive");
    assertThat(b).isNotNull();
    assertThat(b.anyModel()).isTrue();
    assertThat(b.quantile()).isEqualTo(0.95);
    assertThat(b.window()).isEqualTo(Duration.ofMinutes(10));
    assertThat(b.limitsMs())
        .containsExactly(
            org.assertj.core.api.Assertions.entry("network_envelope", 120.0),
            org.assertj.core.api.Assertions.entry("gateway", 60.0),
            org.assertj.core.api.Assertions.entry("queue", 250.0),
            org.assertj.core.api.Assertions.entry("ttft", 1200.0),
            org.assertj.core.api.Assertions.entry("total", 6000.0));
    assertThat(b.maxErrorRate()).isEqualTo(0.01);
    assertThat(b.minJoinCoverage()).isEqualTo(0.95);
  }

  @Test
  void limitsKeepFileOrderAndModelDefaultsToEveryModel() {
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - name: b\n    quantile: 0.99\n    window: 90s\n"
                + "    limits_ms: {total: 1, queue: 2.5, gateway: 3, tpot: 4}\n"
                + "    max_error_rate: 0\n    min_join_coverage: 1\n",
            SRC);
    Budget b = budgets.budgets().get(0);
    assertThat(b.model()).isEqualTo("*");
    assertThat(b.limitsMs().keySet()).containsExactly("total", "queue", "gateway", "tpot");
    assertThat(b.phases())
        .containsExactly(
            BudgetPhase.TOTAL, BudgetPhase.QUEUE, BudgetPhase.GATEWAY, BudgetPhase.TPOT);
    assertThat(b.limitMs(BudgetPhase.QUEUE)).isEqualTo(2.5);
    assertThat(b.window()).isEqualTo(Duration.ofSeconds(90));
  }

  @Test
  void unknownPhaseNamesFileBudgetAndKeyOnOneLine() {
    assertThatThrownBy(
            () ->
                Budgets.parse(
                    one(OK_REST.replace("queue: 250", "quue: 250")), "config/budgets.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(
            "config/budgets.yaml: budgets[0] (chat-interactive).limits_ms.quue: unknown phase"
                + " (known: gateway, receive, queue,")
        .hasMessageNotContaining("\n");
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "quantile 1 | quantile: 0.95 | quantile: 1 | .quantile: 1.0 is not between 0 and 1",
        "quantile 0 | quantile: 0.95 | quantile: 0 | .quantile: 0.0 is not between 0 and 1",
        "quantile text | quantile: 0.95 | quantile: p95 | .quantile: expected a number, got 'p95'",
        "window junk | window: 10m | window: ten | .window: 'ten' is not a duration",
        "window zero | window: 10m | window: 0s | .window: must be at least 1s",
        "limit zero | queue: 250 | queue: 0 | .limits_ms.queue: 0.0 is not a positive number",
        "limit negative | queue: 250 | queue: -5 | .limits_ms.queue: -5.0 is not a positive",
        "limit text | queue: 250 | queue: 250ms | .limits_ms.queue: expected a number of"
            + " milliseconds, got '250ms'",
        "error rate | max_error_rate: 0.01 | max_error_rate: 2 | .max_error_rate: 2.0 is not a"
            + " share",
        "coverage | min_join_coverage: 0.95 | min_join_coverage: -1 | .min_join_coverage: -1.0"
            + " is not a share",
        "unknown key | max_error_rate: 0.01 | max_error_rat: 0.01 | .max_error_rat: unknown key",
        "missing key | '    max_error_rate: 0.01\n' | '' | .max_error_rate: missing",
      })
  void badValuesAreOneLineNamingTheKey(String what, String from, String to, String expected) {
    String yaml = one(OK_REST.replace(from, to));
    assertThatThrownBy(() -> Budgets.parse(yaml, SRC))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(SRC + ": budgets[0] (chat-interactive)" + expected)
        .hasMessageNotContaining("\n");
  }

  @Test
  void badNameIsRejected() {
    String yaml = OK_REST.replace("    quantile", "  - name: Chat Interactive\n    quantile");
    assertThatThrownBy(() -> Budgets.parse("budgets:\n" + yaml, SRC))
        .hasMessageStartingWith(
            SRC + ": budgets[0] (Chat Interactive).name: 'Chat Interactive' is not a budget name");
  }

  @Test
  void duplicateAndCollidingNamesAreRejected() {
    String a = "  - name: chat-interactive\n" + OK_REST;
    assertThatThrownBy(() -> Budgets.parse("budgets:\n" + a + a, SRC))
        .hasMessage(SRC + ": budgets[1] (chat-interactive).name: already used by budgets[0]");
    String b = "  - name: chat_interactive\n" + OK_REST;
    assertThatThrownBy(() -> Budgets.parse("budgets:\n" + a + b, SRC))
        .hasMessageStartingWith(
            SRC
                + ": budgets[1] (chat_interactive).name: gives the same alert names"
                + " (ChatInteractive) as budgets[0] (chat-interactive)");
  }

  @Test
  void duplicateYamlKeyAndBadShapesAreOneLine() {
    assertThatThrownBy(() -> Budgets.parse(one(OK_REST + "    quantile: 0.9\n"), SRC))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("not valid YAML at line")
        .hasMessageContaining("quantile")
        .hasMessageNotContaining("\n");
    assertThatThrownBy(() -> Budgets.parse("budgets: {a: 1}\n", SRC))
        .hasMessage(SRC + ": budgets: expected a list of budgets");
    assertThatThrownBy(() -> Budgets.parse("budget: []\n", SRC))
        .hasMessage(SRC + ": budget: unknown key (known: budgets)");
    assertThatThrownBy(() -> Budgets.parse("", SRC)).hasMessageContaining("empty");
    assertThatThrownBy(() -> Budgets.parse(one(OK_REST.replace("{", "[").replace("}", "]")), SRC))
        .hasMessageContaining(".limits_ms: expected a mapping");
  }

  @Test
  void missingFileIsOneLine(@TempDir Path dir) {
    Path missing = dir.resolve("nope.yaml");
    assertThatThrownBy(() -> Budgets.load(missing)).hasMessage(missing + ": file not found");
  }

  @Test
  void loadReadsAFile(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("b.yaml");
    Files.writeString(f, one(OK_REST).replace("chat-interactive", "x") + "    model: m1\n");
    Budget b = Budgets.load(f).budgets().get(0);
    assertThat(b.model()).isEqualTo("m1");
    assertThat(b.anyModel()).isFalse();
  }

  @Test
  void budgetPhasesKnowWhereTheyAreObserved() {
    assertThat(BudgetPhase.QUEUE.serverSide()).isTrue();
    assertThat(BudgetPhase.QUEUE.metric()).isEqualTo("llm_phase_duration_seconds");
    assertThat(BudgetPhase.QUEUE.matcher()).isEqualTo("llm_phase=\"queue\"");
    assertThat(BudgetPhase.QUEUE.owner()).isEqualTo("inference-pool capacity");
    assertThat(BudgetPhase.GATEWAY.matcher()).isEqualTo("llm_phase=\"gateway\"");
    assertThat(BudgetPhase.TOTAL.metric()).isEqualTo("gen_ai_server_request_duration_seconds");
    assertThat(BudgetPhase.TOTAL.matcher()).isEqualTo("outcome=\"success\"");
    assertThat(BudgetPhase.SERVER_ROOT.metric()).isEqualTo(BudgetPhase.TOTAL.metric());
    assertThat(BudgetPhase.SERVER_TTFT.metric())
        .isEqualTo("gen_ai_server_time_to_first_token_seconds");
    assertThat(BudgetPhase.TPOT.metric()).isEqualTo("gen_ai_server_time_per_output_token_seconds");
    assertThat(BudgetPhase.ITL.metric()).isEqualTo("llm_inter_token_latency_seconds");
    assertThat(BudgetPhase.TTFT.matcher()).isEmpty();
    assertThat(BudgetPhase.NETWORK_ENVELOPE.owner()).isEqualTo("network");
    List<BudgetPhase> clientOnly =
        List.of(
            BudgetPhase.NETWORK_ENVELOPE,
            BudgetPhase.TTFT_ENVELOPE,
            BudgetPhase.CLIENT_TOTAL,
            BudgetPhase.CLIENT_TTFT,
            BudgetPhase.TRANSPORT_SETUP,
            BudgetPhase.DNS,
            BudgetPhase.CONNECT,
            BudgetPhase.TLS,
            BudgetPhase.SCHEDULE_LAG);
    for (BudgetPhase p : BudgetPhase.values()) {
      assertThat(p.serverSide()).as(p.key()).isEqualTo(!clientOnly.contains(p));
      assertThat(BudgetPhase.fromKey(p.key())).contains(p);
    }
    assertThatThrownBy(BudgetPhase.NETWORK_ENVELOPE::metric)
        .isInstanceOf(IllegalStateException.class);
  }

  private static String budgetWithQueue(int i, double queueMs) {
    return "  - {name: b"
        + i
        + ", quantile: 0.95, window: 1m, limits_ms: {queue: "
        + queueMs
        + ", write: "
        + (1000 + i % 3)
        + "}, max_error_rate: 0.1, min_join_coverage: 0}\n";
  }

  @Test
  void eachHistogramTakesAtMostEightExtraBoundariesAndTheNinthIsRefusedByKey() {
    StringBuilder eight = new StringBuilder("budgets:\n");
    for (int i = 1; i <= io.phasemeter.proxy.telemetry.BucketLayout.MAX_EXTRA; i++) {
      eight.append(budgetWithQueue(i, 200 + i));
    }
    // A GenAI boundary (320 ms) and a repeated limit add no boundary.
    eight.append(budgetWithQueue(20, 320)).append(budgetWithQueue(21, 201));
    Budgets ok = Budgets.parse(eight.toString(), SRC);
    assertThat(
            ok.bucketLayout()
                .extra(io.phasemeter.proxy.telemetry.BucketLayout.Metric.PHASE, "queue"))
        .hasSize(8);
    String nine = eight + budgetWithQueue(9, 250);
    assertThatThrownBy(() -> Budgets.parse(nine, SRC))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            SRC
                + ": budgets[10] (b9).limits_ms.queue: le=\"0.25\" would be extra bucket"
                + " boundary 9 of llm_phase_duration_seconds{llm_phase=\"queue\"} (at most 8 per"
                + " histogram besides the GenAI ones: each is a series per model and pool); give"
                + " budgets the same limit, or drop one");
  }

  @Test
  void sloPeriodIsOptionalInDaysOrADurationAndChecked() {
    assertThat(Budgets.parse(one(OK_REST), SRC).budgets().get(0).sloPeriod()).isNull();
    assertThat(
            Budgets.parse(one(OK_REST + "    slo_period: 30d\n"), SRC).budgets().get(0).sloPeriod())
        .isEqualTo(Duration.ofDays(30));
    assertThat(
            Budgets.parse(one(OK_REST + "    slo_period: 672h\n"), SRC)
                .budgets()
                .get(0)
                .sloPeriod())
        .isEqualTo(Duration.ofDays(28));
    assertThatThrownBy(() -> Budgets.parse(one(OK_REST + "    slo_period: 1d\n"), SRC))
        .hasMessageStartingWith(
            SRC + ": budgets[0] (chat-interactive).slo_period: must be between 7d and 366d");
    assertThatThrownBy(() -> Budgets.parse(one(OK_REST + "    slo_period: monthly\n"), SRC))
        .hasMessageStartingWith(
            SRC + ": budgets[0] (chat-interactive).slo_period: 'monthly' is not a period");
    assertThatThrownBy(
            () ->
                Budgets.parse(
                    one(OK_REST.replace("0.95\n", "0.9\n") + "    slo_period: 30d\n"), SRC))
        .hasMessageContaining(
            "(chat-interactive).slo_period: quantile 0.9 allows 10% above a limit; the fast-burn"
                + " alert (14.4 x that) could never fire");
  }

  @Test
  void sloTenantAndMinAttainmentAreKeptAndDefaultToNone() {
    Budget plain = Budgets.parse(one(OK_REST), SRC).budgets().get(0);
    assertThat(plain.slo()).isEqualTo(Objectives.NONE);
    assertThat(plain.minAttainment()).isNull();
    assertThat(plain.tenant()).isEqualTo("*");
    assertThat(plain.anyTenant()).isTrue();
    Budget b =
        Budgets.parse(
                one(
                    OK_REST
                        + "    slo_ms: {server_ttft: 500, tpot: 50}\n"
                        + "    min_attainment: 0.99\n"
                        + "    tenant: team-a\n"),
                SRC)
            .budgets()
            .get(0);
    assertThat(b.slo().limitsMs())
        .containsExactly(entry("server_ttft", 500.0), entry("tpot", 50.0));
    assertThat(b.minAttainment()).isEqualTo(0.99);
    assertThat(b.allowedMissedShare()).isEqualByComparingTo("0.01");
    assertThat(b.tenant()).isEqualTo("team-a");
    assertThat(b.anyTenant()).isFalse();
  }

  @Test
  void badAttainmentOrTenantIsOneLineNamingTheKey() {
    String slo = "    slo_ms: {server_ttft: 500}\n";
    refused(
        slo + "    min_attainment: 1\n",
        "min_attainment: 1.0 is not a share between 0 and 1 (exclusive), e.g. 0.99");
    refused(
        slo + "    min_attainment: 0\n",
        "min_attainment: 0.0 is not a share between 0 and 1 (exclusive), e.g. 0.99");
    refused(slo + "    min_attainment: 99%\n", "min_attainment: expected a number, got '99%'");
    refused(
        "    min_attainment: 0.99\n",
        "min_attainment: needs slo_ms (the attainment is the share of requests that met every");
    refused(
        slo + "    min_attainment: 0.9\n    slo_period: 30d\n",
        "min_attainment: 0.9 allows 10% of requests to miss; with slo_period the fast-burn alert"
            + " (14.4 x that) could never fire");
    refused("    tenant: team a\n", "tenant: 'team a' is not \"*\" (every tenant) or a tenant");
    refused("    tenant: '" + "t".repeat(65) + "'\n", "tenant: '" + "t".repeat(65) + "' is not");
    refused("    tenant: [a, b]\n", "tenant: expected a single value");
  }

  private static void refused(String extra, String expected) {
    assertThatThrownBy(() -> Budgets.parse(one(OK_REST + extra), SRC))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(SRC + ": budgets[0] (chat-interactive)." + expected)
        .hasMessageNotContaining("\n");
  }
}
