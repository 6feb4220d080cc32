package io.phasemeter.load.workload;

import java.util.SplittableRandom;
import java.util.function.DoubleSupplier;

/**
 * Inter-arrival gaps of the open model. The caller schedules request {@code i + 1} at the intended
 * time of request {@code i} plus {@link #nextGapNanos()}, from its clock and never from responses,
 * so a slow server cannot slow the offered load down.
 *
 * <p>Gaps are drawn in seconds as doubles and handed out as whole nanoseconds of a running sum, so
 * the rounding of one gap is carried into the next and a long run does not drift. Not thread-safe:
 * one scheduler draws from one instance.
 */
public final class Arrivals {
  private final String kind;
  private final double ratePerSec;
  private final DoubleSupplier gapSeconds;
  private double elapsedNanos;
  private long handedOutNanos;

  /** A trace's arrivals (nanoseconds from its first), or null for a drawn process. */
  private final long[] offsetsNanos;

  /** The next arrival of {@link #offsetsNanos} to hand out a gap to. */
  private int nextOffset;

  /**
   * The gap handed out after a trace's last arrival: far past the end of any step (73 years), so
   * that the step ends there; small enough that it cannot overflow a {@code System.nanoTime()}.
   */
  public static final long AFTER_THE_LAST_NANOS = Long.MAX_VALUE >> 2;

  private Arrivals(String kind, double ratePerSec, DoubleSupplier gapSeconds) {
    this.kind = kind;
    this.ratePerSec = ratePerSec;
    this.gapSeconds = gapSeconds;
    this.offsetsNanos = null;
  }

  private Arrivals(double ratePerSec, long[] offsetsNanos) {
    this.kind = "trace";
    this.ratePerSec = ratePerSec;
    this.gapSeconds = null;
    this.offsetsNanos = offsetsNanos;
  }

  /** Evenly spaced arrivals, one every {@code 1 / ratePerSec} seconds. */
  public static Arrivals constant(double ratePerSec) {
    requireRate(ratePerSec);
    double gap = 1.0 / ratePerSec;
    return new Arrivals("constant", ratePerSec, () -> gap);
  }

  /** A Poisson process: exponential gaps with mean {@code 1 / rate}. */
  public static Arrivals poisson(double rate, long seed) {
    requireRate(rate);
    SplittableRandom rng = new SplittableRandom(seed);
    // 1 - u lies in (0, 1], so the logarithm is finite.
    return new Arrivals("poisson", rate, () -> -Math.log(1.0 - rng.nextDouble()) / rate);
  }

  /**
   * Gamma-distributed gaps as {@code vllm bench serve --burstiness} draws them: shape {@code
   * burstiness}, scale {@code 1 / (rate * burstiness)}. The mean gap stays {@code 1 / rate}; the
   * coefficient of variation is {@code 1 / sqrt(burstiness)}: 1 is Poisson, below 1 burstier, above
   * 1 smoother.
   */
  public static Arrivals gamma(double rate, double burstiness, long seed) {
    requireRate(rate);
    if (!(burstiness > 0) || !Double.isFinite(burstiness)) {
      throw new IllegalArgumentException(
          "--burstiness must be a positive number, got " + burstiness);
    }
    SplittableRandom rng = new SplittableRandom(seed);
    double scale = 1.0 / (rate * burstiness);
    return new Arrivals("gamma", rate, () -> GammaSampler.sample(rng, burstiness) * scale);
  }

  /**
   * Evenly spaced arrivals whose rate rises linearly from 0 to {@code ratePerSec} over {@code
   * seconds}, and stays there: arrival {@code k} is due at {@code sqrt(2 × seconds × k /
   * ratePerSec)}. The warm-up at load uses it so that the JIT compiles while the load is still
   * light, instead of a client that is not yet compiled falling behind the full rate at once.
   */
  public static Arrivals ramp(double ratePerSec, double seconds) {
    requireRate(ratePerSec);
    if (!(seconds > 0) || !Double.isFinite(seconds)) {
      throw new IllegalArgumentException("ramp duration must be positive, got " + seconds);
    }
    double c = 2 * seconds / ratePerSec;
    double flat = 1.0 / ratePerSec;
    long[] k = {0};
    return new Arrivals(
        "ramp",
        ratePerSec,
        () -> {
          double at = Math.sqrt(c * k[0]);
          if (at >= seconds) {
            // The ramp's slope at its end is exactly the full rate's gap: no jump.
            return flat;
          }
          k[0]++;
          return Math.sqrt(c * k[0]) - at;
        });
  }

  /**
   * A replayed trace's arrivals, exactly: the first at the step's start, arrival {@code i} at
   * {@code offsetsNanos[i]} after it (whole nanoseconds, no rounding carried), and after the last
   * one {@link #AFTER_THE_LAST_NANOS}, which ends the step. The array is not copied (a trace may
   * hold millions of rows) and must not change.
   *
   * @param offsetsNanos non-decreasing, the first 0
   * @param ratePerSec the trace's mean rate, which the warm-up at load offers
   */
  public static Arrivals trace(long[] offsetsNanos, double ratePerSec) {
    requireRate(ratePerSec);
    if (offsetsNanos.length == 0 || offsetsNanos[0] != 0) {
      throw new IllegalArgumentException("a trace's first arrival must be at offset 0");
    }
    return new Arrivals(ratePerSec, offsetsNanos);
  }

  /** The next gap in nanoseconds (never negative). */
  public long nextGapNanos() {
    if (offsetsNanos != null) {
      int i = nextOffset;
      if (i + 1 >= offsetsNanos.length) {
        return AFTER_THE_LAST_NANOS;
      }
      nextOffset++;
      return Math.max(0, offsetsNanos[i + 1] - offsetsNanos[i]);
    }
    elapsedNanos += gapSeconds.getAsDouble() * 1e9;
    long total = Math.round(elapsedNanos);
    long gap = Math.max(0, total - handedOutNanos);
    handedOutNanos += gap;
    return gap;
  }

  /** The mean arrival rate, requests per second. */
  public double ratePerSec() {
    return ratePerSec;
  }

  /** {@code constant}, {@code poisson}, {@code gamma}, {@code ramp} or {@code trace}. */
  public String kind() {
    return kind;
  }

  private static void requireRate(double rate) {
    if (!(rate > 0) || !Double.isFinite(rate)) {
      throw new IllegalArgumentException("--rate must be a positive number, got " + rate);
    }
  }

  /**
   * Marsaglia and Tsang, "A simple method for generating gamma variables" (2000), with the {@code
   * U^(1/shape)} boost for shapes below 1. No library on the classpath offers one.
   */
  static final class GammaSampler {
    private GammaSampler() {}

    static double sample(SplittableRandom rng, double shape) {
      if (shape < 1) {
        double u = rng.nextDouble();
        // u may be 0: the gap is then 0, which is a legal (if extreme) burst.
        return sample(rng, shape + 1) * Math.pow(u, 1.0 / shape);
      }
      double d = shape - 1.0 / 3.0;
      double c = 1.0 / Math.sqrt(9.0 * d);
      while (true) {
        double x;
        double v;
        do {
          x = rng.nextGaussian();
          v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = rng.nextDouble();
        if (u < 1 - 0.0331 * x * x * x * x) {
          return d * v;
        }
        if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) {
          return d * v;
        }
      }
    }
  }
}
