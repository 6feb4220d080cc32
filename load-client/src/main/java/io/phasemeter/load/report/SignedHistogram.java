package io.phasemeter.load.report;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

/**
 * A distribution of millisecond values of either sign, for quantiles of per-request values.
 *
 * <p>Why two HdrHistograms: an envelope (client duration minus server duration) is negative when a
 * boundary, unit or join is wrong, and docs/design.md §2 says such a value is kept and shown, never
 * clipped. HdrHistogram records only non-negative values; a {@code DoubleHistogram} with an offset
 * would need the most negative value in advance. So magnitudes are recorded per sign, in
 * nanoseconds, and a quantile walks the negative side from its largest magnitude up, then the
 * positive side. Both sides are auto-resizing with two significant digits: construction allocates
 * almost nothing, memory grows with the dynamic range seen (tens of kilobytes for nanoseconds up to
 * an hour), never with the number of requests, and a reported value is within 1 % (1 part in 128)
 * of the recorded one. Exact minimum and maximum are kept beside and bound every quantile.
 *
 * <p>Not thread-safe; {@link PhaseStats} guards it.
 */
final class SignedHistogram {
  static final int SIGNIFICANT_DIGITS = 2;

  private Histogram positive;
  private Histogram negative;
  private double minMs = Double.NaN;
  private double maxMs = Double.NaN;

  SignedHistogram() {}

  /**
   * One interval of a {@link SignedRecorder}: its two sides (nanoseconds, as {@link #recordMs}
   * records them) and its exact extremes, NaN when it is empty.
   */
  SignedHistogram(Histogram positive, Histogram negative, double minMs, double maxMs) {
    this.positive = positive;
    this.negative = negative;
    this.minMs = minMs;
    this.maxMs = maxMs;
  }

  /** The nanoseconds {@link #recordMs} records for {@code ms}: magnitude and sign. */
  static long nanos(double ms) {
    return Math.round(ms * 1e6);
  }

  /** Records one value in milliseconds; NaN and infinities are ignored. */
  void recordMs(double ms) {
    if (!Double.isFinite(ms)) {
      return;
    }
    long nanos = nanos(ms);
    if (nanos < 0) {
      if (negative == null) {
        negative = new Histogram(SIGNIFICANT_DIGITS);
      }
      negative.recordValue(-nanos);
    } else {
      if (positive == null) {
        positive = new Histogram(SIGNIFICANT_DIGITS);
      }
      positive.recordValue(nanos);
    }
    minMs = Double.isNaN(minMs) ? ms : Math.min(minMs, ms);
    maxMs = Double.isNaN(maxMs) ? ms : Math.max(maxMs, ms);
  }

  void add(SignedHistogram other) {
    if (other.positive != null) {
      if (positive == null) {
        positive = new Histogram(SIGNIFICANT_DIGITS);
      }
      positive.add(other.positive);
    }
    if (other.negative != null) {
      if (negative == null) {
        negative = new Histogram(SIGNIFICANT_DIGITS);
      }
      negative.add(other.negative);
    }
    if (!Double.isNaN(other.minMs)) {
      minMs = Double.isNaN(minMs) ? other.minMs : Math.min(minMs, other.minMs);
      maxMs = Double.isNaN(maxMs) ? other.maxMs : Math.max(maxMs, other.maxMs);
    }
  }

  /**
   * Adds one side read back from an interval log (microseconds, as {@link #microsHistogram} wrote
   * it): {@code negatives} true for the magnitudes of values below zero. The exact minimum and
   * maximum are not in a log; the log's own extremes (to its resolution) stand in for them.
   */
  void addMicros(Histogram micros, boolean negatives) {
    if (micros.getTotalCount() == 0) {
      return;
    }
    for (HistogramIterationValue v : micros.recordedValues()) {
      long magnitude = micros.medianEquivalentValue(v.getValueIteratedTo()) * 1000;
      long count = v.getCountAddedInThisIterationStep();
      if (negatives) {
        if (negative == null) {
          negative = new Histogram(SIGNIFICANT_DIGITS);
        }
        negative.recordValueWithCount(magnitude, count);
      } else {
        if (positive == null) {
          positive = new Histogram(SIGNIFICANT_DIGITS);
        }
        positive.recordValueWithCount(magnitude, count);
      }
    }
    double lo = (negatives ? -micros.getMaxValue() : micros.getMinValue()) / 1e3;
    double hi = (negatives ? -micros.getMinValue() : micros.getMaxValue()) / 1e3;
    minMs = Double.isNaN(minMs) ? lo : Math.min(minMs, lo);
    maxMs = Double.isNaN(maxMs) ? hi : Math.max(maxMs, hi);
  }

  SignedHistogram copy() {
    SignedHistogram c = new SignedHistogram();
    c.add(this);
    return c;
  }

  long count() {
    return negativeCount() + (positive == null ? 0 : positive.getTotalCount());
  }

  long negativeCount() {
    return negative == null ? 0 : negative.getTotalCount();
  }

  double minMs() {
    return minMs;
  }

  double maxMs() {
    return maxMs;
  }

  /**
   * The smallest recorded value v such that at least {@code ceil(q * count)} values are ≤ v (the
   * convention of {@code Histogram.getValueAtPercentile}), in milliseconds; NaN when empty.
   */
  double quantileMs(double q) {
    long n = count();
    if (n == 0) {
      return Double.NaN;
    }
    if (q <= 0) {
      return minMs;
    }
    if (q >= 1) {
      return maxMs;
    }
    long rank = Math.max(1, (long) Math.ceil(q * n - 1e-9));
    long negatives = negativeCount();
    double ms;
    if (rank <= negatives) {
      // The rank-th smallest signed value is the (negatives - rank + 1)-th smallest magnitude.
      long magnitude = valueAtRank(negative, negatives - rank + 1);
      ms = -negative.lowestEquivalentValue(magnitude) / 1e6;
    } else {
      long value = valueAtRank(positive, rank - negatives);
      ms = positive.highestEquivalentValue(value) / 1e6;
    }
    return Math.max(minMs, Math.min(maxMs, ms));
  }

  /** The smallest recorded value whose cumulative count reaches {@code rank} (1-based). */
  private static long valueAtRank(Histogram h, long rank) {
    long cumulative = 0;
    long last = 0;
    for (HistogramIterationValue v : h.recordedValues()) {
      cumulative += v.getCountAddedInThisIterationStep();
      last = v.getValueIteratedTo();
      if (cumulative >= rank) {
        return last;
      }
    }
    return last;
  }

  /**
   * A copy of one side in microseconds, for interval logs: {@code negatives} false gives the values
   * ≥ 0, true the magnitudes of the values < 0.
   */
  Histogram microsHistogram(boolean negatives) {
    Histogram out = new Histogram(SIGNIFICANT_DIGITS);
    Histogram side = negatives ? negative : positive;
    if (side != null) {
      for (HistogramIterationValue v : side.recordedValues()) {
        long micros = Math.round(side.medianEquivalentValue(v.getValueIteratedTo()) / 1e3);
        out.recordValueWithCount(micros, v.getCountAddedInThisIterationStep());
      }
    }
    return out;
  }
}
