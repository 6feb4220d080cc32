package io.phasemeter.core.budget;

/**
 * The one definition of a latency budget's verdict, which the proxy's live verdict, the generated
 * alert rules and the load client all apply: a limit on the {@code quantile} of a phase holds when
 * at most {@code 1 − quantile} of the phase's values are above it (docs/design.md §6).
 */
public final class LatencyLimit {
  private LatencyLimit() {}

  /**
   * A limit in milliseconds in whole nanoseconds, the unit the timers record in: the same rounding
   * ({@code Math.round(ms × 1e6)}) for the proxy's histogram boundaries, its live verdict, the
   * alert rules and the load client's exact counts, so a limit and the values it judges compare
   * exactly.
   */
  public static long nanos(double limitMs) {
    return Math.round(limitMs * 1e6);
  }

  /**
   * Whether a limit at {@code quantile} is breached, from counts: when the share of values above
   * the limit, {@code 1 − atOrBelow / total}, is more than {@code 1 − quantile}. This is the
   * arithmetic of the generated rule ({@code 1 − rate(bucket{le=limit}) / rate(count) > (1 −
   * quantile)}; there {@code rate()} scales both counts first, so an exact tie may tip either way)
   * and of the live verdict. It equals "the quantile is above the limit", the quantile taken as the
   * smallest value with at least {@code quantile × total} values at or below it: both sides are
   * computed as {@code 1 − x} (exact for x in [0.5, 2]), so a share of exactly {@code 1 − quantile}
   * holds, where {@code 1 − 95/100 > 0.05} would not. No data: no breach.
   */
  public static boolean breached(double quantile, long atOrBelow, long total) {
    return total > 0 && 1 - (double) atOrBelow / total > 1 - quantile;
  }
}
