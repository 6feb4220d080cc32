package io.phasemeter.load.report;

import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Verdict;
import java.util.List;
import java.util.Locale;

/** report.html's goodput section: the objectives, what missed them, and attainment over time. */
final class GoodputHtml {
  private GoodputHtml() {}

  static String section(ReportModel m) {
    StringBuilder b = new StringBuilder();
    b.append("<section id=\"goodput\"><h2>Goodput</h2>");
    if (m.goodput == null) {
      return b.append(
              "<p class=\"muted\">No objectives were given (--slo, or a budget's"
                  + " slo_ms).</p></section>")
          .toString();
    }
    ReportInput in = m.in;
    GoodputCounts g = m.goodput;
    double seconds = in.durationSeconds();
    b.append("<p>A request is good when it succeeded and met every objective below (")
        .append(Html.esc(g.goodput().source()))
        .append("). ")
        .append(g.good())
        .append(" of ")
        .append(in.sent())
        .append(" requests sent were good: attainment <b>")
        .append(in.sent() == 0 ? "\u2013" : Html.pct((double) g.good() / in.sent()))
        .append("</b>, ")
        .append(Html.rate(g.good() / seconds))
        .append(" good requests per second over the run's ")
        .append(Html.trim(seconds))
        .append(" s (the time base of request throughput).</p>");
    b.append("<table><tr><th class=\"l\">objective</th><th>limit</th><th>missed</th>")
        .append("<th>first missed</th><th>unjudged (figure absent)</th></tr>");
    List<Objective> objectives = g.goodput().objectives().list();
    long[] missed = g.missed();
    long[] first = g.firstMissed();
    long[] unjudged = g.unjudged();
    for (int i = 0; i < objectives.size(); i++) {
      Objective o = objectives.get(i);
      b.append(missed[i] + unjudged[i] > 0 ? "<tr class=\"breach\">" : "<tr>");
      td(b, "l", o.key());
      td(b, "", Html.msUnit(o.limitMs()));
      td(b, "", Long.toString(missed[i]));
      td(b, "", Long.toString(first[i]));
      td(
          b,
          "",
          Goodput.needsTheJoin(o.phase()) || unjudged[i] > 0
              ? Long.toString(unjudged[i])
              : "\u2013");
      b.append("</tr>");
    }
    long failed = Math.max(0, in.sent() - in.ok());
    b.append(failed > 0 ? "<tr class=\"breach\">" : "<tr>");
    td(b, "l", "(failed: " + Verdict.ERROR + ")");
    td(b, "", "\u2013");
    td(b, "", Long.toString(failed));
    td(b, "", Long.toString(failed));
    td(b, "", "\u2013");
    b.append("</tr></table>");
    b.append("<p class=\"muted\">A failed request is never good; a request with one output")
        .append(" token meets TPOT (vLLM's convention), one with more but no TPOT (not streamed")
        .append(" as SSE, every token in one chunk) is unjudged on it; a figure of the proxy's")
        .append(" record absent because the request was not joined (or, for the engine's phases,")
        .append(" had no engine span) leaves it unjudged, and not good. One")
        .append(" request may miss several objectives; \u201cfirst missed\u201d counts each")
        .append(" request once, at the first objective it missed in the order given. Attainment is")
        .append(" reported, not a gate of the run.</p>");
    verdicts(b, g.server());
    tenants(b, g.tenants());
    overTime(b, m);
    return b.append("</section>").toString();
  }

  /** The client's verdicts beside the proxy's own, and the disagreements explained. */
  private static void verdicts(StringBuilder b, ServerVerdicts s) {
    if (s.judged() == 0) {
      return;
    }
    b.append("<h3 id=\"verdicts\">Client and proxy verdicts</h3>")
        .append("<p>The proxy judged ")
        .append(s.judged())
        .append(" of the joined requests on its own objectives (its budget's slo_ms and the")
        .append(" request's x-slo-* headers, on its own clock) and found ")
        .append(s.met())
        .append(" met: attainment <b>")
        .append(Html.pct((double) s.met() / s.judged()))
        .append("</b>; the client found ")
        .append(s.bothGood() + s.clientGoodServerMissed())
        .append(" of the same requests good (")
        .append(Html.pct((double) (s.bothGood() + s.clientGoodServerMissed()) / s.judged()))
        .append(").</p>");
    b.append("<table><tr><th class=\"l\"></th><th>proxy: met</th><th>proxy: missed</th></tr>");
    b.append("<tr>");
    td(b, "l", "client: good");
    td(b, "", Long.toString(s.bothGood()));
    b.append(s.clientGoodServerMissed() > 0 ? "<td class=\"breach\">" : "<td>")
        .append(s.clientGoodServerMissed())
        .append("</td></tr><tr>");
    td(b, "l", "client: missed");
    b.append(s.clientMissedServerMet() > 0 ? "<td class=\"breach\">" : "<td>")
        .append(s.clientMissedServerMet())
        .append("</td>");
    td(b, "", Long.toString(s.bothMissed()));
    b.append("</tr></table>");
    List<Disagreement> list = s.disagreements();
    if (list.isEmpty()) {
      b.append("<p>The verdicts agree on every request the proxy judged.</p>");
      return;
    }
    long[] causes = s.causes();
    StringBuilder why = new StringBuilder();
    for (Disagreement.Cause c : Disagreement.Cause.values()) {
      if (causes[c.ordinal()] > 0) {
        why.append(why.length() == 0 ? "" : ", ").append(c.key()).append(' ');
        why.append(causes[c.ordinal()]);
      }
    }
    long differ = s.clientGoodServerMissed() + s.clientMissedServerMet();
    b.append("<p>Where they differ (")
        .append(differ)
        .append(": ")
        .append(Html.esc(why))
        .append(list.size() < differ ? "; the first " + list.size() + " below" : "")
        .append("): the envelope is the client's figure minus the proxy's of the same")
        .append(" objective (client_ttft \u2212 server_ttft, client_total \u2212 server_root,")
        .append(" the client's TPOT \u2212 the proxy's); it alone accounts for the different")
        .append(" verdict when the other side's figure holds under the limit that was missed.")
        .append(" Objectives only one side judges (the client's own figures, headers the client")
        .append(" does not send) and limits that differ explain the rest.</p>");
    b.append("<table><tr><th class=\"l\">trace id</th><th class=\"l\">tenant</th>")
        .append("<th class=\"l\">client</th><th class=\"l\">proxy</th><th>envelope</th>")
        .append("<th class=\"l\">why</th></tr>");
    for (Disagreement d : list) {
      b.append("<tr>");
      td(b, "l", d.traceId());
      td(b, "l", d.tenant() == null ? "\u2013" : d.tenant());
      td(b, "l", side(d.client(), "good"));
      td(b, "l", side(d.server(), "met"));
      td(b, "", Double.isNaN(d.envelopeMs()) ? "\u2013" : Disagreement.ms(d.envelopeMs()));
      td(b, "l", d.explanation());
      b.append("</tr>");
    }
    b.append("</table>");
  }

  /** {@code missed client_ttft: 538 ms > 500 ms}, {@code met server_ttft: 388 ms ≤ 500 ms}. */
  private static String side(Disagreement.Side s, String ok) {
    StringBuilder t = new StringBuilder(s.ok() ? ok : "missed");
    if (s.objective() != null) {
      t.append(' ').append(s.objective());
    }
    if (!Double.isNaN(s.valueMs())) {
      t.append(": ").append(Disagreement.ms(s.valueMs()));
      if (!Double.isNaN(s.limitMs())) {
        t.append(s.valueMs() <= s.limitMs() ? " \u2264 " : " > ")
            .append(Disagreement.ms(s.limitMs()));
      } else {
        t.append(" (no objective)");
      }
    }
    return t.toString();
  }

  /** The client's goodput per tenant, the proxy's attainment beside it. */
  private static void tenants(StringBuilder b, TenantGoodput t) {
    if (!t.any()) {
      return;
    }
    b.append("<h3 id=\"tenants\">Goodput per tenant</h3>")
        .append("<p>Tenants as the proxy's records name them (joined requests only).</p>")
        .append("<table><tr><th class=\"l\">tenant</th><th>requests</th><th>good</th>")
        .append("<th>attainment</th><th>proxy judged</th><th>proxy met</th>")
        .append("<th>proxy attainment</th></tr>");
    for (TenantGoodput.Row r : t.rows()) {
      b.append("<tr>");
      td(b, "l", r.tenant());
      td(b, "", Long.toString(r.sent()));
      td(b, "", Long.toString(r.good()));
      td(b, "", Html.pct(r.attainment()));
      td(b, "", Long.toString(r.serverJudged()));
      td(b, "", Long.toString(r.serverMet()));
      td(b, "", Html.pct(r.serverAttainment()));
      b.append("</tr>");
    }
    b.append("</table>");
    if (t.folded() > 0) {
      b.append("<p class=\"muted\">")
          .append(t.folded())
          .append(" requests of tenants past the first ")
          .append(TenantGoodput.MAX_NAMED)
          .append(" named are counted under other.</p>");
    }
  }

  private static void overTime(StringBuilder b, ReportModel m) {
    List<TimePoint> ts = m.timeSeries;
    if (ts.isEmpty() || m.goodOverTime.length != ts.size()) {
      return;
    }
    double width = ts.get(0).widthSeconds();
    double end = Math.max(m.in.durationSeconds(), ts.get(ts.size() - 1).startSeconds() + width);
    Svg.Axis x = Svg.Axis.time(end, "seconds since the run started (intended start)");
    Svg.Axis y = new Svg.Axis(0, 1, false, "attainment", v -> Math.round(v * 100) + "%");
    Svg svg = new Svg(1140, 220, x, y, "attainment per interval");
    double[] xs = new double[ts.size()];
    double[] ys = new double[ts.size()];
    for (int i = 0; i < ts.size(); i++) {
      TimePoint t = ts.get(i);
      xs[i] = t.startSeconds() + width / 2;
      ys[i] = t.started() == 0 ? Double.NaN : (double) m.goodOverTime[i] / t.started();
    }
    svg.polyline(xs, ys, "#2e7d32", 2, null, "attainment");
    for (int i = 0; i < ts.size(); i++) {
      TimePoint t = ts.get(i);
      svg.dot(
          xs[i],
          ys[i],
          "#2e7d32",
          String.format(
              Locale.ROOT,
              "%d good of %d finished, started at %s s",
              m.goodOverTime[i],
              t.started(),
              Html.trim(t.startSeconds())));
    }
    long unfinished = Math.max(0, m.in.sent() - m.goodput.finished());
    b.append("<figure><figcaption>Attainment per interval (good / requests started in it that")
        .append(" finished, by intended start")
        .append(
            unfinished == 0
                ? ")"
                : "; the "
                    + unfinished
                    + " still in flight at the end are in no interval, though the run's"
                    + " attainment counts them as not good)")
        .append("</figcaption>")
        .append(svg)
        .append("</figure>");
  }

  private static void td(StringBuilder b, String cls, String text) {
    b.append("<td").append(cls.isEmpty() ? "" : " class=\"" + cls + "\"").append('>');
    b.append(Html.esc(text)).append("</td>");
  }
}
