package io.phasemeter.load.report;

import java.util.Locale;

/**
 * The HTML side of the reports' one toolkit (with {@link Svg}): escaping, number formats and the
 * style of charts, for the run report and the campaign report alike.
 */
public final class Html {
  /** The style {@link Svg} charts rely on; each page adds its own around it. */
  public static final String CHART_CSS =
      """
      svg.chart{display:block;max-width:100%;height:auto}
      svg text{font-family:inherit}
      .tick{font-size:11px;fill:#4a5563}.axis{font-size:12px;fill:#1d2430}
      svg .note{font-size:11px;fill:#8e1c14}
      .legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:4px 4px 2px;font-size:12px}
      .sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;
        vertical-align:-2px}
      """;

  private Html() {}

  /** Escapes text for element content and quoted attributes (HTML and XML alike). */
  public static String esc(Object o) {
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

  /**
   * A chart's legend: a colour swatch and a name per series, {@code colors} in the order of {@code
   * names}; {@code names} are escaped.
   */
  public static String legend(java.util.List<String> names, java.util.List<String> colors) {
    StringBuilder b = new StringBuilder("<div class=\"legend\">");
    for (int i = 0; i < names.size(); i++) {
      b.append("<span><span class=\"sw\" style=\"background:")
          .append(colors.get(i))
          .append("\"></span>")
          .append(esc(names.get(i)))
          .append("</span>");
    }
    return b.append("</div>").toString();
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

  /** A number with at most three decimals and no trailing zeros. */
  public static String trim(double v) {
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
