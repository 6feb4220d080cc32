package io.phasemeter.load.search;

import java.util.Locale;

/** The search's number formats: milliseconds, shares, loads. */
final class Format {
  private Format() {}

  /** {@code 40 ms}, {@code 1.9 s}, {@code 0.42 ms}; a dash for NaN. */
  static String ms(double ms) {
    if (!Double.isFinite(ms)) {
      return "–";
    }
    if (Math.abs(ms) >= 10_000) {
      return String.format(Locale.ROOT, "%.0f s", ms / 1000);
    }
    if (Math.abs(ms) >= 1000) {
      return String.format(Locale.ROOT, "%.1f s", ms / 1000);
    }
    if (Math.abs(ms) >= 10) {
      return String.format(Locale.ROOT, "%.0f ms", ms);
    }
    return String.format(Locale.ROOT, "%.2g ms", ms);
  }

  /** {@code 31 %}, {@code 4.5 %}, {@code 0.2 %}. */
  static String pct(double share) {
    if (!Double.isFinite(share)) {
      return "–";
    }
    double p = 100 * share;
    if (Math.abs(p) >= 10) {
      return String.format(Locale.ROOT, "%.0f %%", p);
    }
    // Two significant digits, without trailing zeros: 1 - 0.95 is 5 %, not 5.0 %.
    return java.math.BigDecimal.valueOf(p)
            .round(new java.math.MathContext(2))
            .stripTrailingZeros()
            .toPlainString()
        + " %";
  }

  /** A budget's quantile as its percentile: 0.95 is {@code 95}, 0.999 is {@code 99.9}. */
  static String quantile(double q) {
    return java.math.BigDecimal.valueOf(q).movePointRight(2).stripTrailingZeros().toPlainString();
  }

  /** A load without trailing zeros: {@code 24}, {@code 12.5}, {@code 0.125}. */
  static String load(double v) {
    if (!Double.isFinite(v)) {
      return "–";
    }
    if (v == Math.rint(v) && Math.abs(v) < 1e9) {
      return String.valueOf((long) v);
    }
    return java.math.BigDecimal.valueOf(v)
        .round(new java.math.MathContext(4))
        .stripTrailingZeros()
        .toPlainString();
  }

  /** A load with its unit: {@code 24 req/s} or {@code concurrency 8}. */
  static String load(double v, boolean closed) {
    return closed ? "concurrency " + load(v) : load(v) + " req/s";
  }
}
