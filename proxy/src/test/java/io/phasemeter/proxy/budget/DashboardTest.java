package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** dashboards/phasemeter.json: structure Grafana needs, and PromQL that Prometheus parses. */
class DashboardTest {
  static final Path DASHBOARD = Path.of("../dashboards/phasemeter.json");
  private static final JsonNode DATASOURCE =
      new ObjectMapper().createObjectNode().put("type", "prometheus").put("uid", "${datasource}");

  /** The metric names of docs/design.md §4 that the dashboard may use (JVM: Micrometer's names). */
  private static final Set<String> KNOWN_METRICS =
      Set.of(
          "gen_ai_server_request_duration_seconds_count",
          "gen_ai_server_request_duration_seconds_bucket",
          "gen_ai_server_time_to_first_token_seconds_bucket",
          "gen_ai_server_time_per_output_token_seconds_bucket",
          "llm_phase_duration_seconds_sum",
          "llm_phase_duration_seconds_count",
          "llm_phase_duration_seconds_bucket",
          "llm_inter_token_latency_seconds_bucket",
          "llm_tokens_total",
          "llm_requests_in_flight",
          "llm_queue_depth",
          "llm_slots_in_use",
          "llm_slots_capacity",
          "llm_budget_ratio",
          "llm_slo_requests_total",
          "llm_traces_exported_ratio",
          "llm_telemetry_dropped_total",
          "llm_engine_spans_total",
          "jvm_gc_pause_seconds_sum",
          "jvm_gc_pause_seconds_max");

  private static JsonNode dashboard;

  @BeforeAll
  static void read() throws Exception {
    dashboard = new ObjectMapper().readTree(DASHBOARD.toFile());
  }

  @Test
  void everyPanelAndTargetUsesTheDatasourceVariable() {
    assertThat(dashboard.path("schemaVersion").asInt()).isBetween(36, 41);
    List<String> checked = new ArrayList<>();
    walk(
        dashboard.path("panels"),
        panel -> {
          if (panel.path("type").asText().equals("row")) {
            return;
          }
          String title = panel.path("title").asText();
          assertThat(panel.path("datasource"))
              .as("datasource of panel %s", title)
              .isEqualTo(DATASOURCE);
          assertThat(panel.path("targets")).as("targets of %s", title).isNotEmpty();
          for (JsonNode t : panel.path("targets")) {
            assertThat(t.path("datasource"))
                .as("datasource of a target in %s", title)
                .isEqualTo(DATASOURCE);
            assertThat(t.path("expr").asText()).as("expr in %s", title).isNotBlank();
          }
          checked.add(title);
        });
    assertThat(checked).hasSizeGreaterThanOrEqualTo(12);
  }

  @Test
  void templateVariablesAreDatasourceModelPoolAndTenant() {
    JsonNode vars = dashboard.path("templating").path("list");
    JsonNode ds = byName(vars, "datasource");
    assertThat(ds.path("type").asText()).isEqualTo("datasource");
    assertThat(ds.path("query").asText()).isEqualTo("prometheus");
    assertThat(byName(vars, "model").path("query").path("query").asText())
        .isEqualTo(
            "label_values(gen_ai_server_request_duration_seconds_count, gen_ai_request_model)");
    assertThat(byName(vars, "pool").path("query").path("query").asText())
        .isEqualTo("label_values(gen_ai_server_request_duration_seconds_count, llm_pool)");
    assertThat(byName(vars, "tenant").path("query").path("query").asText())
        .isEqualTo("label_values(llm_slo_requests_total, llm_tenant)");
    for (String name : List.of("model", "pool", "tenant")) {
      assertThat(byName(vars, name).path("datasource")).isEqualTo(DATASOURCE);
      assertThat(byName(vars, name).path("allValue").asText()).isEqualTo(".*");
      assertThat(byName(vars, name).path("multi").asBoolean()).isTrue();
      assertThat(byName(vars, name).path("includeAll").asBoolean()).isTrue();
    }
  }

  @Test
  void thePanelsTheReadmePromisesAreThere() {
    List<String> titles = new ArrayList<>();
    walk(dashboard.path("panels"), p -> titles.add(p.path("title").asText()));
    assertThat(String.join("\n", titles))
        .contains(
            "Request rate",
            "Error rate",
            "Time to first token",
            "Time per output token",
            "Total (server root)",
            "Phase breakdown",
            "Inside generation",
            "Engine span coverage",
            "Queue depth",
            "Slots in use vs capacity",
            "Budget ratio",
            "Exported trace share",
            "Telemetry dropped",
            "GC pause",
            "SLO attainment by tenant",
            "Goodput (met requests/s) by tenant",
            "SLO misses by first missed objective",
            "SLO attainment over the time range by tenant");
    for (DashboardQueries.Target t : DashboardQueries.targets(dashboard)) {
      boolean wantExemplars =
          t.panel().startsWith("Time to first token") || t.panel().startsWith("Total");
      assertThat(t.target().path("exemplar").asBoolean())
          .as("exemplar on a target of %s", t.panel())
          .isEqualTo(wantExemplars);
    }
    JsonNode breakdown =
        DashboardQueries.targets(dashboard).stream()
            .filter(t -> t.panel().startsWith("Phase breakdown"))
            .findFirst()
            .orElseThrow()
            .target();
    assertThat(breakdown.path("expr").asText())
        .contains("llm_phase_duration_seconds_sum", "llm_phase_duration_seconds_count")
        .contains("by (llm_phase)")
        // The engine's phases lie inside generation: stacking them too would count it twice.
        .contains("llm_phase!~\"gateway|engine_queue|prefill|decode\"");
  }

  /**
   * Every panel on a metric that carries {@code llm_tenant} follows the tenant variable; the phase
   * and inter-token histograms do not carry it (phase only with tenants.phase_histograms), so a
   * tenant picked there would empty them.
   */
  @Test
  void panelsOnTenantLabelledMetricsFollowTheTenantVariable() {
    Set<String> labelled =
        Set.of(
            "gen_ai_server_request_duration_seconds",
            "gen_ai_server_time_to_first_token_seconds",
            "gen_ai_server_time_per_output_token_seconds",
            "llm_tokens_total",
            "llm_slo_requests_total");
    Pattern selector = Pattern.compile("\\b([a-z_]+?)(?:_bucket|_count|_sum)?\\{([^}]*)\\}");
    int filtered = 0;
    for (DashboardQueries.Target t : DashboardQueries.targets(dashboard)) {
      Matcher m = selector.matcher(t.expr());
      while (m.find()) {
        boolean tenantFilter = m.group(2).contains("llm_tenant=~\"$tenant\"");
        assertThat(tenantFilter)
            .as("tenant filter on %s in %s", m.group(1), t.panel())
            .isEqualTo(labelled.contains(m.group(1)));
        filtered += tenantFilter ? 1 : 0;
      }
    }
    assertThat(filtered).isGreaterThanOrEqualTo(20);
  }

  @Test
  void everyExpressionUsesOnlyKnownMetricsAndNoLeftoverVariables() throws Exception {
    List<String> exprs = DashboardQueries.expressions(DASHBOARD);
    assertThat(exprs).hasSizeGreaterThanOrEqualTo(20);
    Set<String> used = new TreeSet<>();
    Matcher m =
        Pattern.compile("\\b((?:gen_ai|llm|jvm)_[a-z_]+)\\b").matcher(String.join("\n", exprs));
    while (m.find()) {
      used.add(m.group(1));
    }
    // Label names share the prefixes; keep only names that are metrics.
    used.removeAll(
        Set.of(
            "gen_ai_request_model",
            "llm_pool",
            "llm_phase",
            "gen_ai_token_type",
            "gen_ai_operation_name",
            "llm_streaming",
            "llm_tenant"));
    assertThat(used).isSubsetOf(KNOWN_METRICS);
    assertThat(exprs).allSatisfy(e -> assertThat(e).doesNotContain("$"));
  }

  @Test
  void everyExpressionParsesInPrometheus(@TempDir Path dir) throws Exception {
    Promtool.require();
    List<String> exprs = DashboardQueries.expressions(DASHBOARD);
    StringBuilder rules = new StringBuilder("groups:\n  - name: dashboard-exprs\n    rules:\n");
    for (int i = 0; i < exprs.size(); i++) {
      rules
          .append("      - record: dashboard:expr_")
          .append(i)
          .append("\n        expr: '")
          .append(exprs.get(i).replace("'", "''"))
          .append("'\n");
    }
    Path file = dir.resolve("dashboard-exprs.yaml");
    Files.writeString(file, rules.toString());
    assertThat(Promtool.runOk("check", "rules", file.toString()))
        .contains("SUCCESS: " + exprs.size() + " rules found");
  }

  /**
   * The attainment panels on synthetic counters ({@code promtool test rules}, {@code
   * promql_expr_test}): team-a met half its requests, team-b none (no {@code met} series at all),
   * which the panels show as 0, not as a missing line.
   */
  @Test
  void theAttainmentPanelsComputeFromTheCounters(@TempDir Path dir) throws Exception {
    Promtool.require();
    String series = "llm_slo_requests_total{budget=\"chat\",llm_pool=\"default\",llm_tenant=\"";
    StringBuilder t = new StringBuilder("rule_files: []\nevaluation_interval: 1m\ntests:\n");
    t.append("  - interval: 1m\n    input_series:\n");
    for (String[] s :
        new String[][] {
          {"team-a\",result=\"met\",objective=\"none\"}", "0+60x20"},
          {"team-a\",result=\"missed\",objective=\"server_ttft\"}", "0+60x20"},
          {"team-b\",result=\"missed\",objective=\"error\"}", "0+30x20"}
        }) {
      t.append("      - series: '").append(series).append(s[0]).append("'\n");
      t.append("        values: '").append(s[1]).append("'\n");
    }
    t.append("    promql_expr_test:\n");
    String a = "{budget=\"chat\",llm_tenant=\"team-a\"}";
    String b = "{budget=\"chat\",llm_tenant=\"team-b\"}";
    exprTest(t, panelExpr("SLO attainment by tenant", 0), a, "0.5", b, "0");
    exprTest(t, panelExpr("SLO attainment over the time range by tenant", 0), a, "0.5", b, "0");
    exprTest(
        t,
        panelExpr("Goodput (met requests/s) by tenant", 0),
        "{llm_tenant=\"team-a\"}",
        "1",
        "{llm_tenant=\"team-b\"}",
        "0");
    exprTest(
        t,
        panelExpr("Goodput (met requests/s) by tenant", 1),
        "{llm_tenant=\"team-a\"}",
        "2",
        "{llm_tenant=\"team-b\"}",
        "0.5");
    exprTest(
        t,
        panelExpr("SLO misses by first missed objective", 0),
        "{llm_tenant=\"team-a\",objective=\"server_ttft\"}",
        "1",
        "{llm_tenant=\"team-b\",objective=\"error\"}",
        "0.5");
    Path file = dir.resolve("panels_test.yaml");
    Files.writeString(file, t.toString());
    assertThat(Promtool.runOk("test", "rules", file.toString())).contains("SUCCESS");
  }

  /** The {@code i}-th query of the panel titled {@code title}, variables substituted. */
  private static String panelExpr(String title, int i) {
    return DashboardQueries.substitute(
        DashboardQueries.targets(dashboard).stream()
            .filter(t -> t.panel().equals(title))
            .skip(i)
            .findFirst()
            .orElseThrow(() -> new AssertionError("no query " + i + " in panel " + title))
            .expr());
  }

  private static void exprTest(
      StringBuilder t, String expr, String labels1, String value1, String labels2, String value2) {
    t.append("      - expr: '").append(expr.replace("'", "''")).append("'\n");
    t.append("        eval_time: 10m\n        exp_samples:\n");
    t.append("          - labels: '").append(labels1).append("'\n");
    t.append("            value: ").append(value1).append('\n');
    t.append("          - labels: '").append(labels2).append("'\n");
    t.append("            value: ").append(value2).append('\n');
  }

  @Test
  void substitutionCoversBothVariableForms() {
    assertThat(
            DashboardQueries.substitute(
                "rate(x{m=~\"$model\",p=~\"${pool}\",t=~\"$tenant\"}[$__rate_interval])"
                    + " + rate(y[$__interval]) + increase(z[$__range])"))
        .isEqualTo("rate(x{m=~\".*\",p=~\".*\",t=~\".*\"}[1m]) + rate(y[1m]) + increase(z[1h])");
  }

  private static JsonNode byName(JsonNode vars, String name) {
    for (JsonNode v : vars) {
      if (v.path("name").asText().equals(name)) {
        return v;
      }
    }
    throw new AssertionError("no template variable " + name);
  }

  private static void walk(JsonNode panels, java.util.function.Consumer<JsonNode> visit) {
    for (JsonNode p : panels) {
      visit.accept(p);
      walk(p.path("panels"), visit);
    }
  }
}
