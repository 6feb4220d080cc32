package io.phasemeter.load.report;

import java.util.Locale;

/**
 * report.html's "Lengths" section: the token lengths asked for and received over the successful
 * requests (summary.json {@code lengths}), a row each, an en dash where there is none.
 */
final class LengthsHtml {
  private LengthsHtml() {}

  static String section(ReportModel m) {
    Lengths l = m.lengths;
    StringBuilder b = new StringBuilder();
    b.append("<section id=\"lengths\"><h2>Lengths</h2><p class=\"muted\">")
        .append("Tokens over the successful requests: <em>asked</em> is what each request said")
        .append(" (the prompt only when it was token ids, so exact; max_tokens), <em>received</em>")
        .append(" what the server's usage reported. Percentiles are nearest-rank, exact.</p>")
        .append("<table><tr><th class=\"l\">length</th><th>count</th><th>mean</th>")
        .append("<th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>");
    row(b, "prompt, asked", l.promptAsked());
    row(b, "prompt, received", l.promptReceived());
    row(b, "completion, asked", l.completionAsked());
    row(b, "completion, received", l.completionReceived());
    return b.append("</table></section>").toString();
  }

  private static void row(StringBuilder b, String name, LengthStats s) {
    b.append("<tr><td class=\"l\">").append(Html.esc(name)).append("</td>");
    if (s == null) {
      b.append("<td>0</td>").append("<td>\u2013</td>".repeat(5));
    } else {
      cell(b, Long.toString(s.count()));
      cell(b, String.format(Locale.ROOT, "%.1f", s.mean()));
      cell(b, Long.toString(s.p50()));
      cell(b, Long.toString(s.p90()));
      cell(b, Long.toString(s.p99()));
      cell(b, Long.toString(s.max()));
    }
    b.append("</tr>");
  }

  private static void cell(StringBuilder b, String text) {
    b.append("<td>").append(Html.esc(text)).append("</td>");
  }
}
