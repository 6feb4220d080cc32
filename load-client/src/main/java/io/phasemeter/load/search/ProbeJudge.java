package io.phasemeter.load.search;

import com.fasterxml.jackson.databind.JsonNode;
import io.phasemeter.core.Phases;
import io.phasemeter.load.LoadRun;
import io.phasemeter.load.report.PhaseStats;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Judges one probe from what its run wrote (summary.json) and its exit code: pass, fail or invalid,
 * with the reasons and the margin the confirmation interpolates.
 *
 * <p>It <b>fails</b> when the deployment did not hold: a latency budget breached, the attainment of
 * the objectives below the minimum, the error rate above its limit, requests timing out, iterations
 * dropped at the in-flight cap (the open model's load could not be offered), or, above the first
 * probe, nothing succeeding. It is <b>invalid</b> when the measurement cannot be trusted: nothing
 * sent, no report, the client erroring, join coverage under the budgets' minimum, a later probe's
 * exit 2 (the arguments were good at the first: the environment, e.g. the admin feed not
 * answering), or the client late on its own schedule (schedule_lag p95 over {@value
 * #SCHEDULE_LAG_LIMIT_MS} ms, or a schedule_lag budget breached) unless the deployment failed on
 * something the client's lateness cannot explain: a server-side budget, errors, timeouts, drops,
 * nothing succeeding, or the attainment below the minimum (a late client offered less than asked,
 * so a deployment that gave way under it gives way at the load asked). A probe that failed only on
 * budgets of the client's own phases (client_ttft, client_total, …) is then invalid: the client's
 * busy event loop may have made them. It is <b>fatal</b> on bad input (the first probe's exit 2)
 * and when nothing succeeded at the very first probe.
 *
 * <p>The margin is the smallest of: {@code (1 − quantile) − share above the limit} per latency
 * budget (judged on exact counts) and {@code attainment − min_attainment}; a probe that failed on
 * its error rate, drops or timeouts adds {@code limit − error rate} and minus the share dropped or
 * timed out (only then: a constant headroom of the error rate would pull every crossing towards the
 * pass). It is at or above 0 exactly when the probe passes on those criteria.
 */
final class ProbeJudge {
  /** Above this p95 of schedule_lag the client did not keep its own schedule. */
  static final double SCHEDULE_LAG_LIMIT_MS = 50;

  private final Map<String, Double> quantiles;
  private final double minAttainment;

  /**
   * @param quantiles each budget's quantile by its name (summary.json's budget results name the
   *     budget, not its quantile)
   * @param minAttainment the share of requests that must meet every objective, when there are
   *     objectives
   */
  ProbeJudge(Map<String, Double> quantiles, double minAttainment) {
    this.quantiles = Map.copyOf(quantiles);
    this.minAttainment = minAttainment;
  }

  /**
   * What one run left behind.
   *
   * @param summary its summary.json, or null when it wrote none
   * @param clientError what went wrong in the client, or null
   * @param logReasons the run's own reasons, from its log (INVALID RUN lines, the last lines)
   * @param first whether this is the very first probe of the search
   */
  record Run(
      int index,
      double load,
      Probe.Stage stage,
      int block,
      Path dir,
      int exitCode,
      JsonNode summary,
      String clientError,
      List<String> logReasons,
      boolean first) {}

  Probe judge(Run run) {
    List<String> fail = new ArrayList<>();
    List<String> invalid = new ArrayList<>();
    List<String> notes = new ArrayList<>();
    List<Double> margins = new ArrayList<>();
    List<Probe.Breach> breaches = new ArrayList<>();
    JsonNode s = run.summary();
    if (run.exitCode() == LoadRun.USAGE) {
      // Every probe runs the same arguments: only the first one's exit 2 is bad input; later it
      // is the environment (the admin feed not answering in time), invalid and repeated once.
      List<String> why = run.logReasons().isEmpty() ? List.of("exit 2") : run.logReasons();
      return probe(run, Probe.Verdict.INVALID, why, Double.NaN, breaches, run.first(), notes);
    }
    if (s == null) {
      invalid.add(
          "the client errored: "
              + (run.clientError() != null
                  ? run.clientError()
                  : "exit "
                      + run.exitCode()
                      + ", no report written"
                      + (run.logReasons().isEmpty()
                          ? ""
                          : " (" + String.join("; ", run.logReasons()) + ")")));
      return probe(run, Probe.Verdict.INVALID, invalid, Double.NaN, breaches, false, notes);
    }
    JsonNode req = s.path("requests");
    long sent = req.path("sent").asLong(0);
    long ok = req.path("ok").asLong(0);
    long dropped = req.path("dropped").asLong(0);
    double errorRate = num(req.path("error_rate"));
    if (sent == 0) {
      invalid.add("no request was sent");
      return probe(run, Probe.Verdict.INVALID, invalid, Double.NaN, breaches, false, notes);
    }
    if (ok == 0) {
      String why =
          "no request succeeded (" + (sent - ok) + " of " + sent + " failed" + topFailure(s) + ")";
      if (run.first()) {
        // A wrong --model or --url: the run's own reasons, not a capacity of 0.
        List<String> reasons = new ArrayList<>(List.of(why));
        reasons.addAll(run.logReasons());
        return probe(run, Probe.Verdict.INVALID, reasons, Double.NaN, breaches, true, notes);
      }
      fail.add(why);
      margins.add(-1.0);
    }
    boolean serverBreached = false;
    List<String> late = new ArrayList<>();
    for (JsonNode b : s.path("budgets")) {
      String phase = b.path("phase").asText();
      boolean breached = b.path("breached").asBoolean(false);
      if (b.path("breached").isNull()) {
        continue; // not applicable to the run's API
      }
      double limit = num(b.path("limit_ms"));
      double observed = num(b.path("observed_ms"));
      if (phase.equals("join_coverage")) {
        if (breached) {
          invalid.add(
              String.format(
                  Locale.ROOT,
                  "join coverage %s is below the budgets' min_join_coverage %s",
                  Format.pct(observed),
                  Format.pct(limit)));
        }
        continue;
      }
      if (phase.equals("error_rate")) {
        if (breached) {
          serverBreached = true; // errors: the client's lateness does not explain them
          margins.add(limit - observed);
          fail.add(
              String.format(
                  Locale.ROOT,
                  "error rate %s is above the budgets' max_error_rate %s",
                  Format.pct(observed),
                  Format.pct(limit)));
        }
        continue;
      }
      double q = quantiles.getOrDefault(b.path("name").asText(), 0.95);
      double share = num(b.path("over_limit_share"));
      double margin;
      if (Double.isFinite(share)) {
        margin = (1 - q) - share;
      } else if (Double.isFinite(observed)) {
        // Only the quantile was compared (no exact counts): its relative distance, scaled.
        margin = (1 - q) * (1 - observed / limit);
      } else {
        continue; // nothing observed
      }
      if (phase.equals("schedule_lag")) {
        if (breached) {
          late.add(
              String.format(
                  Locale.ROOT,
                  "the client could not keep its schedule: schedule_lag p%s %s is over its"
                      + " budget's %s",
                  Format.quantile(q),
                  Format.ms(observed),
                  Format.ms(limit)));
        }
        continue;
      }
      margins.add(margin);
      if (breached) {
        breaches.add(
            new Probe.Breach(b.path("name").asText(), phase, limit, q, observed, share, -margin));
        serverBreached |= serverSide(phase);
      }
    }
    breaches.sort(Comparator.comparingDouble(Probe.Breach::excess).reversed());
    for (Probe.Breach b : breaches) {
      fail.add(breachText(b));
    }
    double allowed = num(s.path("conditions").path("max_error_rate"));
    if (Double.isFinite(allowed) && Double.isFinite(errorRate)) {
      if (errorRate > allowed) {
        margins.add(allowed - errorRate);
        fail.add(
            String.format(
                Locale.ROOT,
                "error rate %s (%d of %d requests sent failed%s) is above --max-error-rate %s",
                Format.pct(errorRate),
                sent - ok,
                sent,
                topFailure(s),
                Format.pct(allowed)));
      }
    }
    long timeouts = failures(s, "TIMEOUT");
    if (timeouts > 0) {
      margins.add(-(double) timeouts / sent);
      fail.add(timeouts + " of " + sent + " requests timed out (--timeout)");
    }
    if (dropped > 0) {
      margins.add(-(double) dropped / (sent + dropped));
      fail.add(
          "overload: "
              + dropped
              + " iterations dropped at --max-in-flight "
              + s.path("conditions").path("max_in_flight").asText("?")
              + ", the offered load could not be kept");
    }
    JsonNode g = s.path("goodput");
    double attainment = Double.NaN;
    if (g.isObject()) {
      attainment = num(g.path("attainment"));
      if (Double.isFinite(attainment)) {
        margins.add(attainment - minAttainment);
        if (attainment < minAttainment) {
          fail.add(
              String.format(
                  Locale.ROOT,
                  "attainment %s is below %s (missed: %s)",
                  Format.pct(attainment),
                  Format.pct(minAttainment),
                  missedText(g.path("missed"))));
        }
      }
    }
    double lag = num(s.path("phases").path("schedule_lag").path("p95_ms"));
    if (lag > SCHEDULE_LAG_LIMIT_MS) {
      late.add(
          String.format(
              Locale.ROOT,
              "the client ran late on its own schedule: schedule_lag p95 %s (over %s)",
              Format.ms(lag),
              Format.ms(SCHEDULE_LAG_LIMIT_MS)));
    }
    boolean deploymentFailed =
        serverBreached
            || dropped > 0
            || timeouts > 0
            || ok == 0
            || errorRate > allowed
            || attainment < minAttainment
            || breaches.isEmpty() && !fail.isEmpty();
    for (String text : late) {
      if (deploymentFailed) {
        notes.add(text + "; the deployment's own failure stands");
      } else {
        invalid.add(text);
      }
    }
    if (run.exitCode() == LoadRun.BREACHED && fail.isEmpty() && invalid.isEmpty()) {
      fail.add("a budget was breached (exit 3; see the run's log)");
    }
    double margin = margins.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
    if (!invalid.isEmpty()) {
      return probe(run, Probe.Verdict.INVALID, invalid, Double.NaN, breaches, false, notes);
    }
    if (!fail.isEmpty()) {
      return probe(run, Probe.Verdict.FAIL, fail, margin, breaches, false, notes);
    }
    if (run.exitCode() != LoadRun.OK) {
      // The run saw a reason this reading did not: keep its word, as a failure.
      return probe(
          run,
          Probe.Verdict.FAIL,
          List.of("exit " + run.exitCode() + " (" + String.join("; ", run.logReasons()) + ")"),
          margin,
          breaches,
          false,
          notes);
    }
    return probe(run, Probe.Verdict.PASS, List.of(), margin, breaches, false, notes);
  }

  private Probe probe(
      Run run,
      Probe.Verdict verdict,
      List<String> reasons,
      double margin,
      List<Probe.Breach> breaches,
      boolean fatal,
      List<String> notes) {
    JsonNode s = run.summary();
    Map<String, Double> p95 = new LinkedHashMap<>();
    Map<String, Long> missed = new LinkedHashMap<>();
    double attainment = Double.NaN;
    double goodput = Double.NaN;
    double throughput = Double.NaN;
    double tokens = Double.NaN;
    if (s != null) {
      for (String name : PhaseStats.NAMES) {
        double v = num(s.path("phases").path(name).path("p95_ms"));
        if (Double.isFinite(v)) {
          p95.put(name, v);
        }
      }
      throughput = num(s.path("request_throughput"));
      tokens = num(s.path("output_token_throughput"));
      JsonNode g = s.path("goodput");
      if (g.isObject()) {
        attainment = num(g.path("attainment"));
        goodput = num(g.path("request_goodput"));
        for (Iterator<Map.Entry<String, JsonNode>> it = g.path("missed").fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> e = it.next();
          missed.put(e.getKey(), e.getValue().asLong(0));
        }
      }
    }
    return new Probe(
        run.index(),
        run.load(),
        run.stage(),
        run.block(),
        verdict,
        reasons,
        verdict == Probe.Verdict.INVALID ? Double.NaN : margin,
        p95,
        attainment,
        throughput,
        tokens,
        goodput,
        missed,
        breaches,
        run.dir(),
        run.exitCode(),
        fatal,
        notes);
  }

  /** Whether the proxy or the engine observes the phase (the client's own do not count). */
  static boolean serverSide(String phase) {
    return Phases.fromKey(phase)
        .map(
            p ->
                switch (p.source()) {
                  case PIPELINE, PROXY, ENGINE -> true;
                  default -> false;
                })
        .orElse(false);
  }

  static String breachText(Probe.Breach b) {
    String observed =
        String.format(
            Locale.ROOT,
            "%s p%s %s > %s",
            b.phase(),
            Format.quantile(b.quantile()),
            Format.ms(b.observedMs()),
            Format.ms(b.limitMs()));
    if (!Double.isFinite(b.overLimitShare())) {
      return observed + " (budget " + b.budget() + ")";
    }
    return observed
        + String.format(
            Locale.ROOT,
            " (%s of requests above the limit, %s allowed; budget %s)",
            Format.pct(b.overLimitShare()),
            Format.pct(1 - b.quantile()),
            b.budget());
  }

  private static String missedText(JsonNode missed) {
    List<String> parts = new ArrayList<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = missed.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      if (e.getValue().asLong(0) > 0) {
        parts.add(e.getKey() + " " + e.getValue().asLong());
      }
    }
    return parts.isEmpty() ? "none named" : String.join(", ", parts);
  }

  /** Requests that failed with {@code errorClass}, from summary.json's failures. */
  private static long failures(JsonNode s, String errorClass) {
    long n = 0;
    for (JsonNode r : s.path("failures").path("reasons")) {
      if (errorClass.equals(r.path("class").asText())) {
        n += r.path("count").asLong(0);
      }
    }
    return n;
  }

  private static String topFailure(JsonNode s) {
    JsonNode first = s.path("failures").path("reasons").path(0);
    if (first.isMissingNode()) {
      return "";
    }
    String reason = first.path("reason").asText("");
    return "; most often "
        + first.path("class").asText()
        + (reason.isEmpty() ? "" : " " + reason)
        + " ×"
        + first.path("count").asLong();
  }

  static double num(JsonNode n) {
    return n != null && n.isNumber() ? n.asDouble() : Double.NaN;
  }
}
