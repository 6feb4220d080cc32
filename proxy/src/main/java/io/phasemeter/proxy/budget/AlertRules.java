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
import java.util.function.Function;

/**
 * Renders budgets as Prometheus alerting rules: per budget, for each server-side phase it limits,
 * the share of that phase's values above the limit compared with the share the budget allows
 * ({@code 1 − quantile}), and one rule for its error rate. Client-only phases get a comment: only
 * the load client sees them.
 *
 * <p>The share is read from the bucket whose boundary is the limit ({@link Budgets#bucketLayout}
 * makes every limit one), {@code 1 − rate(bucket{le=limit}) / rate(count)}: exact, no
 * interpolation, the same arithmetic as the proxy's live verdict ({@link Budget#breached}). Rates
 * are summed over every proxy replica per pool, so the rules hold for any number of replicas and
 * each pool alerts on its own. A budget without {@code slo_period} gets one rule over its window
 * ({@code ...Breached}); one with it gets the SRE workbook's multi-window, multi-burn-rate pair
 * ({@code ...FastBurn} pages, {@code ...SlowBurn} opens a ticket).
 *
 * <p>A budget of one tenant selects that tenant's series ({@code llm_tenant="team-a"}) and its
 * alerts carry the {@code llm_tenant} label; every other budget sums over tenants as over replicas.
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
        if (!p.serverSide()) {
          continue;
        }
        if (b.burnRates()) {
          out.add(burnRule(b, p, "FastBurn", "page", FAST_BURN));
          out.add(burnRule(b, p, "SlowBurn", "ticket", SLOW_BURN));
        } else {
          out.add(phaseRule(b, p));
        }
      }
      out.add(errorRateRule(b));
      out.addAll(AttainmentRules.rules(b));
    }
    return out;
  }

  /**
   * The rules file for {@code budgets}: deterministic text, headed by a comment naming {@code
   * sourceName} (the budgets file as the user named it).
   */
  public static String render(Budgets budgets, String sourceName) {
    return header(budgets, sourceName, "", "dashboards/alerts.yaml") + groups(budgets);
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
            header(budgets, sourceName, " --kubernetes", "config/kubernetes/prometheusrule.yaml"));
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

  private static String header(Budgets budgets, String sourceName, String flags, String out) {
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
    y.append("# Each phase alert counts the share of requests above the limit from the bucket\n");
    y.append("# whose le is the limit (the proxy makes every limit a boundary), summed over\n");
    y.append("# every proxy replica per pool: each pool alerts on its own, with its llm_pool.\n");
    if (budgets.budgets().stream().anyMatch(b -> b.minAttainment() != null)) {
      y.append(AttainmentRules.HEADER);
    }
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
          .append(scopeText(b))
          .append(", p")
          .append(percent(b.quantile()))
          .append(" over ")
          .append(Durations.format(b.window()))
          .append(
              b.burnRates()
                  ? ", error budget period " + Durations.format(b.sloPeriod()) + " (burn rates)"
                  : "")
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
      if (!b.anyTenant()) {
        for (BudgetPhase p : b.phases()) {
          String note = p.serverSide() ? tenantNote(p) : null;
          if (note != null) {
            y.append("      # ").append(p.key()).append(" (").append(p.metric()).append(") ");
            y.append(note).append(".\n");
          }
        }
      }
      y.append("      # min_join_coverage (")
          .append(plain(b.minJoinCoverage()))
          .append(") is judged by the load client.\n");
      AttainmentRules.comments(b).forEach(c -> y.append("      # ").append(c).append('\n'));
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

  /**
   * One burn-rate condition of the SRE workbook (ch. 5): the share above the limit over both
   * windows is more than {@code burn} times the share the budget allows. Windows are the workbook's
   * for a 30-day period, scaled with the budget's {@code slo_period}, so that each alert means the
   * same part of the period's budget spent (2 % in the fast page's long window, 5 % in the slow
   * page's, 10 % in the ticket's).
   */
  record Burn(BigDecimal rate, Duration longWindow, Duration shortWindow) {
    Duration longWindow(Budget b) {
      return scaled(longWindow, b);
    }

    Duration shortWindow(Budget b) {
      return scaled(shortWindow, b);
    }

    /** Scaled by period / 30d, to whole minutes, at least one. */
    private static Duration scaled(Duration at30d, Budget b) {
      double minutes = at30d.toMinutes() * (double) b.sloPeriod().toMinutes() / THIRTY_DAYS_MIN;
      return Duration.ofMinutes(Math.max(1, Math.round(minutes)));
    }
  }

  private static final long THIRTY_DAYS_MIN = Duration.ofDays(30).toMinutes();

  /** Page: 2 % of a 30-day budget in an hour (14.4), or 5 % in six hours (6). */
  static final List<Burn> FAST_BURN =
      List.of(
          new Burn(new BigDecimal("14.4"), Duration.ofHours(1), Duration.ofMinutes(5)),
          new Burn(new BigDecimal("6"), Duration.ofHours(6), Duration.ofMinutes(30)));

  /** Ticket: 10 % of a 30-day budget in three days (1). */
  static final List<Burn> SLOW_BURN =
      List.of(new Burn(BigDecimal.ONE, Duration.ofDays(3), Duration.ofHours(6)));

  /**
   * The share of the phase's values above its limit over {@code window}, per pool, across every
   * replica: {@code 1 - (bucket at the limit / count)}, the bucket whose boundary is the limit
   * (Budgets makes every limit one). No interpolation.
   */
  static String shareAbove(Budget b, BudgetPhase p, Duration window) {
    String matchers = join(p.matcher(), selector(b));
    String w = "[" + Durations.format(window) + "]";
    return "1 - (sum by (llm_pool) (rate("
        + p.metric()
        + "_bucket{"
        + join(matchers, b.leMatcher(p))
        + "}"
        + w
        + ")) / sum by (llm_pool) (rate("
        + p.metric()
        + "_count"
        + (matchers.isEmpty() ? "" : "{" + matchers + "}")
        + w
        + ")))";
  }

  private static AlertRule phaseRule(Budget b, BudgetPhase p) {
    // "> (1 - q)", not "> 0.05": 1 - 95/100 is 0.050000000000000044, above 0.05. (At a share of
    // exactly 1 - q, rate()'s scaling of bucket and count can still tip it either way.)
    String expr = shareAbove(b, p, b.window()) + " > " + allowed(b);
    String what = "over the last " + Durations.format(b.window());
    return phaseAlert(b, p, "Breached", "page", expr, forDuration(b), what);
  }

  /** The allowed share above a limit as PromQL: {@code (1 - 0.95)}. */
  private static String allowed(Budget b) {
    return "(1 - " + plain(b.quantile()) + ")";
  }

  private static AlertRule burnRule(
      Budget b, BudgetPhase p, String suffix, String severity, List<Burn> burns) {
    String expr = burnExpr(b, burns, w -> shareAbove(b, p, w), allowed(b));
    String what = burnText(b, burns, b.allowedShareAbove());
    return phaseAlert(b, p, suffix, severity, expr, burnFor(b, burns), what);
  }

  /**
   * The workbook's condition: for any of {@code burns}, the share over both its windows is above
   * its rate times {@code allowed} (PromQL, e.g. {@code (1 - 0.95)}).
   */
  static String burnExpr(
      Budget b, List<Burn> burns, Function<Duration, String> share, String allowed) {
    List<String> alternatives = new ArrayList<>();
    for (Burn burn : burns) {
      String threshold = plain(burn.rate()) + " * " + allowed;
      alternatives.add(
          "("
              + share.apply(burn.longWindow(b))
              + " > "
              + threshold
              + " and "
              + share.apply(burn.shortWindow(b))
              + " > "
              + threshold
              + ")");
    }
    return String.join(" or ", alternatives);
  }

  /** The windows and rates of {@code burns} in words, {@code allowed} a share (0.05). */
  static String burnText(Budget b, List<Burn> burns, BigDecimal allowed) {
    List<String> windows = new ArrayList<>();
    for (Burn burn : burns) {
      windows.add(
          "over "
              + Durations.format(burn.longWindow(b))
              + " and "
              + Durations.format(burn.shortWindow(b))
              + " at "
              + plain(burn.rate())
              + "x the allowed "
              + plain(allowed.movePointRight(2))
              + "%");
    }
    return "over the long window of "
        + (burns.size() == 1 ? "its condition (" : "the first condition that holds (")
        + String.join("; or ", windows)
        + "; error budget period "
        + Durations.format(b.sloPeriod())
        + ")";
  }

  /** A fifth of the shortest window, between 1m and 15m. */
  static Duration burnFor(Budget b, List<Burn> burns) {
    Duration shortest = null;
    for (Burn burn : burns) {
      Duration sw = burn.shortWindow(b);
      shortest = shortest == null || sw.compareTo(shortest) < 0 ? sw : shortest;
    }
    return clampFor(shortest.dividedBy(5));
  }

  private static AlertRule phaseAlert(
      Budget b,
      BudgetPhase p,
      String suffix,
      String severity,
      String expr,
      Duration forDuration,
      String over) {
    double limitMs = b.limitMs(p);
    String pq = "p" + percent(b.quantile());
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("severity", severity);
    labels.put("budget", b.name());
    labels.put("llm_phase", p.key());
    labels.put("owner", p.owner());
    tenantLabel(b, labels);
    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(
        "summary",
        "Budget "
            + b.name()
            + ": {{ $value | humanizePercentage }} of "
            + p.key()
            + " took longer than its "
            + plain(limitMs)
            + " ms limit in pool {{ $labels.llm_pool }} ("
            + pq
            + " allows "
            + plain(b.allowedShareAbove().movePointRight(2))
            + "%); "
            + (severity.equals("page") ? "page " : "ticket for ")
            + p.owner());
    String series = p.metric() + (p.matcher().isEmpty() ? "" : "{" + p.matcher() + "}");
    annotations.put(
        "description",
        "{{ $value | humanizePercentage }} of "
            + p.key()
            + " ("
            + series
            + ") in pool {{ $labels.llm_pool }} ("
            + scopeText(b)
            + ", all proxy replicas together) took longer than the budget's "
            + plain(limitMs)
            + " ms limit (le=\""
            + b.le(p)
            + "\") "
            + over
            + "; the budget's "
            + pq
            + " allows "
            + plain(b.allowedShareAbove().movePointRight(2))
            + "%. Owner: "
            + p.owner()
            + ". Each pool is evaluated on its own.");
    return new AlertRule(
        "Phasemeter" + b.camelName() + p.camelCase() + suffix,
        expr,
        forDuration,
        Collections.unmodifiableMap(labels),
        Collections.unmodifiableMap(annotations),
        b,
        p,
        AlertRule.Kind.PHASE);
  }

  private static AlertRule errorRateRule(Budget b) {
    String count = "gen_ai_server_request_duration_seconds_count";
    String window = "[" + Durations.format(b.window()) + "]";
    String model = selector(b);
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
    tenantLabel(b, labels);
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
            + scopeText(b)
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
        null,
        AlertRule.Kind.ERROR_RATE);
  }

  /** A budget of one tenant: its alerts say which ({@code llm_tenant}, as on the metrics). */
  private static void tenantLabel(Budget b, Map<String, String> labels) {
    if (!b.anyTenant()) {
      labels.put("llm_tenant", b.tenant());
    }
  }

  /** A fifth of the window, between 1m and 15m: long enough to ride out one bad scrape. */
  static Duration forDuration(Budget b) {
    return clampFor(b.window().dividedBy(5));
  }

  static Duration clampFor(Duration fifth) {
    Duration d = Duration.ofSeconds(fifth.toSeconds());
    if (d.compareTo(MIN_FOR) < 0) {
      return MIN_FOR;
    }
    return d.compareTo(MAX_FOR) > 0 ? MAX_FOR : d;
  }

  /**
   * Why a tenant budget's rule on {@code p} may select nothing: its histogram carries {@code
   * llm_tenant} only with {@code tenants.phase_histograms: true}, or never; null when it always
   * does.
   */
  private static String tenantNote(BudgetPhase p) {
    return switch (p.histogram()) {
      case TTFT, TPOT, REQUEST -> null;
      case PHASE ->
          "carries llm_tenant only with tenants.phase_histograms: true in proxy.yaml (the proxy"
              + " refuses this budget without it)";
      case ITL -> "has no llm_tenant label: its rule cannot select one tenant";
    };
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

  /** The matchers of the budget's requests: its model and its tenant, when it names them. */
  private static String selector(Budget b) {
    String model = b.anyModel() ? "" : "gen_ai_request_model=\"" + promString(b.model()) + "\"";
    return join(model, tenantMatcher(b));
  }

  /** {@code llm_tenant="<tenant>"}, or empty for a budget of every tenant. */
  static String tenantMatcher(Budget b) {
    return b.anyTenant() ? "" : "llm_tenant=\"" + promString(b.tenant()) + "\"";
  }

  /** The requests a budget covers, in words: {@code all models}, {@code model m, tenant t}. */
  static String scopeText(Budget b) {
    return (b.anyModel() ? "all models" : "model " + b.model())
        + (b.anyTenant() ? "" : ", tenant " + b.tenant());
  }

  static String join(String a, String b) {
    if (a.isEmpty()) {
      return b;
    }
    return b.isEmpty() ? a : a + "," + b;
  }

  /** A PromQL double-quoted string body. */
  static String promString(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }

  /** A YAML single-quoted scalar: no escapes but a doubled quote. */
  private static String quote(String s) {
    return "'" + s.replace("'", "''") + "'";
  }

  static String plain(double v) {
    return plain(BigDecimal.valueOf(v));
  }

  static String plain(BigDecimal v) {
    return v.stripTrailingZeros().toPlainString();
  }

  private static String percent(double quantile) {
    return plain(BigDecimal.valueOf(quantile).movePointRight(2));
  }
}
