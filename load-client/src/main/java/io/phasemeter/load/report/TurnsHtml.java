package io.phasemeter.load.report;

import io.phasemeter.load.schedule.Sessions;

/**
 * report.html's Turns section: client TTFT and prompt length per turn index of the requests of
 * sessions (where a prefix cache's effect on later turns shows), and what a {@code --sessions}
 * run's sessions did. Nothing when no request belonged to a session.
 */
final class TurnsHtml {
  private TurnsHtml() {}

  static String section(ReportModel m) {
    if (m.turns.isEmpty()) {
      return "";
    }
    StringBuilder b = new StringBuilder();
    b.append("<section id=\"turns\"><h2>Turns</h2>");
    b.append("<p class=\"muted\">The requests of multi-turn sessions by turn index: turn k + 1")
        .append(" sends turn k's prompt and answer back, so a prefix cache can serve more of its")
        .append(" prompt. Client TTFT of the successful requests (from the intended start: the")
        .append(" previous answer's last byte plus the think time); prompt tokens as the server")
        .append(" reported them. Turns after ")
        .append(TurnStats.TURN_ROWS)
        .append(" share one row.</p>");
    b.append("<table><tr><th>turn</th><th>finished</th><th>ok</th><th>TTFT p50 ms</th>")
        .append("<th>TTFT p95 ms</th><th>TTFT p99 ms</th><th>TTFT mean ms</th>")
        .append("<th>prompt tokens, mean</th></tr>");
    for (TurnStats.Row r : m.turns.rows()) {
      b.append(r.ok() < r.finished() ? "<tr class=\"breach\">" : "<tr>");
      td(b, r.label());
      td(b, Long.toString(r.finished()));
      td(b, Long.toString(r.ok()));
      td(b, Html.ms(r.ttftP50Ms()));
      td(b, Html.ms(r.ttftP95Ms()));
      td(b, Html.ms(r.ttftP99Ms()));
      td(b, Html.ms(r.ttftMeanMs()));
      td(b, Double.isFinite(r.promptTokensMean()) ? Html.trim(r.promptTokensMean()) : "\u2013");
      b.append("</tr>");
    }
    b.append("</table>");
    Sessions.Counts c = m.in.sessions();
    if (c != null) {
      b.append("<p>Sessions: ")
          .append(c.started())
          .append(" started, ")
          .append(c.completed())
          .append(" completed, ")
          .append(c.cut())
          .append(" cut by a failed turn, ")
          .append(c.atMaxTokens())
          .append(" ended at their token or history limit, ")
          .append(c.endedByDuration())
          .append(" stopped by the run's end")
          .append(
              c.stoppedAtDeadline() > 0
                  ? ", " + c.stoppedAtDeadline() + " stopped at the run's deadline"
                  : "")
          .append("; ")
          .append(c.turnsNotSent())
          .append(" turns not sent; ")
          .append(c.answersTruncated())
          .append(" chat answers sent back cut at 64 KiB")
          .append(
              c.clientErrors() > 0
                  ? "; " + c.clientErrors() + " sessions cut by an error in the client"
                  : "")
          .append(".</p>");
    }
    return b.append("</section>").toString();
  }

  private static void td(StringBuilder b, String text) {
    b.append("<td>").append(Html.esc(text)).append("</td>");
  }
}
