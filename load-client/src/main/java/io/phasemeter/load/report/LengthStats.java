package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Exact statistics of token lengths: count, mean and nearest-rank quantiles (the value at rank
 * {@code ceil(q × count)} of the sorted lengths), from every value, not a histogram: the count is
 * bounded by the run's requests, or by a dataset's entries.
 *
 * @param count how many lengths
 * @param mean their mean
 * @param p50 the median
 * @param p90 the 90th percentile
 * @param p99 the 99th percentile
 * @param max the largest
 */
public record LengthStats(long count, double mean, long p50, long p90, long p99, long max) {

  /** The statistics of {@code values}, or null when there are none. Sorts a copy. */
  public static LengthStats of(long[] values) {
    if (values.length == 0) {
      return null;
    }
    long[] sorted = values.clone();
    Arrays.sort(sorted);
    double sum = 0;
    for (long v : sorted) {
      sum += v;
    }
    return new LengthStats(
        sorted.length,
        sum / sorted.length,
        rank(sorted, 0.50),
        rank(sorted, 0.90),
        rank(sorted, 0.99),
        sorted[sorted.length - 1]);
  }

  /** Like {@link #of(long[])}. */
  public static LengthStats of(int[] values) {
    return of(Arrays.stream(values).asLongStream().toArray());
  }

  private static long rank(long[] sorted, double q) {
    int rank = (int) Math.ceil(q * sorted.length - 1e-9);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  /** {@code count, mean, p50, p90, p99, max}, in that order, for the conditions. */
  public Map<String, Object> asMap() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("count", count);
    m.put("mean", mean);
    m.put("p50", p50);
    m.put("p90", p90);
    m.put("p99", p99);
    m.put("max", max);
    return m;
  }

  /** The same fields into {@code o}. */
  void write(ObjectNode o) {
    o.put("count", count);
    o.put("mean", mean);
    o.put("p50", p50);
    o.put("p90", p90);
    o.put("p99", p99);
    o.put("max", max);
  }
}
