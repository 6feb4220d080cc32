package io.phasemeter.load.report;

import io.phasemeter.load.join.JoinCounts;
import io.phasemeter.load.join.ReplicaCounts;

/**
 * report.html's "Replicas" section: each proxy replica's part in the join (summary.json {@code
 * join.replicas}). Only for a run that joined; one replica gets the table too, so that the page
 * names the proxy its records came from.
 */
final class ReplicasHtml {
  private ReplicasHtml() {}

  static String section(ReportModel m) {
    JoinCounts feed = m.in.feed();
    if (feed == null || feed.replicas().isEmpty()) {
      return "";
    }
    StringBuilder b = new StringBuilder();
    b.append("<section id=\"replicas\"><h2>Replicas</h2><p class=\"muted\">")
        .append("Each request lands on one proxy replica; its record is joined from that")
        .append(" replica's feed, or fetched from it by trace id at the end of the run. Join")
        .append(" coverage is the run's (")
        .append(Html.pct(m.joinCoverage()))
        .append("): a replica cannot know how many of the client's requests it was sent. ")
        .append(feed.fetched())
        .append(" requests joined by a fetched record.</p>");
    b.append("<table><tr><th class=\"l\">replica</th><th>joined</th><th>of which fetched</th>")
        .append("<th>share</th><th>feed reconnects</th><th>records missed</th>")
        .append("<th class=\"l\">state</th></tr>");
    for (ReplicaCounts r : feed.replicas()) {
      b.append(ReplicaCounts.DOWN.equals(r.state()) ? "<tr class=\"breach\">" : "<tr>");
      td(b, "l", r.replica());
      td(b, "", Long.toString(r.joined()));
      td(b, "", Long.toString(r.fetched()));
      td(b, "", Double.isNaN(r.share()) ? "\u2013" : Html.pct(r.share()));
      td(b, "", Long.toString(r.feedReconnects()));
      td(b, "", Long.toString(r.recordsMissed()));
      td(b, "l", r.state());
      b.append("</tr>");
    }
    return b.append("</table></section>").toString();
  }

  private static void td(StringBuilder b, String cls, String text) {
    b.append(cls.isEmpty() ? "<td>" : "<td class=\"" + cls + "\">")
        .append(Html.esc(text))
        .append("</td>");
  }
}
