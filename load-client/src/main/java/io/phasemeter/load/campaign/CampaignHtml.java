package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import io.phasemeter.load.report.Html;
import io.phasemeter.load.report.Svg;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** report.html of a campaign: self-contained, inline SVG, no script. */
final class CampaignHtml {
  private static final String[] COLORS = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"
  };

  /** Metrics plotted against concurrency (closed-model points). */
  private static final List<String> VS_CONCURRENCY =
      List.of(
          "ttft_p50_ms",
          "tpot_p50_ms",
          "total_p95_ms",
          "output_tokens_per_s_per_request_p50",
          "output_token_throughput");

  /** Latencies plotted against the offered rate (open-model points). */
  private static final List<String> VS_RATE =
      List.of("ttft_p50_ms", "ttft_p95_ms", "total_p50_ms", "total_p95_ms", "queue_p95_ms");

  private CampaignHtml() {}

  static String render(CampaignRunner.Result r, Map<String, Map<String, Stats.Interval>> stats) {
    StringBuilder h = new StringBuilder(64 * 1024);
    Plan plan = r.plan();
    h.append("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .append("<title>Phasemeter campaign</title><style>")
        .append(
            "body{font:14px/1.45 system-ui,sans-serif;margin:24px;max-width:1280px;color:#222}"
                + "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;"
                + "padding:3px 7px;text-align:right;vertical-align:top}th{background:#f3f3f3}"
                + "td.l,th.l{text-align:left}.bad{color:#b00020}.note{color:#555;max-width:900px}"
                + "figure{display:inline-block;background:#fff;border:1px solid #ddd;margin:4px;"
                + "padding:8px;width:560px}figcaption{font-weight:600;margin:0 0 4px 4px}"
                + "code{background:#f6f6f6;padding:0 3px}")
        .append(Html.CHART_CSS)
        .append("</style></head><body>");
    h.append("<h1>Phasemeter campaign: ").append(esc(plan.model())).append("</h1>");
    h.append("<p class=\"note\">")
        .append(plan.points().size())
        .append(" load points × ")
        .append(plan.repeats())
        .append(" repeats of ")
        .append(CampaignRunner.human(plan.duration()))
        .append(
            plan.sources().stream().anyMatch(x -> x instanceof Source.Trace)
                ? " (a replay: the length of its trace)"
                : "")
        .append(", in randomized blocks (seed ")
        .append(plan.seed())
        .append("), each point preceded by one discarded warm-up run of ")
        .append(CampaignRunner.human(plan.warmupDuration()))
        .append(". ")
        .append(esc(CampaignReport.T_NOTE))
        .append(" Invalid runs are listed below with their reasons and left out of every figure")
        .append(
            plan.slo() == null
                ? ".</p>"
                : " but goodput's (request_goodput, output_token_goodput, attainment): those take"
                    + " every measured run that sent its load, failed requests included, since"
                    + " attainment counts failures (n in brackets where it differs); attainment's"
                    + " interval is clamped to [0, 1].</p>");

    h.append("<h2>Per point: mean ± 95 % interval (n valid runs)</h2><table><tr>")
        .append("<th class=\"l\">point</th><th class=\"l\">load</th><th>n</th><th>invalid</th>");
    for (String m : RunData.METRICS) {
      h.append("<th>").append(esc(m)).append("</th>");
    }
    h.append("</tr>");
    for (Plan.Point p : plan.points()) {
      long invalid =
          r.runs().stream()
              .filter(
                  x -> !x.entry().warmup() && !x.valid() && x.entry().point().id().equals(p.id()))
              .count();
      Map<String, Stats.Interval> s = stats.get(p.id());
      h.append("<tr><td class=\"l\">")
          .append(esc(p.id()))
          .append("</td><td class=\"l\">")
          .append(esc(p.load()))
          .append("</td><td>")
          .append(s.get(RunData.METRICS.get(0)).n())
          .append("</td><td")
          .append(invalid > 0 ? " class=\"bad\">" : ">")
          .append(invalid)
          .append("</td>");
      for (String m : RunData.METRICS) {
        h.append("<td>")
            .append(esc(cell(s, m, CampaignReport.validRuns(r, p).size())))
            .append("</td>");
      }
      h.append("</tr>");
    }
    h.append("</table>");

    List<CampaignRunner.Run> invalidRuns =
        r.runs().stream().filter(x -> !x.valid() && !x.entry().warmup()).toList();
    h.append("<h2>Invalid runs (left out of the statistics)</h2>");
    if (invalidRuns.isEmpty()) {
      h.append("<p>None: every measured run was valid.</p>");
    } else {
      h.append(
          "<table><tr><th class=\"l\">run</th><th class=\"l\">point</th><th>block</th>"
              + "<th class=\"l\">reasons</th></tr>");
      for (CampaignRunner.Run x : invalidRuns) {
        h.append("<tr><td class=\"l\">")
            .append(esc(x.entry().name()))
            .append("</td><td class=\"l\">")
            .append(esc(x.entry().point().id()))
            .append("</td><td>")
            .append(x.entry().block())
            .append("</td><td class=\"l bad\">")
            .append(esc(String.join("; ", x.reasons())))
            .append("</td></tr>");
      }
      h.append("</table>");
    }

    h.append("<h2>Plots</h2>");
    // A replay is one point on its own schedule: the table has it, a plot would have one dot.
    for (Source src : plan.sources()) {
      List<Plan.Point> closed =
          plan.points().stream()
              .filter(p -> p.concurrency() > 0 && p.source().equals(src))
              .toList();
      List<Plan.Point> open =
          plan.points().stream().filter(p -> p.open() && p.source().equals(src)).toList();
      String level = src instanceof Source.Sessions ? "sessions at once" : "concurrency";
      if (closed.size() > 0) {
        h.append("<h3>")
            .append(esc(src.name()))
            .append(": metric vs ")
            .append(level)
            .append("</h3>");
        List<String> vsConcurrency = new ArrayList<>(VS_CONCURRENCY);
        if (plan.slo() != null) {
          vsConcurrency.add("request_goodput");
        }
        for (String m : vsConcurrency) {
          h.append(
              chart(
                  m + " vs " + level,
                  level,
                  m,
                  List.of(series(m, closed, stats, p -> (double) p.concurrency(), m))));
        }
      }
      if (open.size() > 0) {
        h.append("<h3>").append(esc(src.name())).append(": latency vs offered rate</h3>");
        List<Series> ttft = new ArrayList<>();
        List<Series> total = new ArrayList<>();
        for (String m : VS_RATE) {
          Series s = series(m, open, stats, Plan.Point::rate, m);
          (m.startsWith("total") ? total : ttft).add(s);
        }
        h.append(chart("TTFT and queue vs rate", "offered rate (req/s)", "ms", ttft));
        h.append(chart("total (E2EL) vs rate", "offered rate (req/s)", "ms", total));
        if (plan.slo() != null) {
          h.append(
              chart(
                  "goodput vs rate (" + plan.slo() + ")",
                  "offered rate (req/s)",
                  "good requests per second",
                  List.of(
                      series("request_goodput", open, stats, Plan.Point::rate, "request_goodput"),
                      series(
                          "request_throughput",
                          open,
                          stats,
                          Plan.Point::rate,
                          "request_throughput"))));
        }
      }
    }

    h.append("<h2>Conditions (recorded, not typed)</h2><table>");
    flatten("", r.conditions(), h);
    h.append("</table>");

    if (!r.startup().isEmpty()) {
      h.append("<h2>Server starts</h2><p class=\"note\">")
          .append(esc(r.startupNote()))
          .append("</p><table><tr><th>pair</th><th class=\"l\">kind</th><th>/health (ms)</th>")
          .append("<th>first completion (ms)</th><th class=\"l\">error</th></tr>");
      for (StartupProbe.Start s : r.startup()) {
        h.append("<tr><td>")
            .append(s.pair())
            .append("</td><td class=\"l\">")
            .append(s.kind())
            .append("</td><td>")
            .append(num(s.healthMs()))
            .append("</td><td>")
            .append(num(s.readyMs()))
            .append("</td><td class=\"l\">")
            .append(esc(s.error() == null ? "" : s.error()))
            .append("</td></tr>");
      }
      h.append("</table>");
    }

    h.append("<h2>Every run</h2><table><tr><th>#</th><th class=\"l\">run</th><th>block</th>")
        .append("<th class=\"l\">verdict</th>");
    for (String m : RunData.METRICS) {
      h.append("<th>").append(esc(m)).append("</th>");
    }
    h.append("</tr>");
    for (CampaignRunner.Run x : r.runs()) {
      h.append("<tr><td>")
          .append(x.entry().index())
          .append("</td><td class=\"l\">")
          .append(esc(x.entry().name()))
          .append("</td><td>")
          .append(x.entry().warmup() ? "warm-up" : String.valueOf(x.entry().block()))
          .append("</td><td class=\"l")
          .append(x.valid() ? "\">" : " bad\">")
          .append(
              x.entry().warmup()
                  ? "discarded"
                  : x.valid() ? "valid" : esc("invalid: " + String.join("; ", x.reasons())))
          .append("</td>");
      for (String m : RunData.METRICS) {
        h.append("<td>").append(num(x.metrics().get(m))).append("</td>");
      }
      h.append("</tr>");
    }
    h.append("</table>");
    h.append("<h2>Block order</h2><p class=\"note\">warm-up: ")
        .append(esc(String.join(", ", r.schedule().warmup())))
        .append("</p><ol>");
    for (List<String> b : r.schedule().blocks()) {
      h.append("<li>").append(esc(String.join(", ", b))).append("</li>");
    }
    h.append("</ol></body></html>\n");
    return h.toString();
  }

  record Pt(double x, Stats.Interval y) {}

  record Series(String name, List<Pt> points) {}

  private static Series series(
      String name,
      List<Plan.Point> points,
      Map<String, Map<String, Stats.Interval>> stats,
      java.util.function.ToDoubleFunction<Plan.Point> x,
      String metric) {
    List<Pt> pts = new ArrayList<>();
    for (Plan.Point p : points) {
      Stats.Interval i = stats.get(p.id()).get(metric);
      if (Double.isFinite(i.mean())) {
        pts.add(new Pt(x.applyAsDouble(p), i));
      }
    }
    pts.sort((a, b) -> Double.compare(a.x(), b.x()));
    return new Series(name, pts);
  }

  /**
   * A line chart with 95 % interval bars (a point with one valid run has no bar), drawn with the
   * reports' {@link Svg}.
   */
  static String chart(String title, String xTitle, String yTitle, List<Series> series) {
    double xmin = Double.MAX_VALUE;
    double xmax = -Double.MAX_VALUE;
    double ymax = 0;
    for (Series s : series) {
      for (Pt p : s.points()) {
        xmin = Math.min(xmin, p.x());
        xmax = Math.max(xmax, p.x());
        double hi = Double.isFinite(p.y().half()) ? p.y().high() : p.y().mean();
        ymax = Math.max(ymax, hi);
      }
    }
    StringBuilder b = new StringBuilder("<figure><figcaption>").append(esc(title));
    b.append("</figcaption>");
    if (xmin == Double.MAX_VALUE) {
      return b.append("<p>no valid runs</p></figure>").toString();
    }
    if (xmax == xmin) {
      xmin -= 1;
      xmax += 1;
    }
    Svg.Axis x = Svg.Axis.linear(Math.min(0, xmin), xmax, xTitle, CampaignHtml::tick);
    Svg.Axis y =
        new Svg.Axis(0, ymax <= 0 ? 1 : niceCeil(ymax * 1.05), false, yTitle, CampaignHtml::tick);
    Svg svg = new Svg(560, 300, x, y, title);
    for (int si = 0; si < series.size(); si++) {
      Series s = series.get(si);
      String color = COLORS[si % COLORS.length];
      double[] xs = s.points().stream().mapToDouble(Pt::x).toArray();
      double[] ys = s.points().stream().mapToDouble(p -> p.y().mean()).toArray();
      svg.polyline(xs, ys, color, 1.5, null, s.name());
      for (Pt p : s.points()) {
        if (Double.isFinite(p.y().half())) {
          double lo = Math.max(0, p.y().low());
          svg.line(svg.px(p.x()), svg.py(lo), svg.px(p.x()), svg.py(p.y().high()), color, 1, null);
        }
        svg.dot(p.x(), p.y().mean(), color, s.name() + " " + tick(p.x()) + ": " + format(p.y()));
      }
    }
    List<String> colors = new ArrayList<>();
    for (int si = 0; si < series.size(); si++) {
      colors.add(COLORS[si % COLORS.length]);
    }
    b.append(svg).append(Html.legend(series.stream().map(Series::name).toList(), colors));
    return b.append("</figure>").toString();
  }

  private static double niceCeil(double v) {
    double mag = Math.pow(10, Math.floor(Math.log10(v)));
    for (double m : new double[] {1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10}) {
      if (m * mag >= v) {
        return m * mag;
      }
    }
    return 10 * mag;
  }

  /**
   * A table cell: {@link #format}, an interval past the metric's bounds as its clamped ends, and
   * goodput's n where it differs from the valid runs'.
   */
  static String cell(Map<String, Stats.Interval> s, String metric, int valid) {
    Stats.Interval i = s.get(metric);
    String text = format(i);
    double[] b = CampaignReport.bounds(metric);
    if (b != null && Double.isFinite(i.half()) && (i.low() < b[0] || i.high() > b[1])) {
      text =
          num(i.mean())
              + " ["
              + num(Math.max(b[0], i.low()))
              + ", "
              + num(Math.min(b[1], i.high()))
              + "]";
    }
    if (RunData.GOODPUT.contains(metric) && i.n() > 0 && i.n() != valid && i.n() > 1) {
      text += " (n=" + i.n() + ")";
    }
    return text;
  }

  static String format(Stats.Interval i) {
    if (i.n() == 0 || !Double.isFinite(i.mean())) {
      return "–";
    }
    if (!Double.isFinite(i.half())) {
      return num(i.mean()) + " (n=" + i.n() + ", no interval)";
    }
    return num(i.mean()) + " ± " + num(i.half());
  }

  static String num(double v) {
    if (!Double.isFinite(v)) {
      return "–";
    }
    double a = Math.abs(v);
    return String.format(Locale.ROOT, a >= 100 ? "%.1f" : a >= 1 ? "%.2f" : "%.4f", v);
  }

  private static String tick(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e9
        ? String.valueOf((long) v)
        : String.format(Locale.ROOT, "%.3g", v);
  }

  private static void flatten(String prefix, JsonNode n, StringBuilder h) {
    if (n.isObject() && n.size() > 0 && !prefix.endsWith("body")) {
      n.fields()
          .forEachRemaining(
              e ->
                  flatten(
                      prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey(), e.getValue(), h));
      return;
    }
    h.append("<tr><th class=\"l\">")
        .append(esc(prefix))
        .append("</th><td class=\"l\"><code>")
        .append(esc(n.isTextual() ? n.asText() : n.toString()))
        .append("</code></td></tr>");
  }

  private static String esc(Object o) {
    return Html.esc(o);
  }
}
