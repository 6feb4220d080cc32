package io.phasemeter.proxy.telemetry;

import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;

/**
 * The bucket boundaries of the phase histograms: the GenAI semantic-convention boundaries of {@link
 * Buckets}, plus the extra boundaries that budgets add so that every budget limit is a bucket
 * boundary (docs/design.md §4, §6). Boundaries are kept in whole nanoseconds, the unit the timers
 * record in, so a limit and the values it judges are compared exactly.
 *
 * <p>A layout is fixed when the proxy starts: a series never changes its {@code le} set while it is
 * scraped. Extra boundaries are per histogram, and for {@code llm_phase_duration_seconds} per
 * {@code llm_phase}; at most {@link #MAX_EXTRA} each.
 */
public final class BucketLayout {
  /** The most extra boundaries one histogram (one llm_phase) may carry. */
  public static final int MAX_EXTRA = 8;

  /** The histograms whose boundaries a layout decides (docs/design.md §4). */
  public enum Metric {
    PHASE("llm_phase_duration_seconds", Buckets.PHASE),
    TTFT("gen_ai_server_time_to_first_token_seconds", Buckets.TTFT),
    REQUEST("gen_ai_server_request_duration_seconds", Buckets.REQUEST),
    TPOT("gen_ai_server_time_per_output_token_seconds", Buckets.TPOT),
    ITL("llm_inter_token_latency_seconds", Buckets.ITL);

    private final String promName;
    private final long[] semconvNanos;

    Metric(String promName, double[] seconds) {
      this.promName = promName;
      this.semconvNanos = Arrays.stream(seconds).mapToLong(s -> Math.round(s * 1e9)).toArray();
    }

    /** The Prometheus base name (append {@code _bucket}, {@code _sum}, {@code _count}). */
    public String promName() {
      return promName;
    }

    /** Whether {@code nanos} is already one of the semantic-convention boundaries. */
    public boolean semconvBoundary(long nanos) {
      return Arrays.binarySearch(semconvNanos, nanos) >= 0;
    }
  }

  private static final BucketLayout SEMCONV = new BucketLayout(Map.of());

  /** (metric, phase or "") to its extra boundaries, ascending. */
  private final Map<Key, long[]> extra;

  private record Key(Metric metric, String phase) {}

  private BucketLayout(Map<Key, long[]> extra) {
    this.extra = extra;
  }

  /** The semantic-convention boundaries alone. */
  public static BucketLayout semconv() {
    return SEMCONV;
  }

  /** Starts a layout. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The {@code le} label of the boundary at {@code nanos}, exactly as {@code /metrics} prints it
   * (Micrometer converts to seconds by dividing by 1e9; the Prometheus client prints the double
   * with {@link Double#toString}): 250 ms is {@code "0.25"}, 1.2 s {@code "1.2"}, 6 s {@code
   * "6.0"}.
   */
  public static String le(long nanos) {
    return Double.toString(nanos / 1e9);
  }

  /**
   * The same boundary as Prometheus stores it when it normalises {@code le} on ingestion (3.x, and
   * 2.x scraping protobuf): Go's shortest {@code 'g'} format, with {@code .0} added when it has
   * neither a point nor an exponent. It equals {@link #le} from 1 ms up; below, Java writes {@code
   * 3.0E-4} where Prometheus keeps {@code 0.0003}, and {@code 5.0E-5} where it keeps {@code 5e-05}.
   */
  public static String leNormalized(long nanos) {
    java.math.BigDecimal v = new java.math.BigDecimal(le(nanos)).stripTrailingZeros();
    String digits = v.unscaledValue().abs().toString();
    int exp = digits.length() - v.scale() - 1;
    String s;
    if (v.signum() != 0 && (exp < -4 || exp >= 6)) {
      String mantissa =
          digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
      int e = Math.abs(exp);
      s = mantissa + "e" + (exp < 0 ? "-" : "+") + (e < 10 ? "0" : "") + e;
    } else {
      s = v.toPlainString();
    }
    return s.indexOf('.') < 0 && s.indexOf('e') < 0 ? s + ".0" : s;
  }

  /**
   * The PromQL matcher for the boundary at {@code nanos}: {@code le="0.25"} where every Prometheus
   * stores one text, otherwise a match of either text ({@code le=~`3\.0E-4|0\.0003`}), so that a
   * rule finds the bucket whether the server normalises {@code le} or not.
   */
  public static String leMatcher(long nanos) {
    String printed = le(nanos);
    String stored = leNormalized(nanos);
    if (printed.equals(stored)) {
      return "le=\"" + printed + "\"";
    }
    return "le=~`" + regexQuote(printed) + "|" + regexQuote(stored) + "`";
  }

  private static String regexQuote(String s) {
    return s.replace(".", "\\.").replace("+", "\\+");
  }

  /**
   * The boundaries of {@code metric} (for {@link Metric#PHASE}, of the series of {@code phase}),
   * ascending, as durations.
   */
  public Duration[] boundaries(Metric metric, String phase) {
    long[] more = extra.getOrDefault(key(metric, phase), new long[0]);
    long[] all =
        java.util.stream.LongStream.concat(Arrays.stream(metric.semconvNanos), Arrays.stream(more))
            .sorted()
            .distinct()
            .toArray();
    return Arrays.stream(all).mapToObj(Duration::ofNanos).toArray(Duration[]::new);
  }

  /** The extra boundaries of {@code metric} ({@code phase} for {@link Metric#PHASE}), ascending. */
  public long[] extra(Metric metric, String phase) {
    return extra.getOrDefault(key(metric, phase), new long[0]).clone();
  }

  /** Whether every boundary of {@code other} is one of this layout's. */
  public boolean covers(BucketLayout other) {
    for (Map.Entry<Key, long[]> e : other.extra.entrySet()) {
      long[] mine = extra.getOrDefault(e.getKey(), new long[0]);
      for (long n : e.getValue()) {
        if (Arrays.binarySearch(mine, n) < 0) {
          return false;
        }
      }
    }
    return true;
  }

  private static Key key(Metric metric, String phase) {
    return new Key(metric, metric == Metric.PHASE ? Objects.requireNonNull(phase, "phase") : "");
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof BucketLayout l && covers(l) && l.covers(this);
  }

  @Override
  public int hashCode() {
    return extra.keySet().hashCode();
  }

  /** Collects extra boundaries, refusing more than {@link #MAX_EXTRA} per histogram. */
  public static final class Builder {
    private final Map<Key, TreeSet<Long>> extra = new LinkedHashMap<>();

    private Builder() {}

    /**
     * Adds the boundary at {@code nanos} to {@code metric} ({@code phase} for {@link Metric#PHASE},
     * ignored otherwise). A semantic-convention boundary or one already added adds nothing.
     *
     * @throws IllegalArgumentException when the histogram already has {@link #MAX_EXTRA} extra
     *     boundaries, or {@code nanos} is not positive
     */
    public Builder add(Metric metric, String phase, long nanos) {
      if (nanos <= 0) {
        throw new IllegalArgumentException("a bucket boundary must be at least 1 ns");
      }
      if (metric.semconvBoundary(nanos)) {
        return this;
      }
      TreeSet<Long> set = extra.computeIfAbsent(key(metric, phase), k -> new TreeSet<>());
      if (!set.contains(nanos) && set.size() >= MAX_EXTRA) {
        throw new IllegalArgumentException(
            "le=\""
                + le(nanos)
                + "\" would be extra bucket boundary "
                + (MAX_EXTRA + 1)
                + " of "
                + metric.promName()
                + (metric == Metric.PHASE ? "{llm_phase=\"" + phase + "\"}" : "")
                + " (at most "
                + MAX_EXTRA
                + " per histogram besides the GenAI ones: each is a series per model and pool);"
                + " give budgets the same limit, or drop one");
      }
      set.add(nanos);
      return this;
    }

    public BucketLayout build() {
      Map<Key, long[]> out = new LinkedHashMap<>();
      extra.forEach((k, v) -> out.put(k, v.stream().mapToLong(Long::longValue).toArray()));
      return new BucketLayout(Collections.unmodifiableMap(out));
    }
  }
}
