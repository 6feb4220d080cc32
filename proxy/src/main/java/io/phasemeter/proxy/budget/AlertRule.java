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
 * @param phase the phase it guards, or null for the error-rate alert
 */
public record AlertRule(
    String alert,
    String expr,
    Duration forDuration,
    Map<String, String> labels,
    Map<String, String> annotations,
    Budget budget,
    BudgetPhase phase) {

  /** Whether this is the budget's error-rate alert rather than a phase-latency alert. */
  public boolean errorRate() {
    return phase == null;
  }
}
