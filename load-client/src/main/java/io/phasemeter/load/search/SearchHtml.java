package io.phasemeter.load.search;

import io.phasemeter.load.report.Html;
import io.phasemeter.load.report.Svg;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * report.html of a search: the capacity and the limiting phase in a sentence, goodput (or
 * throughput) and each phase's p95 against the offered load with the knee marked, and every probe.
 * Self-contained, inline SVG, no script.
 */
final class SearchHtml {
  private static final String[] COLORS = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"
  };
  private static final String PASS = "#2ca02c";
  private static final String FAIL = "#d62728";

  /** The phases drawn against the load: the end-to-end figure and its decomposition. */
  private static final List<String> PHASES =
      List.of(
          "client_total",
          "client_ttft",
          "network_envelope",
          "gateway",
          "receive",
          "queue",
          "generation",
          "engine_queue",
          "write");

  private SearchHtml() {}

  static String render(SearchResult r) {
    boolean closed = r.options().settings().closed();
    String unit = closed ? "concurrency" : "offered rate (req/s)";
    StringBuilder h = new StringBuilder(64 * 1024);
    h.append("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .append("<title>Phasemeter capacity search</title><style>")
        .append(
            "body{font:14px/1.45 system-ui,sans-serif;margin:24px;max-width:1280px;color:#222}"
                + "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;"
                + "padding:3px 7px;text-align:right;vertical-align:top}th{background:#f3f3f3}"
                + "td.l,th.l{text-align:left}.fail{color:#b00020}.pass{color:#1b7a2b}"
                + ".invalid{color:#8a6d00}.note{color:#555;max-width:900px}"
                + "figure{display:inline-block;background:#fff;border:1px solid #ddd;margin:4px;"
                + "padding:8px;width:620px}figcaption{font-weight:600;margin:0 0 4px 4px}"
                + "code{background:#f6f6f6;padding:0 3px}.big{font-size:18px}")
        .append(Html.CHART_CSS)
        .append("</style></head><body>");
    h.append("<h1>Phasemeter capacity search: ")
        .append(esc(r.options().base().model()))
        .append("</h1>");
    Capacity c = r.capacity();
    h.append("<p class=\"big\">");
    if (Double.isNaN(c.rate())) {
      h.append("No capacity found.");
    } else {
      h.append("Capacity ")
          .append(c.atLeast() ? "at least " : "")
          .append("<b>")
          .append(esc(Format.load(c.rate(), closed)))
          .append("</b>");
      if (Double.isFinite(c.ci95Low())) {
        h.append(" (95 % interval ")
            .append(esc(Format.load(c.ci95Low())))
            .append(" – ")
            .append(esc(Format.load(c.ci95High())))
            .append(")");
      }
      h.append(".");
    }
    LimitingPhase l = r.limiting();
    if (l != null) {
      h.append(" ");
      if (l.phase() != null) {
        h.append("The limiting phase is <b>")
            .append(esc(l.phase()))
            .append("</b> (page: ")
            .append(esc(l.owner()))
            .append("): ")
            .append(esc(l.reason()))
            .append(".");
        if (!l.ties().isEmpty()) {
          h.append(" Close: ")
              .append(
                  esc(String.join(", ", l.ties().stream().map(LimitingPhase.Tie::phase).toList())))
              .append(".");
        }
      } else {
        h.append("No limiting phase named: ").append(esc(l.reason())).append(".");
      }
    }
    h.append("</p><p class=\"note\">")
        .append(esc(r.exitReason()))
        .append(" (exit ")
        .append(r.exitCode())
        .append("). ")
        .append(esc(c.method()))
        .append(".");
    for (String n : r.outcome().notes()) {
      h.append(" ").append(esc(n)).append(".");
    }
    h.append("</p>");

    List<Probe> valid = r.outcome().probes().stream().filter(Probe::valid).toList();
    boolean goodput = valid.stream().anyMatch(p -> Double.isFinite(p.requestGoodput()));
    h.append(
        throughputChart(
            valid,
            c,
            goodput ? "Goodput against offered load" : "Achieved throughput against offered load",
            unit,
            goodput ? "good requests/s" : "successful requests/s",
            goodput));
    h.append(phaseChart(valid, c, unit));

    h.append("<h2>Probes</h2><table><tr><th>#</th><th class=\"l\">stage</th><th>")
        .append(closed ? "concurrency" : "rate")
        .append("</th><th class=\"l\">verdict</th><th>margin</th><th>attainment</th>")
        .append("<th>req/s ok</th><th>out tok/s</th>");
    List<String> phases = phasesPresent(r.outcome().probes());
    for (String p : phases) {
      h.append("<th>").append(esc(p)).append(" p95</th>");
    }
    h.append("<th class=\"l\">reasons</th><th class=\"l\">report</th></tr>");
    for (Probe p : r.outcome().probes()) {
      h.append("<tr><td>")
          .append(p.index())
          .append("</td><td class=\"l\">")
          .append(esc(p.stage().key() + (p.block() > 0 ? " " + p.block() : "")))
          .append("</td><td>")
          .append(esc(Format.load(p.load())))
          .append("</td><td class=\"l ")
          .append(p.verdict().key())
          .append("\">")
          .append(p.verdict().key())
          .append("</td><td>")
          .append(
              Double.isFinite(p.margin()) ? String.format(Locale.ROOT, "%+.3f", p.margin()) : "–")
          .append("</td><td>")
          .append(esc(Format.pct(p.attainment())))
          .append("</td><td>")
          .append(num(p.requestThroughput()))
          .append("</td><td>")
          .append(num(p.outputTokensPerS()))
          .append("</td>");
      for (String ph : phases) {
        h.append("<td>").append(esc(Format.ms(p.p95(ph)))).append("</td>");
      }
      List<String> text = new ArrayList<>(p.reasons());
      text.addAll(p.notes());
      String rel = r.options().base().out().relativize(p.dir()).toString();
      h.append("<td class=\"l\">")
          .append(esc(String.join("; ", text)))
          .append("</td><td class=\"l\"><a href=\"")
          .append(esc(rel + "/report.html"))
          .append("\">")
          .append(esc(rel))
          .append("</a></td></tr>");
    }
    h.append("</table>");
    h.append("<h2>Criteria and conditions</h2><pre>")
        .append(esc(SearchResult.json(r).path("criteria").toPrettyString()))
        .append("\n")
        .append(esc(r.conditions().toPrettyString()))
        .append("</pre></body></html>\n");
    return h.toString();
  }

  private static String throughputChart(
      List<Probe> valid, Capacity c, String title, String xTitle, String yTitle, boolean goodput) {
    StringBuilder b = new StringBuilder("<figure><figcaption>").append(esc(title));
    b.append("</figcaption>");
    if (valid.isEmpty()) {
      return b.append("<p>no valid probes</p></figure>").toString();
    }
    double xmax = valid.stream().mapToDouble(Probe::load).max().orElse(1);
    double ymax = 0;
    for (Probe p : valid) {
      double y = goodput ? p.requestGoodput() : p.requestThroughput();
      if (Double.isFinite(y)) {
        ymax = Math.max(ymax, y);
      }
    }
    Svg svg =
        new Svg(
            620,
            320,
            Svg.Axis.linear(0, xmax * 1.05, xTitle, SearchHtml::tick),
            Svg.Axis.linear(0, ymax <= 0 ? 1 : ymax * 1.1, yTitle, SearchHtml::tick),
            title);
    knee(svg, c, 0, ymax <= 0 ? 1 : ymax * 1.1);
    TreeMap<Double, List<Double>> byLoad = new TreeMap<>();
    for (Probe p : valid) {
      double y = goodput ? p.requestGoodput() : p.requestThroughput();
      byLoad.computeIfAbsent(p.load(), k -> new ArrayList<>()).add(y);
    }
    double[] xs = byLoad.keySet().stream().mapToDouble(Double::doubleValue).toArray();
    double[] ys =
        byLoad.values().stream()
            .mapToDouble(
                v -> v.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN))
            .toArray();
    svg.polyline(xs, ys, "#1f77b4", 1.5, null, yTitle);
    for (Probe p : valid) {
      double y = goodput ? p.requestGoodput() : p.requestThroughput();
      svg.dot(
          p.load(),
          y,
          p.passed() ? PASS : FAIL,
          "probe "
              + p.index()
              + " "
              + Format.load(p.load())
              + ": "
              + p.verdict().key()
              + ", "
              + num(y));
    }
    b.append(svg)
        .append(
            Html.legend(
                List.of("pass", "fail", "capacity (95 % interval)"), List.of(PASS, FAIL, "#888")));
    return b.append("</figure>").toString();
  }

  private static String phaseChart(List<Probe> valid, Capacity c, String xTitle) {
    String title = "Each phase's p95 against offered load";
    StringBuilder b = new StringBuilder("<figure><figcaption>").append(esc(title));
    b.append("</figcaption>");
    List<String> phases = new ArrayList<>();
    double ymin = Double.MAX_VALUE;
    double ymax = 0;
    for (String ph : PHASES) {
      for (Probe p : valid) {
        double v = p.p95(ph);
        if (Double.isFinite(v) && v > 0) {
          if (!phases.contains(ph)) {
            phases.add(ph);
          }
          ymin = Math.min(ymin, v);
          ymax = Math.max(ymax, v);
        }
      }
    }
    if (phases.isEmpty()) {
      return b.append("<p>no phase measured</p></figure>").toString();
    }
    double xmax = valid.stream().mapToDouble(Probe::load).max().orElse(1);
    Svg.Axis y =
        new Svg.Axis(Math.max(0.001, ymin), ymax, true, "p95 (ms, log scale)", SearchHtml::tick);
    Svg svg =
        new Svg(620, 320, Svg.Axis.linear(0, xmax * 1.05, xTitle, SearchHtml::tick), y, title);
    knee(svg, c, Math.max(0.001, ymin), ymax);
    List<String> colors = new ArrayList<>();
    for (int i = 0; i < phases.size(); i++) {
      String ph = phases.get(i);
      String color = COLORS[i % COLORS.length];
      colors.add(color);
      TreeMap<Double, List<Double>> byLoad = new TreeMap<>();
      for (Probe p : valid) {
        if (Double.isFinite(p.p95(ph))) {
          byLoad.computeIfAbsent(p.load(), k -> new ArrayList<>()).add(p.p95(ph));
        }
      }
      double[] xs = byLoad.keySet().stream().mapToDouble(Double::doubleValue).toArray();
      double[] ys =
          byLoad.values().stream()
              .mapToDouble(
                  v -> v.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN))
              .toArray();
      svg.polyline(xs, ys, color, 1.5, null, ph);
      for (Map.Entry<Double, List<Double>> e : byLoad.entrySet()) {
        double m =
            e.getValue().stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN);
        svg.dot(
            e.getKey(), m, color, ph + " p95 at " + Format.load(e.getKey()) + ": " + Format.ms(m));
      }
    }
    b.append(svg).append(Html.legend(phases, colors));
    return b.append("</figure>").toString();
  }

  /** The capacity as a dashed line, its interval as a shaded band. */
  private static void knee(Svg svg, Capacity c, double y0, double y1) {
    if (!Double.isFinite(c.rate())) {
      return;
    }
    if (Double.isFinite(c.ci95Low()) && c.ci95High() > c.ci95Low()) {
      svg.box(c.ci95Low(), y0, c.ci95High(), y1, "#eeeeee", "95 % interval of the capacity");
    }
    svg.line(svg.px(c.rate()), svg.py(y0), svg.px(c.rate()), svg.py(y1), "#555", 1.5, "5 3");
    svg.text(
        svg.px(c.rate()) + 4,
        svg.py(y1) + 14,
        "capacity " + Format.load(c.rate()),
        "start",
        "note");
  }

  private static List<String> phasesPresent(List<Probe> probes) {
    List<String> out = new ArrayList<>();
    for (String ph : PHASES) {
      if (probes.stream().anyMatch(p -> Double.isFinite(p.p95(ph)))) {
        out.add(ph);
      }
    }
    return out;
  }

  private static String num(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, v >= 100 ? "%.1f" : "%.2f", v) : "–";
  }

  private static String tick(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e9
        ? String.valueOf((long) v)
        : String.format(Locale.ROOT, "%.3g", v);
  }

  private static String esc(Object o) {
    return Html.esc(o);
  }
}
