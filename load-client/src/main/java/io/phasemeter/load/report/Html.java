package io.phasemeter.load.report;

import java.util.Locale;

/** Escaping and number formats shared by the page and its charts. */
final class Html {
  private Html() {}

  /** Escapes text for element content and quoted attributes (HTML and XML alike). */
  static String esc(Object o) {
    String s = String.valueOf(o);
    StringBuilder b = new StringBuilder(s.length() + 16);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '&' -> b.append("&amp;");
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '"' -> b.append("&quot;");
        case '\'' -> b.append("&#39;");
        default -> {
          // Control characters are not allowed in XML 1.0; a free-form condition may hold one.
          if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
            b.append('?');
          } else {
            b.append(c);
          }
        }
      }
    }
    return b.toString();
  }

  /** Milliseconds for a table: three significant figures or so; an en dash when unknown. */
  static String ms(double v) {
    if (!Double.isFinite(v)) {
      return "\u2013";
    }
    double a = Math.abs(v);
    String f = a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3f";
    return String.format(Locale.ROOT, f, v);
  }

  /** Milliseconds with the unit, or an en dash when unknown. */
  static String msUnit(double v) {
    return Double.isFinite(v) ? ms(v) + " ms" : "\u2013";
  }

  /** A time tick label from milliseconds: "0.1 ms", "20 ms", "1.5 s". */
  static String msTick(double v) {
    double a = Math.abs(v);
    if (a == 0) {
      return "0";
    }
    if (a >= 1000) {
      return trim(v / 1000) + " s";
    }
    return trim(v) + " ms";
  }

  static String trim(double v) {
    String s = String.format(Locale.ROOT, "%.3f", v);
    s = s.replaceAll("0+$", "");
    return s.endsWith(".") ? s.substring(0, s.length() - 1) : s;
  }

  static String rate(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%.2f", v) : "\u2013";
  }

  static String pct(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%.1f %%", 100 * v) : "\u2013";
  }
}
