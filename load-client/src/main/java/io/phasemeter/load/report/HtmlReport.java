package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.http.FailureReason;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * report.html: one self-contained page (inline CSS and SVG drawn here, no script, nothing fetched)
 * that answers "who owns the slow request?" at a glance. The markup is also well-formed XML, which
 * keeps the page honest and lets a test parse it.
 */
final class HtmlReport {

  static final Map<String, String> COLORS =
      Map.ofEntries(
          Map.entry("client_total", "#1f77b4"),
          Map.entry("client_ttft", "#17becf"),
          Map.entry("transport_setup", "#7f7f7f"),
          Map.entry("dns", "#c7c7c7"),
          Map.entry("connect", "#9edae5"),
          Map.entry("tls", "#dbdb8d"),
          Map.entry("network_envelope", "#9467bd"),
          Map.entry("ttft_envelope", "#c39bd3"),
          Map.entry("server_root", "#2ca02c"),
          Map.entry("server_ttft", "#8fce72"),
          Map.entry("gateway", "#ff7f0e"),
          Map.entry("receive", "#bcbd22"),
          Map.entry("queue", "#d62728"),
          Map.entry("generation", "#8c564b"),
          Map.entry("engine_queue", "#e7969c"),
          Map.entry("prefill", "#c49c94"),
          Map.entry("decode", "#a55194"),
          Map.entry("write", "#e377c2"),
          Map.entry("unattributed", "#a0a0a0"),
          Map.entry("tpot", "#393b79"),
          Map.entry("itl", "#6b6ecf"),
          Map.entry("schedule_lag", "#ad494a"));

  /** Inside generation, from the engine's own spans: shown only when there are some. */
  private static final java.util.Set<String> ENGINE_PHASES =
      java.util.Set.copyOf(PhaseStats.ENGINE);

  /** Section ids, in page order; a test checks each is there. */
  static final List<String> SECTIONS =
      List.of(
          "verdict",
          "budgets",
          "failures",
          "phases",
          "cdf",
          "over-time",
          "steps",
          "slowest",
          "conditions",
          "definitions");

  private static final String CSS =
      """
      body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;
        margin:0;background:#f5f6f8;color:#1d2430}
      main{max-width:1200px;margin:0 auto;padding:20px 24px 48px}
      h1{font-size:24px;margin:8px 0 4px}
      h2{font-size:18px;margin:32px 0 8px;border-bottom:2px solid #dde1e6;padding-bottom:4px}
      p.lead{color:#4a5563;margin:0 0 16px}
      .cards{display:flex;flex-wrap:wrap;gap:12px}
      .card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 14px;
        min-width:150px}
      .card .k{font-size:12px;color:#5b6573;text-transform:uppercase;letter-spacing:.04em}
      .card .v{font-size:22px;font-weight:600}
      .card .s{font-size:12px;color:#5b6573}
      .ok{color:#1a7f37}.bad{color:#c62828}
      .banner{border-radius:8px;padding:12px 16px;font-size:16px;font-weight:600;margin:12px 0}
      .banner.ok{background:#e6f4ea;border:1px solid #a7d7b5}
      .banner.bad{background:#fdecea;border:1px solid #f1a9a0}
      table{border-collapse:collapse;background:#fff;border:1px solid #dde1e6;font-size:13px}
      th,td{padding:4px 8px;border-bottom:1px solid #eceef1;text-align:right;white-space:nowrap}
      th{background:#f0f2f5;font-weight:600;white-space:normal;vertical-align:bottom}
      .scroll{overflow-x:auto;max-width:100%}
      table.compact{font-size:12px}table.compact td,table.compact th{padding:3px 5px}
      td.l,th.l{text-align:left}
      td.wrap{white-space:normal;text-align:left;max-width:520px}
      tr.breach td{background:#fdecea;color:#8e1c14;font-weight:600}
      td.neg{color:#c62828;font-weight:600}
      code,.mono{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,monospace;font-size:12px}
      .grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px}
      figure{margin:0;background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px}
      figcaption{font-weight:600;margin:0 0 4px 4px}
      .muted{color:#5b6573;font-size:12px}
      """;

  private final ReportModel m;
  private final StringBuilder b = new StringBuilder(64 * 1024);

  private HtmlReport(ReportModel m) {
    this.m = m;
  }

  static void write(Path file, ReportModel m) throws IOException {
    Files.writeString(file, render(m), StandardCharsets.UTF_8);
  }

  static String render(ReportModel m) {
    return new HtmlReport(m).page();
  }

  private String page() {
    b.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>");
    b.append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>");
    Object model = m.in.conditions().get("model");
    b.append("<title>Phasemeter report")
        .append(model == null ? "" : " \u2014 " + Html.esc(model))
        .append("</title><style>")
        .append(CSS)
        .append(Html.CHART_CSS)
        .append("</style></head><body><main>");
    verdict();
    budgets();
    b.append(GoodputHtml.section(m));
    b.append(ReplicasHtml.section(m));
    failures();
    b.append(LengthsHtml.section(m));
    phases();
    cdfs();
    overTime();
    steps();
    b.append(TurnsHtml.section(m));
    slowest();
    conditions();
    definitions();
    b.append("</main></body></html>\n");
    return b.toString();
  }

  // ---------------------------------------------------------------- verdict and tables

  private void verdict() {
    ReportInput in = m.in;
    b.append("<section id=\"verdict\"><h1>Phasemeter load report</h1>");
    b.append("<p class=\"lead\">Who owns the slow request? Client and proxy observations of ")
        .append(in.pairs().size())
        .append(" requests, joined on the W3C trace id; run of ")
        .append(Html.trim(in.durationSeconds()))
        .append(" s.</p>");
    List<BudgetResult> breached = in.budgets().stream().filter(BudgetResult::breached).toList();
    long judged = in.budgets().stream().filter(BudgetResult::applicable).count();
    long notApplicable = in.budgets().size() - judged;
    String naNote =
        notApplicable == 0
            ? ""
            : " (" + notApplicable + " not applicable to " + Html.esc(in.api().key()) + ")";
    if (in.budgets().isEmpty()) {
      b.append("<div class=\"banner ok\">No budgets were judged.</div>");
    } else if (breached.isEmpty()) {
      b.append("<div class=\"banner ok\">All ")
          .append(judged)
          .append(" budgets held")
          .append(naNote)
          .append(".</div>");
    } else {
      b.append("<div class=\"banner bad\">")
          .append(breached.size())
          .append(" of ")
          .append(judged)
          .append(" budgets breached")
          .append(naNote)
          .append(": ");
      List<String> names = new ArrayList<>();
      for (BudgetResult r : breached) {
        names.add(Html.esc(r.phase()) + " (" + Html.esc(r.name()) + ")");
      }
      b.append(String.join(", ", names)).append("</div>");
    }
    double coverage = m.joinCoverage();
    long negNet = m.stats.negativeCount("network_envelope");
    long negTtft = in.applicable("ttft_envelope") ? m.stats.negativeCount("ttft_envelope") : 0;
    b.append("<div class=\"cards\">");
    card("Requests", String.valueOf(in.sent()), "sent");
    card(
        "Succeeded",
        String.valueOf(in.ok()),
        in.errors() + " errors (" + in.invalid() + " invalid)",
        in.errors() > 0 ? "bad" : "ok");
    card(
        "Dropped",
        String.valueOf(in.dropped()),
        "could not start",
        in.dropped() > 0 ? "bad" : "ok");
    Connections conns = in.connections();
    if (conns.known()) {
      card(
          "Connections",
          String.valueOf(conns.opened()),
          (conns.reuse() ? "reused" : "one per request (--connection-reuse off)")
              + "; "
              + conns.closedByServer()
              + " closed by the server after a response; "
              + conns.staleRetries()
              + " stale-connection retries",
          conns.closedByServer() + conns.staleRetries() > 0 ? "bad" : "ok");
    }
    card("Achieved rate", Html.rate(in.achievedRate()) + " /s", "requests per second");
    card(
        "Throughput",
        Html.rate(m.requestThroughput) + " req/s",
        in.generates()
            ? Html.rate(m.outputTokenThroughput) + " output tok/s"
            : "output tokens: not applicable");
    card(
        "Join coverage",
        Html.pct(coverage),
        m.stats.joinedOkCount() + " of " + m.stats.okCount() + " successful requests",
        Double.isFinite(coverage) && coverage < 0.95 ? "bad" : "ok");
    card(
        "Negative envelopes",
        String.valueOf(negNet + negTtft),
        negNet
            + " network, "
            + (in.applicable("ttft_envelope") ? negTtft + " TTFT" : "TTFT not applicable")
            + " (boundary/unit/join errors)",
        negNet + negTtft > 0 ? "bad" : "ok");
    b.append("</div>");
    if (!in.notApplicable().isEmpty()) {
      b.append("<p class=\"muted\">Not applicable to ")
          .append(Html.esc(in.api().key()))
          .append(": ")
          .append(Html.esc(String.join(", ", in.notApplicable())))
          .append(" (")
          .append(Html.esc(in.api().notApplicableReason()))
          .append("). They are shown as not applicable, never as zero, and budgets on them are")
          .append(" neither held nor breached.</p>");
    }
    b.append("<p class=\"muted\">Envelopes and server phases describe the ")
        .append(m.stats.joinedOkCount())
        .append(" successful requests that joined a proxy record (join coverage ")
        .append(Html.pct(coverage))
        .append("). Negative envelopes are counted and kept in every quantile, never clipped.")
        .append("</p>");
    clientFloor();
    b.append("</section>");
  }

  /** One line: the client's own floor and the warm-up before it (conditions), when measured. */
  private void clientFloor() {
    String floor = io.phasemeter.load.http.ClientFloor.line(m.in.conditions());
    Object warm = m.in.conditions().get("warmup_requests");
    Object target = m.in.conditions().get("warmup_target");
    if (floor == null && target == null) {
      return;
    }
    b.append("<p class=\"muted\" id=\"client-floor\">")
        .append(floor == null ? "" : Html.esc(floor) + ". ")
        .append(
            target == null
                ? ""
                : Html.esc(
                    "Warm-up: "
                        + warm
                        + ("self".equals(target)
                            ? " requests to the client's own endpoint (one by one, then at the"
                                + " run's load unless --warmup-duration)"
                            : " requests one by one to the target")
                        + ", not counted."))
        .append("</p>");
  }

  private void card(String key, String value, String sub) {
    card(key, value, sub, "");
  }

  private void card(String key, String value, String sub, String cls) {
    b.append("<div class=\"card\"><div class=\"k\">")
        .append(Html.esc(key))
        .append("</div><div class=\"v ")
        .append(cls)
        .append("\">")
        .append(Html.esc(value))
        .append("</div><div class=\"s\">")
        .append(Html.esc(sub))
        .append("</div></div>");
  }

  private static boolean isRateGate(BudgetResult r) {
    return r.phase().equals("error_rate") || r.phase().equals("join_coverage");
  }

  private void budgets() {
    b.append("<section id=\"budgets\"><h2>Budgets</h2>");
    if (m.in.budgets().isEmpty()) {
      b.append("<p class=\"muted\">No budgets file was given.</p></section>");
      return;
    }
    b.append("<table><tr><th class=\"l\">budget</th><th class=\"l\">phase</th><th>limit</th>")
        .append("<th>observed</th><th>observed / limit</th><th class=\"l\">status</th></tr>");
    for (BudgetResult r : m.in.budgets()) {
      if (!r.applicable()) {
        b.append("<tr>");
        td("l", r.name());
        td("l", r.phase());
        td("", Html.msUnit(r.limitMs()));
        td("", "\u2013");
        td("", "\u2013");
        td("l", "not applicable (" + r.notApplicable() + ")");
        b.append("</tr>");
        continue;
      }
      boolean rate = isRateGate(r);
      b.append(r.breached() ? "<tr class=\"breach\">" : "<tr>");
      td("l", r.name());
      td("l", r.phase());
      td("", rate ? Html.pct(r.limitMs()) : Html.msUnit(r.limitMs()));
      td("", rate ? Html.pct(r.observedMs()) : Html.msUnit(r.observedMs()));
      double ratio = rate ? r.observedMs() / r.limitMs() : r.ratio();
      td("", Double.isFinite(ratio) ? String.format(Locale.ROOT, "%.2f", ratio) : "\u2013");
      td(
          "l",
          r.breached() ? "BREACHED" : Double.isFinite(r.observedMs()) ? "held" : "not observed");
      b.append("</tr>");
    }
    b.append("</table><p class=\"muted\">A latency budget is breached when more than")
        .append(" 1 \u2212 quantile of the phase's values were above its limit, counted exactly")
        .append(" (as the proxy and its alert rules judge it); the observed quantile beside it is")
        .append(" the HdrHistogram's, within 1 %. Error rate must stay under its limit and join")
        .append(" coverage over it.</p></section>");
  }

  private void failures() {
    FailureReasons f = m.failures;
    b.append("<section id=\"failures\"><h2>Failures</h2>");
    if (f.failed() == 0) {
      b.append("<p class=\"muted\">No request failed.</p></section>");
      return;
    }
    b.append("<p class=\"muted\">")
        .append(f.failed())
        .append(" failed requests by class and reason (pairs.csv's <code>invalid_reason</code>),")
        .append(" the ")
        .append(FailureReasons.LIMIT)
        .append(" most frequent named. An engine's message is shown cleaned (one line, no key,")
        .append(" no long quotation, none of the prompt), cut to ")
        .append(FailureReason.MAX_CHARS)
        .append(" characters.</p>");
    b.append("<div class=\"scroll\"><table><tr><th>count</th><th class=\"l\">class</th>")
        .append("<th class=\"l\">reason</th><th class=\"l\">first trace id</th></tr>");
    for (FailureReasons.Reason r : f.top()) {
      b.append("<tr>");
      td("", String.valueOf(r.count()));
      td("l", r.errorClass());
      td("wrap", r.reason().isEmpty() ? "(none given)" : r.reason());
      b.append("<td class=\"l mono\">").append(Html.esc(r.firstTraceId())).append("</td>");
      b.append("</tr>");
    }
    if (f.otherCount() > 0) {
      b.append("<tr>");
      td("", String.valueOf(f.otherCount()));
      td("l", "");
      td("wrap", "other (" + f.otherReasons() + " more reasons)");
      td("l", "");
      b.append("</tr>");
    }
    b.append("</table></div></section>");
  }

  private void td(String cls, String text) {
    b.append(cls.isEmpty() ? "<td>" : "<td class=\"" + cls + "\">")
        .append(Html.esc(text))
        .append("</td>");
  }

  private void phases() {
    b.append("<section id=\"phases\"><h2>Phases</h2><table><tr><th class=\"l\">phase</th>")
        .append("<th>count</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th>")
        .append("<th>negative</th><th class=\"l\">what it is</th></tr>");
    for (String name : PhaseStats.NAMES) {
      PhaseStats.Summary s = m.stats.summary(name);
      if (s.count() == 0 && ENGINE_PHASES.contains(name)) {
        continue; // only when the proxy matched the engine's spans
      }
      if (!m.in.applicable(name)) {
        b.append("<tr><td class=\"l\">")
            .append(swatch(name))
            .append(Html.esc(name))
            .append("</td><td class=\"l\" colspan=\"6\">not applicable to ")
            .append(Html.esc(m.in.api().key()))
            .append("</td>");
        td("wrap", Definitions.TERMS.getOrDefault(name, ""));
        b.append("</tr>");
        continue;
      }
      long neg = m.stats.negativeCount(name);
      b.append("<tr><td class=\"l\">").append(swatch(name)).append(Html.esc(name)).append("</td>");
      td("", String.valueOf(s.count()));
      td("", Html.ms(s.p50()));
      td("", Html.ms(s.p95()));
      td("", Html.ms(s.p99()));
      td("", Html.ms(s.max()));
      td(neg > 0 ? "neg" : "", String.valueOf(neg));
      td("wrap", Definitions.TERMS.getOrDefault(name, ""));
      b.append("</tr>");
    }
    b.append("</table></section>");
  }

  private static String swatch(String name) {
    return "<span class=\"sw\" style=\"background:"
        + COLORS.getOrDefault(name, "#888")
        + "\"></span>";
  }

  private void legend(List<String> names, List<String> colors) {
    b.append(Html.legend(names, colors));
  }

  // ---------------------------------------------------------------- CDFs

  private void cdfs() {
    b.append("<section id=\"cdf\"><h2>Latency distributions</h2>")
        .append("<p class=\"muted\">Cumulative share of requests at or under each latency.")
        .append(" Log-scaled time axis; a panel whose values go below zero (a negative")
        .append(" envelope) is drawn on a linear axis instead, zero marked.</p>")
        .append("<div class=\"grid2\">");
    cdf("End to end", List.of("client_total", "client_ttft", "server_root", "server_ttft"));
    cdf("Inside the proxy", withUnattributed(Phases.SERVER_ROOT.parts()));
    cdf("Per token", List.of("tpot", "itl"));
    cdf(
        "Envelopes and client overhead",
        List.of("network_envelope", "ttft_envelope", "transport_setup", "schedule_lag"));
    if (m.stats.count("connect") > 0) {
      // transport_setup's parts, from the requests that opened a connection.
      cdf("Connection set-up (new connections)", List.of("dns", "connect", "tls"));
    }
    b.append("</div></section>");
  }

  private static double[] quantileGrid() {
    List<Double> q = new ArrayList<>();
    for (int i = 0; i <= 196; i++) {
      q.add(i / 200.0);
    }
    for (double t : new double[] {0.985, 0.99, 0.995, 0.999, 0.9999, 1.0}) {
      q.add(t);
    }
    return q.stream().mapToDouble(Double::doubleValue).toArray();
  }

  private void cdf(String title, List<String> names) {
    double[] qs = quantileGrid();
    List<String> shown = new ArrayList<>();
    List<double[]> values = new ArrayList<>();
    double min = Double.POSITIVE_INFINITY;
    double minPositive = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    for (String name : names) {
      if (m.stats.count(name) == 0 || !m.in.applicable(name)) {
        continue;
      }
      double[] v = new double[qs.length];
      for (int i = 0; i < qs.length; i++) {
        v[i] = m.stats.quantileMs(name, qs[i]);
        min = Math.min(min, v[i]);
        max = Math.max(max, v[i]);
        if (v[i] > 0) {
          minPositive = Math.min(minPositive, v[i]);
        }
      }
      shown.add(name);
      values.add(v);
    }
    b.append("<figure><figcaption>").append(Html.esc(title)).append("</figcaption>");
    if (shown.isEmpty()) {
      boolean none = names.stream().noneMatch(m.in::applicable);
      b.append("<p class=\"muted\">")
          .append(
              none
                  ? "Not applicable to " + Html.esc(m.in.api().key()) + "."
                  : "No values recorded.")
          .append("</p></figure>");
      return;
    }
    boolean log = min >= 0 && max > 0;
    Svg.Axis x =
        log
            ? new Svg.Axis(
                minPositive,
                max,
                true,
                min == 0 ? "latency (log scale; zero at the left edge)" : "latency (log scale)",
                Html::msTick)
            : Svg.Axis.linear(min, max, "latency (linear: values below zero)", Html::msTick);
    Svg.Axis y = new Svg.Axis(0, 1, false, "share of requests", v -> Math.round(v * 100) + "%");
    Svg svg = new Svg(560, 300, x, y, title + " latency CDF");
    List<String> colors = new ArrayList<>();
    for (int i = 0; i < shown.size(); i++) {
      String name = shown.get(i);
      String color = COLORS.get(name);
      colors.add(color);
      PhaseStats.Summary s = m.stats.summary(name);
      svg.polyline(
          values.get(i),
          qs,
          color,
          2,
          null,
          String.format(
              Locale.ROOT,
              "%s: p50 %s ms, p95 %s ms, p99 %s ms",
              name,
              Html.ms(s.p50()),
              Html.ms(s.p95()),
              Html.ms(s.p99())));
    }
    b.append(svg);
    List<String> labels = new ArrayList<>();
    for (String name : shown) {
      PhaseStats.Summary s = m.stats.summary(name);
      long neg = m.stats.negativeCount(name);
      labels.add(
          name + "  p95 " + Html.ms(s.p95()) + " ms" + (neg > 0 ? "  (" + neg + " negative)" : ""));
    }
    legend(labels, colors);
    b.append("</figure>");
  }

  // ---------------------------------------------------------------- over time

  private static final List<String> STACK =
      List.of("gateway", "receive", "queue", "generation", "write", "network_envelope");

  private void overTime() {
    b.append("<section id=\"over-time\"><h2>Phase breakdown over time</h2>")
        .append("<p class=\"muted\">Mean of each part per ")
        .append(
            m.timeSeries.isEmpty()
                ? "interval"
                : Html.trim(m.timeSeries.get(0).widthSeconds()) + " s")
        .append(" of intended start, over joined successful requests. The parts stack to the")
        .append(" mean client total (dashed line): a growing band names the phase that grew.")
        .append(" A negative mean envelope is drawn below zero.</p>");
    List<TimePoint> ts = m.timeSeries;
    boolean any = ts.stream().anyMatch(t -> t.joinedOk() > 0);
    if (!any) {
      b.append("<p class=\"muted\">No joined successful requests: nothing to take apart.</p>");
    } else {
      int n = ts.size();
      double[] xs = new double[2 * n];
      double[][] parts = new double[STACK.size()][2 * n];
      double[] total = new double[2 * n];
      double top = 0;
      double bottom = 0;
      for (int i = 0; i < n; i++) {
        TimePoint t = ts.get(i);
        xs[2 * i] = t.startSeconds();
        xs[2 * i + 1] = t.startSeconds() + t.widthSeconds();
        double[] v = {
          t.gatewayMs(),
          t.receiveAndUnattributedMs(),
          t.queueMs(),
          t.generationMs(),
          t.writeMs(),
          t.networkEnvelopeMs()
        };
        double sum = 0;
        for (int k = 0; k < v.length; k++) {
          double val = t.joinedOk() == 0 ? 0 : v[k];
          parts[k][2 * i] = val;
          parts[k][2 * i + 1] = val;
          sum += Math.max(0, val);
          bottom = Math.min(bottom, val);
        }
        top =
            Math.max(
                top, Math.max(sum, Double.isFinite(t.clientTotalMs()) ? t.clientTotalMs() : 0));
        total[2 * i] = t.clientTotalMs();
        total[2 * i + 1] = t.clientTotalMs();
      }
      double end = Math.max(m.in.durationSeconds(), xs[2 * n - 1]);
      Svg.Axis x = Svg.Axis.time(end, "seconds since the run started (intended start)");
      Svg.Axis y = Svg.Axis.linear(bottom, top * 1.05, "mean per request", Html::msTick);
      Svg svg = new Svg(1140, 330, x, y, "phase breakdown over time");
      double[] lower = new double[2 * n];
      List<String> labels = new ArrayList<>();
      List<String> colors = new ArrayList<>();
      for (int k = 0; k < STACK.size(); k++) {
        double[] upper = new double[2 * n];
        double[] base = new double[2 * n];
        double[] neg = new double[2 * n];
        boolean negatives = false;
        for (int j = 0; j < 2 * n; j++) {
          double v = parts[k][j];
          upper[j] = lower[j] + Math.max(0, v);
          neg[j] = Math.min(0, v);
          negatives |= v < 0;
        }
        String name = STACK.get(k);
        String label = name.equals("receive") ? "receive + unattributed" : name;
        svg.area(xs, lower, upper, COLORS.get(name), label);
        if (negatives) {
          svg.area(xs, base, neg, COLORS.get(name), label + " (negative)");
        }
        lower = upper;
        labels.add(label);
        colors.add(COLORS.get(name));
      }
      svg.polyline(xs, total, "#111", 1.5, "5,3", "mean client_total");
      labels.add("mean client_total (dashed)");
      colors.add("#111");
      b.append("<figure><figcaption>Where the time went, by second</figcaption>").append(svg);
      legend(labels, colors);
      b.append("</figure>");
    }
    requestsOverTime(ts);
    b.append("</section>");
  }

  private void requestsOverTime(List<TimePoint> ts) {
    if (ts.isEmpty()) {
      return;
    }
    double width = ts.get(0).widthSeconds();
    long maxStarted = ts.stream().mapToLong(TimePoint::started).max().orElse(0);
    double end = Math.max(m.in.durationSeconds(), ts.get(ts.size() - 1).startSeconds() + width);
    Svg.Axis x = Svg.Axis.time(end, "seconds since the run started");
    Svg.Axis y = Svg.Axis.linear(0, Math.max(1, maxStarted), "requests", Html::trim);
    Svg svg = new Svg(1140, 190, x, y, "requests per interval");
    for (TimePoint t : ts) {
      double x0 = t.startSeconds() + width * 0.08;
      double x1 = t.startSeconds() + width * 0.92;
      if (t.started() > 0) {
        svg.box(
            x0,
            0,
            x1,
            t.started(),
            "#9ec5e8",
            t.started() + " started at " + Html.trim(t.startSeconds()) + " s");
      }
      if (t.failed() > 0) {
        svg.box(
            x0,
            0,
            x1,
            t.failed(),
            "#c62828",
            t.failed() + " failed at " + Html.trim(t.startSeconds()) + " s");
      }
    }
    b.append("<figure><figcaption>Requests scheduled per interval</figcaption>").append(svg);
    legend(List.of("started", "failed"), List.of("#9ec5e8", "#c62828"));
    b.append("</figure>");
  }

  // ---------------------------------------------------------------- steps

  private static final List<String> KNEE =
      List.of(
          "client_total",
          "client_ttft",
          "network_envelope",
          "gateway",
          "queue",
          "generation",
          "write",
          "tpot");

  private void steps() {
    List<ReportModel.Step> steps = m.steps;
    b.append("<section id=\"steps\"><h2>Steps: phase growth at the knee</h2>");
    if (steps.isEmpty()) {
      b.append("<p class=\"muted\">No steps recorded.</p></section>");
      return;
    }
    boolean byRate = steps.stream().allMatch(s -> s.info().offeredRate() > 0);
    boolean byConcurrency = !byRate && steps.stream().allMatch(s -> s.info().concurrency() > 0);
    String xTitle = byRate ? "offered rate (req/s)" : byConcurrency ? "concurrency" : "step";
    double[] xs = new double[steps.size()];
    for (int i = 0; i < xs.length; i++) {
      ReportModel.Step s = steps.get(i);
      xs[i] =
          byRate
              ? s.info().offeredRate()
              : byConcurrency ? s.info().concurrency() : s.info().index() + 1;
    }
    double xMax = 0;
    for (double v : xs) {
      xMax = Math.max(xMax, v);
    }
    b.append("<p class=\"muted\">p95 of each phase per step (log scale): the phase whose line")
        .append(" bends up first owns the knee. Right: the rate the client achieved against")
        .append(" what it offered; a point under the diagonal means the load did not arrive as")
        .append(" asked (dropped or late).</p><div class=\"grid2\">");

    List<String> knee = KNEE.stream().filter(m.in::applicable).toList();
    double min = Double.POSITIVE_INFINITY;
    double max = 0;
    boolean skippedNegative = false;
    List<double[]> ys = new ArrayList<>();
    List<String> names = new ArrayList<>();
    for (String name : knee) {
      double[] y = new double[steps.size()];
      boolean any = false;
      for (int i = 0; i < y.length; i++) {
        y[i] = steps.get(i).stats().summary(name).p95();
        if (Double.isFinite(y[i]) && y[i] <= 0) {
          skippedNegative |= y[i] < 0;
          y[i] = Double.NaN;
        }
        if (Double.isFinite(y[i])) {
          any = true;
          min = Math.min(min, y[i]);
          max = Math.max(max, y[i]);
        }
      }
      if (any) {
        ys.add(y);
        names.add(name);
      }
    }
    b.append("<figure><figcaption>p95 per phase by step</figcaption>");
    if (names.isEmpty()) {
      b.append("<p class=\"muted\">No successful requests.</p>");
    } else {
      Svg.Axis x = Svg.Axis.linear(0, xMax * 1.05, xTitle, Html::trim);
      Svg.Axis y = new Svg.Axis(min, max, true, "p95 (log scale)", Html::msTick);
      Svg svg = new Svg(560, 320, x, y, "p95 per phase by step");
      List<String> colors = new ArrayList<>();
      for (int k = 0; k < names.size(); k++) {
        String color = COLORS.get(names.get(k));
        colors.add(color);
        svg.polyline(xs, ys.get(k), color, 2, null, names.get(k) + " p95");
        for (int i = 0; i < xs.length; i++) {
          svg.dot(
              xs[i],
              ys.get(k)[i],
              color,
              names.get(k) + " p95 " + Html.ms(ys.get(k)[i]) + " ms at " + Html.trim(xs[i]));
        }
      }
      if (skippedNegative) {
        svg.note("a negative p95 is not drawn on a log axis; see the table");
      }
      b.append(svg);
      legend(names, colors);
    }
    b.append("</figure>");

    double rMax = 0;
    for (ReportModel.Step s : steps) {
      rMax =
          Math.max(
              rMax,
              Math.max(
                  s.info().offeredRate(),
                  Double.isFinite(s.achievedRate()) ? s.achievedRate() : 0));
    }
    Svg.Axis x = Svg.Axis.linear(0, xMax * 1.05, xTitle, Html::trim);
    Svg.Axis y = Svg.Axis.linear(0, Math.max(rMax, 1) * 1.1, "requests per second", Html::trim);
    Svg svg = new Svg(560, 320, x, y, "achieved against offered rate");
    if (byRate) {
      svg.line(svg.px(0), svg.py(0), svg.px(xMax * 1.05), svg.py(xMax * 1.05), "#9aa3ad", 1, "4,3");
    }
    double[] achieved = steps.stream().mapToDouble(ReportModel.Step::achievedRate).toArray();
    double[] okRate = steps.stream().mapToDouble(ReportModel.Step::okRate).toArray();
    svg.polyline(xs, achieved, "#1f77b4", 2, null, "achieved (started per second)");
    svg.polyline(xs, okRate, "#2ca02c", 2, "5,3", "succeeded per second");
    for (int i = 0; i < xs.length; i++) {
      svg.dot(xs[i], achieved[i], "#1f77b4", "achieved " + Html.rate(achieved[i]) + "/s");
      svg.dot(xs[i], okRate[i], "#2ca02c", "succeeded " + Html.rate(okRate[i]) + "/s");
    }
    b.append("<figure><figcaption>Achieved against offered</figcaption>").append(svg);
    legend(
        byRate
            ? List.of("started per second", "succeeded per second", "offered (diagonal)")
            : List.of("started per second", "succeeded per second"),
        byRate ? List.of("#1f77b4", "#2ca02c", "#9aa3ad") : List.of("#1f77b4", "#2ca02c"));
    b.append("</figure></div>");

    boolean closed = steps.stream().anyMatch(s -> s.info().concurrency() > 0);
    b.append("<div class=\"scroll\" style=\"margin-top:12px\"><table><tr><th>step</th>")
        .append(byRate ? "<th>offered /s</th>" : "")
        .append(closed ? "<th>concurrency</th>" : "")
        .append("<th>achieved /s</th><th>ok /s</th><th>sent</th>")
        .append("<th>dropped</th><th>join</th>");
    for (String name : knee) {
      b.append("<th>").append(Html.esc(name.replace("_", " "))).append(" p95</th>");
    }
    b.append("</tr>");
    for (ReportModel.Step s : steps) {
      b.append("<tr>");
      td("", String.valueOf(s.info().index() + 1));
      if (byRate) {
        td("", Html.rate(s.info().offeredRate()));
      }
      if (closed) {
        td("", s.info().concurrency() > 0 ? String.valueOf(s.info().concurrency()) : "\u2013");
      }
      td("", Html.rate(s.achievedRate()));
      td("", Html.rate(s.okRate()));
      td("", String.valueOf(s.info().sent()));
      td(s.info().dropped() > 0 ? "neg" : "", String.valueOf(s.info().dropped()));
      td("", Html.pct(s.stats().joinCoverage()));
      for (String name : knee) {
        double v = s.stats().summary(name).p95();
        td(v < 0 ? "neg" : "", Html.ms(v));
      }
      b.append("</tr>");
    }
    b.append("</table></div><p class=\"muted\">Phase columns in milliseconds.</p></section>");
  }

  // ---------------------------------------------------------------- slowest

  /**
   * A request's end-to-end time in the order of its life: the catalogue's parts of client_total.
   */
  private static final List<String> PARTS = withUnattributed(Phases.CLIENT_TOTAL.parts());

  /** The catalogue's parts of a sum, then what the proxy's phases leave unattributed. */
  private static List<String> withUnattributed(List<Phases> parts) {
    List<String> keys = new ArrayList<>(PhaseStats.keys(parts));
    keys.add(Phases.UNATTRIBUTED.key());
    return List.copyOf(keys);
  }

  private void slowest() {
    b.append("<section id=\"slowest\"><h2>The slowest requests, reconciled</h2>");
    if (m.slowest.isEmpty()) {
      b.append("<p class=\"muted\">No successful requests.</p></section>");
      return;
    }
    b.append("<p class=\"muted\">Each client total taken apart: network envelope + gateway +")
        .append(" receive + queue + generation + write + unattributed. The residual is what the")
        .append(" parts leave unexplained (about zero when the join, units and boundaries are")
        .append(" right). Look a trace id up in your tracing backend or at")
        .append(" <code>/admin/records/{trace_id}</code>.</p>");
    double scaleMax = 0;
    double negMax = 0;
    for (SlowRequest r : m.slowest) {
      double pos = 0;
      double neg = 0;
      for (SlowRequest.Part p : r.parts()) {
        if (Double.isFinite(p.ms())) {
          pos += Math.max(0, p.ms());
          neg += Math.min(0, p.ms());
        }
      }
      scaleMax = Math.max(scaleMax, Math.max(pos, r.clientTotalMs()));
      negMax = Math.max(negMax, -neg);
    }
    b.append(
            "<div class=\"scroll\"><table class=\"compact\"><tr><th>#</th><th class=\"l\">trace id</th><th>step</th>")
        .append("<th>client total</th><th class=\"l\">breakdown</th>");
    for (String p : PARTS) {
      b.append("<th>")
          .append(Html.esc(p.equals("network_envelope") ? "envelope" : p))
          .append("</th>");
    }
    b.append("<th>server root</th><th>residual</th></tr>");
    int rank = 1;
    for (SlowRequest r : m.slowest) {
      b.append("<tr>");
      td("", String.valueOf(rank++));
      b.append("<td class=\"l mono\">").append(Html.esc(r.traceId())).append("</td>");
      td("", String.valueOf(r.step() + 1));
      td("", Html.ms(r.clientTotalMs()));
      b.append("<td class=\"l\">").append(breakdownBar(r, scaleMax, negMax)).append("</td>");
      for (SlowRequest.Part p : r.parts()) {
        td(p.ms() < 0 ? "neg" : "", Html.ms(p.ms()));
      }
      td("", Html.ms(r.serverRootMs()));
      td("", Html.ms(r.residualMs()));
      b.append("</tr>");
    }
    b.append("</table></div>");
    legend(PARTS, PARTS.stream().map(COLORS::get).toList());
    b.append("<p class=\"muted\">All figures in milliseconds. A request that did not join a")
        .append(" proxy record has only its client total.</p></section>");
  }

  private static String breakdownBar(SlowRequest r, double scaleMax, double negMax) {
    int w = 200;
    int h = 14;
    double total = scaleMax + negMax;
    if (!(total > 0)) {
      return "";
    }
    double k = w / total;
    double zero = negMax * k;
    StringBuilder s = new StringBuilder();
    s.append(
        String.format(
            Locale.ROOT,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0"
                + " %d %d\" role=\"img\" aria-label=\"breakdown\">",
            w,
            h,
            w,
            h));
    if (!r.joined()) {
      s.append(
          String.format(
              Locale.ROOT,
              "<rect x=\"%.1f\" y=\"2\" width=\"%.1f\" height=\"10\" fill=\"#dde1e6\"><title>not"
                  + " joined: client total only</title></rect>",
              zero,
              Math.max(0.5, r.clientTotalMs() * k)));
    } else {
      double x = zero;
      for (SlowRequest.Part p : r.parts()) {
        if (!Double.isFinite(p.ms()) || p.ms() == 0) {
          continue;
        }
        String title = Html.esc(p.name() + " " + Html.ms(p.ms()) + " ms");
        if (p.ms() < 0) {
          double pw = -p.ms() * k;
          s.append(
              String.format(
                  Locale.ROOT,
                  "<rect x=\"%.1f\" y=\"1\" width=\"%.1f\" height=\"12\" fill=\"%s\""
                      + " stroke=\"#c62828\"><title>%s (negative)</title></rect>",
                  zero - pw,
                  Math.max(0.5, pw),
                  COLORS.get(p.name()),
                  title));
        } else {
          double pw = p.ms() * k;
          s.append(
              String.format(
                  Locale.ROOT,
                  "<rect x=\"%.1f\" y=\"2\" width=\"%.1f\" height=\"10\" fill=\"%s\"><title>%s"
                      + "</title></rect>",
                  x,
                  Math.max(0.5, pw),
                  COLORS.get(p.name()),
                  title));
          x += pw;
        }
      }
    }
    if (negMax > 0) {
      s.append(
          String.format(
              Locale.ROOT,
              "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"14\" stroke=\"#333\"/>",
              zero,
              zero));
    }
    return s.append("</svg>").toString();
  }

  // ---------------------------------------------------------------- conditions, definitions

  private void conditions() {
    b.append("<section id=\"conditions\"><h2>Conditions</h2>");
    if (m.in.conditions().isEmpty()) {
      b.append("<p class=\"muted\">None recorded.</p></section>");
      return;
    }
    b.append("<table><tr><th class=\"l\">condition</th><th class=\"l\">value</th></tr>");
    for (Map.Entry<String, Object> e : m.in.conditions().entrySet()) {
      b.append("<tr>");
      td("l", e.getKey());
      Object v = e.getValue();
      boolean missing = v == null || (v instanceof Double d && !Double.isFinite(d));
      td("wrap", missing ? "\u2013" : String.valueOf(v));
      b.append("</tr>");
    }
    b.append("</table></section>");
  }

  private void definitions() {
    b.append("<section id=\"definitions\"><h2>Definitions</h2><p>")
        .append(Html.esc(Definitions.NOTE))
        .append("</p><table><tr><th class=\"l\">name</th><th class=\"l\">definition</th></tr>");
    for (Map.Entry<String, String> e : Definitions.TERMS.entrySet()) {
      b.append("<tr>");
      td("l", e.getKey());
      td("wrap", e.getValue());
      b.append("</tr>");
    }
    b.append("</table></section>");
  }
}
