package io.phasemeter.proxy.telemetry;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * Rolling-window latency quantiles per (model, pool, tenant, phase), the way HdrHistogram's authors
 * use it: one {@link Recorder} per series takes values wait-free on the hot path; {@link
 * #rotate()}, called once per slice, swaps each recorder's interval histogram into a ring of the
 * last {@code slices} intervals, recycling the oldest. A window query merges the newest intervals.
 * Values are microseconds at two significant digits (1 % resolution) in histograms that grow with
 * the range of values seen, so an idle series costs little; the number of series is bounded.
 */
public final class RollingQuantiles {
  private static final int DIGITS = 2;
  private static final long[] NO_LIMITS = new long[0];

  private final Duration slice;
  private final int slices;
  private final int maxSeries;
  private final Map<String, long[]> limits;
  private final Map<Key, Series> series = new ConcurrentHashMap<>();

  /**
   * One series' identity. {@code tenant} is {@link #ANY_TENANT} for a series kept for every tenant
   * together (LiveStats keeps a series per tenant only where a tenant's budget reads it).
   */
  public record Key(String model, String pool, String tenant, String phase) {
    /** The tenant of a series that holds every tenant's values. */
    public static final String ANY_TENANT = "*";

    /** The series of every tenant together. */
    public Key(String model, String pool, String phase) {
      this(model, pool, ANY_TENANT, phase);
    }
  }

  /** Quantiles of one merged window, in milliseconds. */
  public record Summary(long count, double p50, double p95, double p99, double max) {
    /** The value at quantile {@code q} of the same window is computed by {@link #quantile}. */
    static Summary of(Histogram h) {
      if (h.getTotalCount() == 0) {
        return new Summary(0, 0, 0, 0, 0);
      }
      return new Summary(
          h.getTotalCount(),
          h.getValueAtPercentile(50) / 1000.0,
          h.getValueAtPercentile(95) / 1000.0,
          h.getValueAtPercentile(99) / 1000.0,
          h.getMaxValue() / 1000.0);
    }
  }

  /**
   * @param slice how often {@link #rotate()} is called
   * @param slices how many past slices are kept (the longest window is {@code slice × slices})
   * @param maxSeries bound on distinct keys; values for further keys are not kept
   */
  public RollingQuantiles(Duration slice, int slices, int maxSeries) {
    this(slice, slices, maxSeries, Map.of());
  }

  /**
   * @param limits per series name ({@link Key#phase()}), limits in nanoseconds whose exceedances
   *     are counted exactly, beside the histogram, for {@link #countAbove}
   */
  public RollingQuantiles(Duration slice, int slices, int maxSeries, Map<String, long[]> limits) {
    this.slice = slice;
    this.slices = slices;
    this.maxSeries = maxSeries;
    Map<String, long[]> copy = new java.util.HashMap<>();
    limits.forEach((k, v) -> copy.put(k, java.util.Arrays.stream(v).sorted().distinct().toArray()));
    this.limits = Map.copyOf(copy);
  }

  /** Records one value in the series of every tenant; wait-free once the series exists. */
  public void record(String model, String pool, String phase, long nanos) {
    record(new Key(model, pool, phase), nanos);
  }

  /** Records one value; wait-free once the series exists. */
  public void record(Key key, long nanos) {
    Series s = series(key);
    if (s != null) {
      s.record(nanos);
    }
  }

  /**
   * The series of {@code key}, to record into many times without looking it up again; null when the
   * bound on series is reached (values for it are not kept).
   */
  public Series series(Key key) {
    Series s = series.get(key);
    if (s == null) {
      if (series.size() >= maxSeries) {
        return null;
      }
      s = series.computeIfAbsent(key, k -> new Series(limits.getOrDefault(k.phase(), NO_LIMITS)));
    }
    return s;
  }

  /** Closes the current slice of every series. Call once per {@link #slice()}. */
  public void rotate() {
    for (Series s : series.values()) {
      s.rotate(slices);
    }
  }

  /** The slice length. */
  public Duration slice() {
    return slice;
  }

  /** The longest window kept. */
  public Duration longestWindow() {
    return slice.multipliedBy(slices);
  }

  /** Merges the last {@code window} (rounded up to whole slices) of every series that matches. */
  public Histogram merged(Predicate<Key> filter, Duration window) {
    int n = (int) Math.min(slices, Math.max(1, ceilDiv(window.toNanos(), slice.toNanos())));
    Histogram out = new Histogram(DIGITS);
    for (Map.Entry<Key, Series> e : series.entrySet()) {
      if (filter.test(e.getKey())) {
        e.getValue().addLast(n, out);
      }
    }
    return out;
  }

  /**
   * How many values of the matching series over the last {@code window} (rounded up to whole
   * slices) there were, and how many of them were above {@code limitNanos}, counted exactly (to the
   * nanosecond, not at the histogram's 1 % resolution): {@code {total, above}}. The limit must be
   * one the series were built to count.
   *
   * @throws IllegalArgumentException when a matching series does not count {@code limitNanos}
   */
  public long[] countAbove(Predicate<Key> filter, Duration window, long limitNanos) {
    int n = (int) Math.min(slices, Math.max(1, ceilDiv(window.toNanos(), slice.toNanos())));
    long[] out = new long[2];
    for (Map.Entry<Key, Series> e : series.entrySet()) {
      if (filter.test(e.getKey())) {
        e.getValue().addCounts(n, limitNanos, out);
      }
    }
    return out;
  }

  /**
   * A summary per (model, pool, phase) over {@code window}, for series that saw values, every
   * tenant's together; the keys are of {@link Key#ANY_TENANT}.
   */
  public Map<Key, Summary> summaries(Duration window) {
    Map<Key, Summary> out =
        new java.util.TreeMap<>(
            java.util.Comparator.comparing(Key::model)
                .thenComparing(Key::pool)
                .thenComparing(Key::phase));
    java.util.Set<Key> all = new java.util.HashSet<>();
    for (Key k : List.copyOf(series.keySet())) {
      all.add(new Key(k.model(), k.pool(), k.phase()));
    }
    for (Key k : all) {
      Histogram h =
          merged(
              x ->
                  x.model().equals(k.model())
                      && x.pool().equals(k.pool())
                      && x.phase().equals(k.phase()),
              window);
      if (h.getTotalCount() > 0) {
        out.put(k, Summary.of(h));
      }
    }
    return out;
  }

  /** The value at quantile {@code q} (0–1) of {@code h}, in milliseconds; NaN when empty. */
  public static double quantileMs(Histogram h, double q) {
    return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(q * 100) / 1000.0;
  }

  private static long ceilDiv(long a, long b) {
    return (a + b - 1) / b;
  }

  /**
   * One series: the recorder takes values; {@code open} accumulates the current slice (a query
   * drains the recorder into it, so fresh values show at once); {@code ring} holds closed slices.
   * The recorder is not packed: a packed histogram's increment is several times dearer, and only
   * the recorder is on the hot path. Its price is memory: ~80 KB per series once it has seen values
   * up to a minute (two concurrent histograms of two count arrays each), so ~1.4 MB per (model,
   * pool) for its ~17 series; the series bound caps the total.
   */
  public static final class Series {
    final Recorder recorder = new Recorder(DIGITS);
    final ArrayDeque<Histogram> ring = new ArrayDeque<>();
    Histogram open = new Histogram(DIGITS);
    Histogram spare;
    // Budget limits (ascending nanoseconds): counts[0] takes every value, counts[i + 1] those
    // above limits[i]. Slices of the same, as for the histograms; nothing when there are none.
    private final long[] limits;
    private final LongAdder[] counts;
    private final ArrayDeque<long[]> countRing = new ArrayDeque<>();
    private long[] openCounts;

    private Series(long[] limits) {
      this.limits = limits;
      this.counts = new LongAdder[limits.length == 0 ? 0 : limits.length + 1];
      for (int i = 0; i < counts.length; i++) {
        counts[i] = new LongAdder();
      }
      this.openCounts = new long[counts.length];
    }

    /** Records one value, in nanoseconds (kept as microseconds); wait-free. */
    public void record(long nanos) {
      recorder.recordValue(Math.max(0, nanos / 1000));
      if (counts.length > 0) {
        counts[0].increment();
        for (int i = 0; i < limits.length && nanos > limits[i]; i++) {
          counts[i + 1].increment();
        }
      }
    }

    synchronized void rotate(int keep) {
      drain();
      ring.addLast(open);
      Histogram oldest = ring.size() > keep - 1 ? ring.pollFirst() : null;
      if (oldest != null) {
        oldest.reset();
        open = oldest;
      } else {
        open = new Histogram(DIGITS);
      }
      countRing.addLast(openCounts);
      long[] oldestCounts = countRing.size() > keep - 1 ? countRing.pollFirst() : null;
      if (oldestCounts != null) {
        java.util.Arrays.fill(oldestCounts, 0);
        openCounts = oldestCounts;
      } else {
        openCounts = new long[counts.length];
      }
    }

    /** Adds the open slice's and the newest {@code n - 1} closed ones' counts to {@code into}. */
    synchronized void addCounts(int n, long limitNanos, long[] into) {
      int i = java.util.Arrays.binarySearch(limits, limitNanos);
      if (i < 0) {
        throw new IllegalArgumentException("this series does not count values above " + limitNanos);
      }
      drain();
      into[0] += openCounts[0];
      into[1] += openCounts[i + 1];
      Iterator<long[]> it = countRing.descendingIterator();
      for (int k = 1; k < n && it.hasNext(); k++) {
        long[] c = it.next();
        into[0] += c[0];
        into[1] += c[i + 1];
      }
    }

    /** Adds the open slice and the newest {@code n - 1} closed ones to {@code into}. */
    synchronized void addLast(int n, Histogram into) {
      drain();
      into.add(open);
      Iterator<Histogram> it = ring.descendingIterator();
      for (int i = 1; i < n && it.hasNext(); i++) {
        into.add(it.next());
      }
    }

    private void drain() {
      spare = recorder.getIntervalHistogram(spare);
      open.add(spare);
      // Highest limit first, the total last: record() adds to the total first, so a value that
      // lands while this runs may be in the total without its limit counts (next slice's), never
      // in a limit count without the total, and no slice has more values above a limit than in all.
      for (int i = counts.length - 1; i >= 0; i--) {
        openCounts[i] += counts[i].sumThenReset();
      }
    }
  }
}
