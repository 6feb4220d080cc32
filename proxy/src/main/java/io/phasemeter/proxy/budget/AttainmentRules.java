package io.phasemeter.proxy.budget;

import io.phasemeter.core.Durations;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The rules on a budget's SLO attainment ({@code slo_ms} with {@code min_attainment}): the share of
 * the requests the proxy judged under the budget that met every objective, from {@code
 * llm_slo_requests_total{budget="<name>"}}, per tenant and pool ({@code sum by (llm_tenant,
 * llm_pool)}), so each tenant fires alone. Without {@code slo_period}, one rule over the budget's
 * window, {@code Phasemeter<Budget>AttainmentBreached}, when the attainment is below {@code
 * min_attainment}; with it, the phase rules' multi-window, multi-burn-rate pair over the error
 * budget {@code 1 − min_attainment} ({@code …FastBurn} pages, {@code …SlowBurn} opens a ticket).
 *
 * <p>Met is {@code (met or 0 * judged)}: a tenant whose every request missed has no {@code
 * result="met"} series, and a plain division would give no sample, so no alert, at 0 %. A tenant
 * with no request judged over the window gives 0 ÷ 0, NaN, which no comparison passes; a tenant
 * with no series gives no sample at all. Neither fires.
 */
final class AttainmentRules {
  static final String METRIC = "llm_slo_requests_total";

  /** The series each tenant and pool is judged on. */
  private static final String BY = "sum by (llm_tenant, llm_pool) ";

  private static final String OWNER = "on-call (triage by objective)";

  /** The rules file's header lines when some budget has an attainment target. */
  static final String HEADER =
      "# Each attainment alert divides the requests that met every objective by those the proxy\n"
          + "# judged (llm_slo_requests_total), per tenant and pool: each tenant alerts on its own.\n";

  private AttainmentRules() {}

  /** The attainment rules of {@code b}: none without {@code min_attainment}. */
  static List<AlertRule> rules(Budget b) {
    if (b.minAttainment() == null || b.slo().judgedByProxy().isEmpty()) {
      // Without an objective the proxy judges, no request is counted under this budget.
      return List.of();
    }
    if (b.burnRates()) {
      return List.of(
          burnRule(b, "FastBurn", "page", AlertRules.FAST_BURN),
          burnRule(b, "SlowBurn", "ticket", AlertRules.SLOW_BURN));
    }
    return List.of(simpleRule(b));
  }

  /**
   * The attainment over {@code window}, per tenant and pool: {@code (met or 0 * judged) / judged}.
   */
  static String attainment(Budget b, Duration window) {
    String w = "[" + Durations.format(window) + "]";
    String judged = BY + "(rate(" + METRIC + "{" + selector(b) + "}" + w + "))";
    String met =
        BY
            + "(rate("
            + METRIC
            + "{"
            + AlertRules.join(selector(b), "result=\"met\"")
            + "}"
            + w
            + "))";
    return "(" + met + " or 0 * " + judged + ") / " + judged;
  }

  /** The share of judged requests that missed an objective: {@code 1 − attainment}. */
  static String missedShare(Budget b, Duration window) {
    return "1 - (" + attainment(b, window) + ")";
  }

  /** The comment lines the rules file gives a budget's objectives. */
  static List<String> comments(Budget b) {
    List<String> out = new ArrayList<>();
    if (b.slo().isEmpty()) {
      return out;
    }
    List<String> judged = b.slo().judgedByProxy().keys();
    List<String> client = b.slo().keys().stream().filter(k -> !judged.contains(k)).toList();
    if (!client.isEmpty()) {
      out.add(
          "slo_ms "
              + String.join(", ", client)
              + (client.size() == 1 ? " is" : " are")
              + " judged by the load client only (phasemeter load): the proxy judges only the"
              + " objectives on its own clock.");
    }
    if (b.minAttainment() == null) {
      out.add(
          "slo_ms without min_attainment: no attainment alert (/admin/stats shows the attainment"
              + " without a verdict).");
    } else if (judged.isEmpty()) {
      out.add(
          "min_attainment without an objective the proxy judges: no attainment alert (the proxy"
              + " counts no request under this budget).");
    } else {
      out.add(
          "Attainment: "
              + METRIC
              + "{"
              + selector(b)
              + "}, met / judged per tenant and pool, at least "
              + percent(BigDecimal.valueOf(b.minAttainment()))
              + "% ("
              + objectivesText(b)
              + ").");
    }
    return out;
  }

  private static AlertRule simpleRule(Budget b) {
    String min = AlertRules.plain(b.minAttainment());
    String expr = attainment(b, b.window()) + " < " + min;
    String target = percent(BigDecimal.valueOf(b.minAttainment()));
    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(
        "summary",
        "Budget "
            + b.name()
            + ": SLO attainment of tenant {{ $labels.llm_tenant }} in pool {{ $labels.llm_pool }}"
            + " is {{ $value | humanizePercentage }}, under its "
            + target
            + "% target; page "
            + OWNER);
    annotations.put(
        "description",
        "Over the last "
            + Durations.format(b.window())
            + ", {{ $value | humanizePercentage }} of the requests of tenant"
            + " {{ $labels.llm_tenant }} in pool {{ $labels.llm_pool }} that the proxy judged"
            + " under budget "
            + b.name()
            + " ("
            + series(b)
            + "; "
            + AlertRules.scopeText(b)
            + ", all proxy replicas together) met every objective ("
            + objectivesText(b)
            + "), under the budget's min_attainment of "
            + target
            + "%. "
            + TRIAGE);
    return rule(b, "", "page", expr, AlertRules.forDuration(b), annotations);
  }

  private static AlertRule burnRule(
      Budget b, String suffix, String severity, List<AlertRules.Burn> burns) {
    BigDecimal allowed = b.allowedMissedShare();
    String allowedPromql = "(1 - " + AlertRules.plain(b.minAttainment()) + ")";
    String expr = AlertRules.burnExpr(b, burns, w -> missedShare(b, w), allowedPromql);
    String target = percent(BigDecimal.valueOf(b.minAttainment()));
    String allows = target + "% attainment allows " + percent(allowed) + "%";
    Map<String, String> annotations = new LinkedHashMap<>();
    annotations.put(
        "summary",
        "Budget "
            + b.name()
            + ": {{ $value | humanizePercentage }} of the requests of tenant"
            + " {{ $labels.llm_tenant }} in pool {{ $labels.llm_pool }} missed an objective ("
            + allows
            + "); "
            + (severity.equals("page") ? "page " : "ticket for ")
            + OWNER);
    annotations.put(
        "description",
        "{{ $value | humanizePercentage }} of the requests of tenant {{ $labels.llm_tenant }} in"
            + " pool {{ $labels.llm_pool }} that the proxy judged under budget "
            + b.name()
            + " ("
            + series(b)
            + "; "
            + AlertRules.scopeText(b)
            + ", all proxy replicas together) missed an objective ("
            + objectivesText(b)
            + ") "
            + AlertRules.burnText(b, burns, allowed)
            + "; the budget's "
            + allows
            + ". "
            + TRIAGE);
    return rule(b, suffix, severity, expr, AlertRules.burnFor(b, burns), annotations);
  }

  private static final String TRIAGE =
      "Split "
          + METRIC
          + "{result=\"missed\"} by objective for the first objective missed and page its owner"
          + " (error: the request failed; triage by outcome). Each tenant and pool is evaluated on"
          + " its own.";

  private static AlertRule rule(
      Budget b,
      String suffix,
      String severity,
      String expr,
      Duration forDuration,
      Map<String, String> annotations) {
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put("severity", severity);
    labels.put("budget", b.name());
    labels.put("owner", OWNER);
    return new AlertRule(
        "Phasemeter" + b.camelName() + "Attainment" + (suffix.isEmpty() ? "Breached" : suffix),
        expr,
        forDuration,
        Collections.unmodifiableMap(labels),
        Collections.unmodifiableMap(annotations),
        b,
        null,
        AlertRule.Kind.ATTAINMENT);
  }

  /** {@code budget="chat"}, and {@code llm_tenant="t"} for a budget of one tenant. */
  private static String selector(Budget b) {
    return AlertRules.join(
        "budget=\"" + AlertRules.promString(b.name()) + "\"", AlertRules.tenantMatcher(b));
  }

  private static String series(Budget b) {
    return METRIC + "{" + selector(b) + "}";
  }

  /**
   * The objectives the proxy judges, {@code server_ttft 1200 ms, tpot 100 ms; x-slo-* headers
   * override per request}.
   */
  private static String objectivesText(Budget b) {
    List<String> parts = new ArrayList<>();
    b.slo()
        .judgedByProxy()
        .limitsMs()
        .forEach((k, ms) -> parts.add(k + " " + AlertRules.plain(ms) + " ms"));
    return (parts.isEmpty() ? "none from the budget" : String.join(", ", parts))
        + "; x-slo-* headers override per request";
  }

  private static String percent(BigDecimal share) {
    return AlertRules.plain(share.movePointRight(2));
  }
}
