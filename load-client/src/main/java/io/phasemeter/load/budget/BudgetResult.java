package io.phasemeter.load.budget;

/**
 * One budgeted phase judged over a run.
 *
 * @param name the budget's name
 * @param phase the phase key ({@code queue}, {@code network_envelope}, …, or {@code error_rate} /
 *     {@code join_coverage} for the rate gates)
 * @param limitMs the limit (for rate gates: the rate, 0–1)
 * @param observedMs the observed quantile (for rate gates: the rate); NaN when nothing observed
 * @param breached whether the observation is over the limit (under it, for join coverage); for a
 *     latency budget with {@code counts}, whether more than {@code 1 − quantile} of the values were
 *     above the limit ({@code core.budget.LatencyLimit.breached}, the proxy's rule too)
 * @param counts for a latency budget judged exactly, the values at or below the limit and all the
 *     values; null when it was judged by comparing the quantile with the limit (rate gates, or a
 *     merge that had only histograms for the phase)
 * @param notApplicable why the phase does not exist for the run's API (TTFT of embeddings), or
 *     null; such a budget is neither held nor breached ({@link #applicable()})
 */
public record BudgetResult(
    String name,
    String phase,
    double limitMs,
    double observedMs,
    boolean breached,
    Counts counts,
    String notApplicable) {

  public BudgetResult {
    if (notApplicable != null && breached) {
      throw new IllegalArgumentException("a budget that does not apply cannot be breached");
    }
  }

  /** A result, exact when it has {@code counts}. */
  public BudgetResult(
      String name,
      String phase,
      double limitMs,
      double observedMs,
      boolean breached,
      Counts counts) {
    this(name, phase, limitMs, observedMs, breached, counts, null);
  }

  /** A result without exact counts. */
  public BudgetResult(
      String name, String phase, double limitMs, double observedMs, boolean breached) {
    this(name, phase, limitMs, observedMs, breached, null, null);
  }

  /** A budget on a phase the run's API does not have: not judged, and said so. */
  public static BudgetResult notApplicable(String name, String phase, double limitMs, String why) {
    return new BudgetResult(name, phase, limitMs, Double.NaN, false, null, why);
  }

  /** Whether the phase exists for the run's API, so that the budget was judged. */
  public boolean applicable() {
    return notApplicable == null;
  }

  /**
   * Exact counts of one phase's values against one limit.
   *
   * @param atOrBelow values at or below the limit (in whole nanoseconds)
   * @param total values
   */
  public record Counts(long atOrBelow, long total) {
    /** The share of values above the limit, 0–1; NaN without values (/admin/stats' field). */
    public double overLimitShare() {
      return total == 0 ? Double.NaN : (double) (total - atOrBelow) / total;
    }
  }

  /** Whether this latency budget was judged on exact counts rather than the quantile. */
  public boolean exact() {
    return counts != null;
  }

  /**
   * The observed quantile over the limit, for display: above 1 exactly when {@link #breached}, as
   * the proxy's {@code llm_budget_ratio}. Where the histogram's 1 % resolution puts the quantile on
   * the other side of the limit than the exact count does, 1 (held) or the next double above 1
   * (breached). NaN when nothing was observed.
   */
  public double ratio() {
    double ratio = observedMs / limitMs;
    if (Double.isNaN(ratio) || counts == null) {
      return ratio;
    }
    if (breached && ratio <= 1) {
      return Math.nextUp(1.0);
    }
    return !breached && ratio > 1 ? 1.0 : ratio;
  }
}
