package io.phasemeter.proxy.budget;

import java.time.Duration;
import java.util.Map;

/**
 * One Prometheus alerting rule derived from a budget.
 *
 * @param alert the unique alert name, e.g. {@code PhasemeterChatInteractiveQueueBreached}
 * @param expr the PromQL condition
 * @param forDuration how long the condition must hold before the alert fires
 * @param labels rule labels, in output order
 * @param annotations summary and description templates, in output order
 * @param budget the budget it guards
 * @param phase the phase it guards, or null for the error-rate and attainment alerts
 * @param kind what it judges
 */
public record AlertRule(
    String alert,
    String expr,
    Duration forDuration,
    Map<String, String> labels,
    Map<String, String> annotations,
    Budget budget,
    BudgetPhase phase,
    Kind kind) {

  /** What a rule judges. */
  public enum Kind {
    /** The share of a phase's values above its limit ({@code limits_ms}). */
    PHASE,
    /** The budget's error rate ({@code max_error_rate}). */
    ERROR_RATE,
    /** The share of judged requests that met every objective ({@code min_attainment}). */
    ATTAINMENT
  }

  public AlertRule {
    if ((phase != null) != (kind == Kind.PHASE)) {
      throw new IllegalArgumentException("a phase rule, and only a phase rule, has a phase");
    }
  }

  /** Whether this is the budget's error-rate alert. */
  public boolean errorRate() {
    return kind == Kind.ERROR_RATE;
  }

  /** Whether this is one of the budget's SLO attainment alerts. */
  public boolean attainment() {
    return kind == Kind.ATTAINMENT;
  }
}
