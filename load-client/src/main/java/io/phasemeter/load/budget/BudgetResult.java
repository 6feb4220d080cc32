package io.phasemeter.load.budget;

/**
 * One budgeted phase judged over a run.
 *
 * @param name the budget's name
 * @param phase the phase key ({@code queue}, {@code network_envelope}, …, or {@code error_rate} /
 *     {@code join_coverage} for the rate gates)
 * @param limitMs the limit (for rate gates: the rate, 0–1)
 * @param observedMs the observed quantile (for rate gates: the rate); NaN when nothing observed
 * @param breached whether the observation is over the limit (under it, for join coverage)
 */
public record BudgetResult(
    String name, String phase, double limitMs, double observedMs, boolean breached) {}
