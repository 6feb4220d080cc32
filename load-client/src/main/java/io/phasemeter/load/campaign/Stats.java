package io.phasemeter.load.campaign;

import java.util.List;
import org.apache.commons.math3.distribution.TDistribution;

/**
 * Spread across repeats: mean, sample standard deviation and the two-sided 95 % Student-t interval
 * of the mean, {@code mean ± t(0.975, n − 1) · s / √n}. With the minimum of three repeats t is
 * 4.30, so the interval is wide on purpose: three runs say little. Differences of two campaigns use
 * Welch's interval (unequal variances, Welch–Satterthwaite degrees of freedom).
 */
public final class Stats {
  /** Two-sided confidence level of every interval. */
  public static final double LEVEL = 0.95;

  private Stats() {}

  /**
   * A mean with its interval; {@code half} is NaN when n &lt; 2 (no spread can be estimated).
   *
   * @param n valid runs
   * @param mean their mean
   * @param sd sample standard deviation (n − 1 in the denominator)
   * @param t the Student-t quantile used
   * @param half half-width of the 95 % interval
   */
  public record Interval(int n, double mean, double sd, double t, double half) {
    public double low() {
      return mean - half;
    }

    public double high() {
      return mean + half;
    }
  }

  /** The mean and 95 % interval of finite values (NaN values are left out). */
  public static Interval of(List<Double> values) {
    double[] v =
        values.stream().filter(Double::isFinite).mapToDouble(Double::doubleValue).toArray();
    int n = v.length;
    if (n == 0) {
      return new Interval(0, Double.NaN, Double.NaN, Double.NaN, Double.NaN);
    }
    double mean = 0;
    for (double x : v) {
      mean += x;
    }
    mean /= n;
    if (n < 2) {
      return new Interval(1, mean, Double.NaN, Double.NaN, Double.NaN);
    }
    double ss = 0;
    for (double x : v) {
      ss += (x - mean) * (x - mean);
    }
    double sd = Math.sqrt(ss / (n - 1));
    double t = tQuantile(n - 1);
    return new Interval(n, mean, sd, t, t * sd / Math.sqrt(n));
  }

  /**
   * Welch's 95 % interval for {@code b.mean − a.mean}: standard error {@code √(s_a²/n_a +
   * s_b²/n_b)}, degrees of freedom by Welch–Satterthwaite. The returned {@code n} is {@code
   * min(n_a, n_b)} and {@code sd} the standard error.
   */
  public static Interval welch(Interval a, Interval b) {
    double diff = b.mean() - a.mean();
    if (a.n() < 2 || b.n() < 2) {
      return new Interval(Math.min(a.n(), b.n()), diff, Double.NaN, Double.NaN, Double.NaN);
    }
    double va = a.sd() * a.sd() / a.n();
    double vb = b.sd() * b.sd() / b.n();
    double se = Math.sqrt(va + vb);
    if (se == 0) {
      return new Interval(Math.min(a.n(), b.n()), diff, 0, Double.NaN, 0);
    }
    double df = (va + vb) * (va + vb) / (va * va / (a.n() - 1) + vb * vb / (b.n() - 1));
    double t = tQuantile(df);
    return new Interval(Math.min(a.n(), b.n()), diff, se, t, t * se);
  }

  /** The two-sided 95 % Student-t quantile, {@code t(0.975, df)}; 4.303 for df = 2. */
  public static double tQuantile(double df) {
    return new TDistribution(null, df).inverseCumulativeProbability(0.5 + LEVEL / 2);
  }
}
