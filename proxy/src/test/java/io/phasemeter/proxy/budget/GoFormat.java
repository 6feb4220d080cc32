package io.phasemeter.proxy.budget;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * What Prometheus's template functions print, so a test can predict an alert's annotations: Go's
 * {@code %.4g}, {@code humanizeDuration} and {@code humanizePercentage}.
 */
final class GoFormat {
  private GoFormat() {}

  /** Go's {@code fmt.Sprintf("%.4g", v)} for finite v. */
  static String g4(double v) {
    if (v == 0) {
      return "0";
    }
    BigDecimal r = new BigDecimal(v).round(new MathContext(4, RoundingMode.HALF_EVEN));
    int exp = r.precision() - r.scale() - 1;
    if (exp < -4 || exp >= 4) {
      BigDecimal mantissa = r.movePointLeft(exp).stripTrailingZeros();
      String e = (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
      return mantissa.toPlainString() + "e" + e;
    }
    return r.stripTrailingZeros().toPlainString();
  }

  /** Prometheus's {@code humanizeDuration} for positive seconds. */
  static String humanizeDuration(double v) {
    if (v >= 1) {
      long d = (long) v;
      long seconds = d % 60;
      long minutes = (d / 60) % 60;
      long hours = (d / 3600) % 24;
      long days = d / 86400;
      if (days != 0) {
        return days + "d " + hours + "h " + minutes + "m " + seconds + "s";
      }
      if (hours != 0) {
        return hours + "h " + minutes + "m " + seconds + "s";
      }
      if (minutes != 0) {
        return minutes + "m " + seconds + "s";
      }
      return g4(v) + "s";
    }
    String prefix = "";
    for (String p : new String[] {"m", "u", "n", "p", "f", "a", "z", "y"}) {
      if (Math.abs(v) >= 1) {
        break;
      }
      prefix = p;
      v *= 1000;
    }
    return g4(v) + prefix + "s";
  }

  /** Prometheus's {@code humanizePercentage}. */
  static String humanizePercentage(double v) {
    return g4(v * 100) + "%";
  }
}
