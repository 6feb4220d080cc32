package io.phasemeter.proxy.budget;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Durations;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Renders budgets as Prometheus alerting rules: per budget, one alert for each server-side phase it
 * limits (the budget's quantile of that phase's histogram over the budget's window, per pool) and
 * one for its error rate. Client-only phases get a comment: only the load client sees them.
 *
 * <p>Quantiles are taken from buckets summed over every proxy replica ({@code sum by (le,
 * llm_pool)}), so the rules hold for any number of replicas, and each pool alerts on its own.
 */
public final class AlertRules {
  /** The one rule group. */
  public static final String GROUP = "phasemeter-budgets";

  private static final Duration MIN_FOR = Duration.ofMinutes(1);
  private static final Duration MAX_FOR = Duration.ofMinutes(15);
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  private AlertRules() {}

  /** The rules for {@code budgets}, in budget order, then phase order of the file. */
  public static List<AlertRule> rules(Budgets budgets) {
    List<AlertRule> out = new ArrayList<>();
    for (Budget b : budgets.budgets()) {
      for (BudgetPhase p : b.phases()) {
        if (p.serverSide()) {
          out.add(phaseRule(b, p));
        }
      }
      out.add(errorRateRule(b));
    }
    return out;
  }

  /**
   * The rules file for {@code budgets}: deterministic text, headed by a comment naming {@code
   * sourceName} (the budgets file as the user named it).
   */
  public static String render(Budgets budgets, String sourceName) {
    return header(sourceName, "", "dashboards/alerts.yaml") + groups(budgets);
  }

  /** Name of the PrometheusRule object that {@link #renderPrometheusRule} writes. */
  public static final String PROMETHEUS_RULE_NAME = "phasemeter-budgets";

  /**
   * The same rules as {@link #render}, wrapped in a Prometheus Operator {@code PrometheusRule}
   * manifest (monitoring.coreos.com/v1) for Kubernetes.
   */
  public static String renderPrometheusRule(Budgets budgets, String sourceName) {
    StringBuilder y =
        new StringBuilder(
            header(sourceName, " --kubernetes", "config/kubernetes/prometheusrule.yaml"));
    y.append("apiVersion: monitoring.coreos.com/v1\n");
    y.append("kind: PrometheusRule\n");
    y.append("metadata:\n");
    y.append("  name: ").append(PROMETHEUS_RULE_NAME).append('\n');
    y.append("  labels:\n");
    y.append("    app.kubernetes.io/name: phasemeter\n");
    y.append("spec:\n");
    // Every line of the rules file is a key, a list item or a quoted one-line scalar, so
    // indenting the whole block keeps its meaning.
    groups(budgets).lines().forEach(l -> y.append(l.isEmpty() ? "" : "  ").append(l).append('\n'));
    return y.toString();
  }

  private static String header(String sourceName, String flags, String out) {
    StringBuilder y = new StringBuilder();
    y.append("# Prometheus alerting rules generated from ").append(sourceName).append(".\n");
    y.append("# Do not edit by hand: change the budgets, then run\n");
    y.append("#   ./phasemeter alerts --budgets ")
        .append(sourceName)
        .append(flags)
        .append(" --out ")
        .append(out)
        .append('\n');
    y.append("# (a test fails when this file and the budgets drift apart).\n");
    y.append("# Quantiles come from buckets summed over every proxy replica, per pool:\n");
    y.append("# each pool alerts on its own and the alert carries its llm_pool label.\n");
    return y.toString();
  }

  private static String groups(Budgets budgets) {
    StringBuilder y = new StringBuilder();
    y.append("groups:\n");
    y.append("  - name: ").append(GROUP).append('\n');
    List<AlertRule> rules = rules(budgets);
    if (rules.isEmpty()) {
      y.append("    rules: []\n");
      return y.toString();
    }
    y.append("    rules:\n");
    for (Budget b : budgets.budgets()) {
      y.append("      # Budget ")
          .append(b.name())
          .append(": ")
          .append(modelText(b))
          .append(", p")
          .append(percent(b.quantile()))
          .append(" over ")
          .append(Durations.format(b.window()))
          .append(".\n");
      for (BudgetPhase p : b.phases()) {
        if (!p.serverSide()) {
          y.append("      # ")
              .append(p.key())
              .append(" (")
              .append(plain(b.limitMs(p)))
              .append(" ms) is judged by the load client (phasemeter load --budgets):")
              .append(" the proxy alone cannot observe it.\n");
        }
      }
      y.append("      # min_join_coverage (")
          .append(plain(b.minJoinCoverage()))
          .append(") is judged by the load client.\n");
      for (AlertRule r : rules) {
        if (r.budget() == b) {
          appendRule(y, r);
        }
      }
    }
    return y.toString();
  }

  /** Every {@code expr} of every rule in a rules file (for tests that evaluate them). */
  public static List<String> expressions(Path alertsYaml) throws IOException {
    JsonNode root = YAML.readTree(Files.readString(alertsYaml));
    List<String> out = new ArrayList<>();
    if (root == null) {
      return out;
    }
    for (JsonNode group : root.path("groups")) {
      for (JsonNode rule : group.path("rules")) {
        if (rule.hasNonNull("expr")) {
          out.add(rule.get("expr").asText());
        }
      }
    }
    return out;
  }

  private static AlertRule phaseRule(Budget b, BudgetPhase p) {
    String matchers = join(p.matcher(), modelMatcher(b));
    String selector = p.metric() + "_bucket" + (matchers.isEmpty() ? "" : "{" + matchers + "}");
    double limitMs = b.limitMs(p);
    String expr =
        "histogram_quantile("
            + plain(b.quantile())
            + ", sum by (le, llm_pool) (rate("
            + selector
            + "["
            + Durations.format(b.window())
            + "]))) > "
            + plain(BigDecimal.valueOf(limitMs).movePointLeft(3));
    String pq = "p" + percent(b.quantile());
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("severity", "page");
    labels.put("budget", b.name());
    labels.put("llm_phase", p.key());
    labels.put("owner", p.owner());
    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(
        "summary",
        "Budget "
            + b.name()
            + ": "
            + p.key()
            + " "
            + pq
            + " is {{ $value | humanizeDuration }} in pool {{ $labels.llm_pool }}, over its "
            + plain(limitMs)
            + " ms limit; page "
            + p.owner());
    String series = p.metric() + (p.matcher().isEmpty() ? "" : "{" + p.matcher() + "}");
    annotations.put(
        "description",
        "The "
            + pq
            + " of "
            + p.key()
            + " ("
            + series
            + ") over the last "
            + Durations.format(b.window())
            + " is {{ $value | humanizeDuration }} in pool {{ $labels.llm_pool }} ("
            + modelText(b)
            + ", all proxy replicas together), above the budget's limit of "
            + plain(limitMs)
            + " ms. Owner: "
            + p.owner()
            + ". Each pool is evaluated on its own.");
    return new AlertRule(
        "Phasemeter" + b.camelName() + p.camelCase() + "Breached",
        expr,
        forDuration(b),
        Collections.unmodifiableMap(labels),
        Collections.unmodifiableMap(annotations),
        b,
        p);
  }

  private static AlertRule errorRateRule(Budget b) {
    String count = "gen_ai_server_request_duration_seconds_count";
    String window = "[" + Durations.format(b.window()) + "]";
    String model = modelMatcher(b);
    String expr =
        "sum by (llm_pool) (rate("
            + count
            + "{"
            + join("outcome!=\"success\"", model)
            + "}"
            + window
            + ")) / sum by (llm_pool) (rate("
            + count
            + (model.isEmpty() ? "" : "{" + model + "}")
            + window
            + ")) > "
            + plain(b.maxErrorRate());
    String owner = "on-call (triage by outcome)";
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("severity", "page");
    labels.put("budget", b.name());
    labels.put("owner", owner);
    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(
        "summary",
        "Budget "
            + b.name()
            + ": error rate is {{ $value | humanizePercentage }} in pool {{ $labels.llm_pool }},"
            + " over its "
            + plain(BigDecimal.valueOf(b.maxErrorRate()).movePointRight(2))
            + "% limit");
    annotations.put(
        "description",
        "Over the last "
            + Durations.format(b.window())
            + ", {{ $value | humanizePercentage }} of requests in pool {{ $labels.llm_pool }} ("
            + modelText(b)
            + ") did not succeed (outcome != success), above the budget's "
            + plain(BigDecimal.valueOf(b.maxErrorRate()).movePointRight(2))
            + "%. Split "
            + count
            + " by outcome to find the owner: upstream_error is the model server,"
            + " rejected and timeout are pool capacity, client_error and cancelled are callers.");
    return new AlertRule(
        "Phasemeter" + b.camelName() + "ErrorRateBreached",
        expr,
        forDuration(b),
        Collections.unmodifiableMap(labels),
        Collections.unmodifiableMap(annotations),
        b,
        null);
  }

  /** A fifth of the window, between 1m and 15m: long enough to ride out one bad scrape. */
  static Duration forDuration(Budget b) {
    Duration d = Duration.ofSeconds(b.window().dividedBy(5).toSeconds());
    if (d.compareTo(MIN_FOR) < 0) {
      return MIN_FOR;
    }
    return d.compareTo(MAX_FOR) > 0 ? MAX_FOR : d;
  }

  private static void appendRule(StringBuilder y, AlertRule r) {
    y.append("      - alert: ").append(r.alert()).append('\n');
    y.append("        expr: ").append(quote(r.expr())).append('\n');
    y.append("        for: ").append(Durations.format(r.forDuration())).append('\n');
    y.append("        labels:\n");
    r.labels()
        .forEach(
            (k, v) -> y.append("          ").append(k).append(": ").append(quote(v)).append('\n'));
    y.append("        annotations:\n");
    r.annotations()
        .forEach(
            (k, v) -> y.append("          ").append(k).append(": ").append(quote(v)).append('\n'));
  }

  private static String modelMatcher(Budget b) {
    return b.anyModel() ? "" : "gen_ai_request_model=\"" + promString(b.model()) + "\"";
  }

  private static String modelText(Budget b) {
    return b.anyModel() ? "all models" : "model " + b.model();
  }

  private static String join(String a, String b) {
    if (a.isEmpty()) {
      return b;
    }
    return b.isEmpty() ? a : a + "," + b;
  }

  /** A PromQL double-quoted string body. */
  private static String promString(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }

  /** A YAML single-quoted scalar: no escapes but a doubled quote. */
  private static String quote(String s) {
    return "'" + s.replace("'", "''") + "'";
  }

  private static String plain(double v) {
    return plain(BigDecimal.valueOf(v));
  }

  private static String plain(BigDecimal v) {
    return v.stripTrailingZeros().toPlainString();
  }

  private static String percent(double quantile) {
    return plain(BigDecimal.valueOf(quantile).movePointRight(2));
  }
}
