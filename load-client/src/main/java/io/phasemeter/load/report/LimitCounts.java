package io.phasemeter.load.report;

import java.util.Arrays;

/**
 * One phase's exact counts beside its histogram: how many values were recorded and how many of them
 * were at or below each budget limit on the phase (docs/design.md §6). A value is compared in whole
 * nanoseconds, as recorded ({@code Math.round(ms × 1e6)}), with the limit's nanoseconds ({@code
 * core.budget.LatencyLimit.nanos}): at or below when {@code nanos ≤ limit}, so a negative envelope
 * is always at or below. Memory: two longs per limit, bounded by the budgets file.
 *
 * <p>Not thread-safe; {@link PhaseStats} guards it.
 */
final class LimitCounts {
  /** The limits in nanoseconds, ascending, distinct; shared, never written. */
  private final long[] limits;

  private final long[] atOrBelow;
  private long total;

  LimitCounts(long[] limits) {
    this.limits = limits;
    this.atOrBelow = new long[limits.length];
  }

  /** Counts one value in nanoseconds: a few long increments. */
  void record(long nanos) {
    total++;
    for (int i = limits.length - 1; i >= 0 && nanos <= limits[i]; i--) {
      atOrBelow[i]++;
    }
  }

  /** Whether {@code other} counts the same limits (so that {@link #add} is exact). */
  boolean sameLimits(LimitCounts other) {
    return Arrays.equals(limits, other.limits);
  }

  void add(LimitCounts other) {
    total += other.total;
    for (int i = 0; i < atOrBelow.length; i++) {
      atOrBelow[i] += other.atOrBelow[i];
    }
  }

  LimitCounts copy() {
    LimitCounts c = new LimitCounts(limits);
    c.total = total;
    System.arraycopy(atOrBelow, 0, c.atOrBelow, 0, atOrBelow.length);
    return c;
  }

  /** {@code {atOrBelow, total}} for {@code limitNanos}, or null when it is not counted. */
  long[] counts(long limitNanos) {
    int i = Arrays.binarySearch(limits, limitNanos);
    return i < 0 ? null : new long[] {atOrBelow[i], total};
  }
}
