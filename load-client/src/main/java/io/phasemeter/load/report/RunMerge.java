package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.core.budget.LatencyLimit;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.workload.Api;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;
import org.HdrHistogram.HistogramLogWriter;

/**
 * Merges the output directories of several load-client instances that ran at the same time (a
 * Kubernetes Job with parallelism, several machines) into one: the phases' HdrHistograms are added
 * — quantiles of the merged run come from the merged histograms, never from averaging each
 * instance's percentiles — the pairs are concatenated with the instance they came from, request
 * counts and join counters are summed, and every trace id must be unique across the inputs (two
 * instances sharing one would make both joins untrustworthy).
 *
 * <p>Latency budgets are judged as a run judges them, on exact counts of the values above each
 * limit ({@link ClientBudgets}), from the first source that has them for the phase and limit: every
 * instance's summary.json (its {@code at_or_below} and {@code count}, to the nanosecond, summed);
 * else the merged pairs.csv (its per-request values, to the microsecond it keeps them); else, for a
 * phase that only the histograms hold (itl, the engine's split), the merged quantile compared with
 * the limit, which the merged summary says ({@code basis: "quantile"} and {@code budgets_note}).
 */
public final class RunMerge {
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  /** Why a merge could not be done; {@code exitCode} 2 bad input, 4 colliding trace ids. */
  public static final class MergeException extends Exception {
    private static final long serialVersionUID = 1L;
    private final int exitCode;

    MergeException(int exitCode, String message) {
      super(message);
      this.exitCode = exitCode;
    }

    public int exitCode() {
      return exitCode;
    }
  }

  /**
   * The merged run.
   *
   * @param stats every phase, from the merged histograms, with the summed join counters
   * @param requests sent, ok, errors, dropped and invalid, summed
   * @param pairs rows in the merged pairs.csv
   * @param budgets the latency budgets judged on the merged run (empty without budgets)
   * @param basis per budget result, in the same order: where its verdict came from ({@link
   *     #EXACT_SUMMARIES}, {@link #EXACT_PAIRS} or {@link #QUANTILE})
   */
  public record Result(
      PhaseStats stats,
      Map<String, Long> requests,
      long pairs,
      List<BudgetResult> budgets,
      List<String> basis) {
    public boolean breached() {
      return budgets.stream().anyMatch(BudgetResult::breached);
    }

    /** Whether any latency budget was judged on the quantile, not on exact counts. */
    public boolean quantileFallback() {
      return basis.contains(QUANTILE);
    }
  }

  /** Verdict from the instances' exact counts (summary.json), summed: to the nanosecond. */
  public static final String EXACT_SUMMARIES = "exact";

  /** Verdict from counts over the merged pairs.csv: exact to the microsecond it keeps. */
  public static final String EXACT_PAIRS = "pairs.csv";

  /** Verdict from the merged histograms' quantile compared with the limit (1 % resolution). */
  public static final String QUANTILE = "quantile";

  /** No verdict: the runs' API has no such phase (TTFT of embeddings). */
  public static final String NOT_APPLICABLE = "not_applicable";

  /** What the merged summary says when some budget fell back to the quantile. */
  static final String QUANTILE_NOTE =
      "judged by the merged HdrHistogram quantile against the limit (1 % resolution), not by exact"
          + " counts: neither the instances' summary.json nor pairs.csv hold the phase's values;"
          + " within 1 % of the limit this verdict may differ from the run's and the proxy's";

  private RunMerge() {}

  /** Merges {@code inputs} into {@code out}, judging {@code budgets} for the runs' model. */
  public static Result merge(List<Path> inputs, Path out, ClientBudgets budgets)
      throws MergeException, IOException {
    if (inputs.size() < 2) {
      throw new MergeException(2, "give at least two run directories to merge");
    }
    for (Path dir : inputs) {
      for (String f : List.of(ReportWriter.SUMMARY, ReportWriter.PAIRS, ReportWriter.PHASE_LOG)) {
        if (!Files.isRegularFile(dir.resolve(f))) {
          throw new MergeException(
              2, dir + " holds no " + f + " (is it the --out of a phasemeter load run?)");
        }
      }
    }

    // Trace ids first: a collision invalidates the merge, so nothing is written.
    List<String> header = null;
    List<String> rows = new ArrayList<>();
    Map<String, Path> seen = new HashMap<>();
    FailureReasons.Counter failures = new FailureReasons.Counter();
    for (Path dir : inputs) {
      List<String> lines = Files.readAllLines(dir.resolve(ReportWriter.PAIRS));
      if (lines.isEmpty()) {
        throw new MergeException(2, dir.resolve(ReportWriter.PAIRS) + " is empty");
      }
      List<String> h = splitCsv(lines.get(0));
      if (header == null) {
        header = h;
      } else if (!header.equals(h)) {
        throw new MergeException(
            2, dir.resolve(ReportWriter.PAIRS) + " has other columns than the first input's");
      }
      int traceColumn = h.indexOf("trace_id");
      int classColumn = h.indexOf("class");
      int reasonColumn = h.indexOf("invalid_reason");
      for (String line : lines.subList(1, lines.size())) {
        if (line.isEmpty()) {
          continue;
        }
        List<String> fields = splitCsv(line);
        String traceId = fields.get(traceColumn);
        if (classColumn >= 0 && !"NONE".equals(fields.get(classColumn))) {
          failures.add(
              fields.get(classColumn),
              reasonColumn >= 0 ? fields.get(reasonColumn) : null,
              traceId);
        }
        if (!traceId.isEmpty()) {
          Path other = seen.putIfAbsent(traceId, dir);
          if (other != null) {
            throw new MergeException(
                4,
                "trace id "
                    + traceId
                    + " appears in "
                    + other
                    + " and in "
                    + dir
                    + ": the instances' requests cannot be told apart, so their joins with the"
                    + " proxy's records are not trustworthy (each instance must draw its own"
                    + " generator id; were outputs copied, or one run given twice?)");
          }
        }
        rows.add(line + "," + PairsCsv.quote(dir.toString()));
      }
    }

    PhaseStats stats = PhaseStats.create();
    Map<String, Long> requests = new LinkedHashMap<>();
    double achievedRate = 0;
    String model = null;
    String api = null;
    boolean first = true;
    ArrayNode sources = JsonNodeFactory.instance.arrayNode();
    List<Map<String, long[]>> instanceCounts = new ArrayList<>();
    List<JsonNode> goodputs = new ArrayList<>();
    ReplicaMerge replicas = new ReplicaMerge();
    for (Path dir : inputs) {
      JsonNode summary = JSON.readTree(dir.resolve(ReportWriter.SUMMARY).toFile());
      goodputs.add(summary.path("goodput"));
      instanceCounts.add(summaryCounts(summary));
      for (String k : List.of("sent", "ok", "errors", "dropped", "invalid")) {
        requests.merge(k, summary.path("requests").path(k).asLong(), Long::sum);
      }
      JsonNode join = summary.path("join");
      replicas.add(join);
      stats.addCounts(
          join.path("finished").asLong(),
          join.path("ok").asLong(),
          join.path("joined").asLong(),
          join.path("joined_ok").asLong());
      achievedRate += summary.path("achieved_rate").asDouble(0);
      String m = summary.path("conditions").path("model").asText(null);
      if (model != null && m != null && !model.equals(m)) {
        throw new MergeException(2, dir + " ran model " + m + ", the first input " + model);
      }
      model = model == null ? m : model;
      String a = summary.hasNonNull("api") ? summary.get("api").asText() : null;
      if (!first && !java.util.Objects.equals(api, a)) {
        throw new MergeException(
            2, dir + " ran api " + a + ", the first input " + api + ": runs of one API merge");
      }
      api = a;
      first = false;
      ObjectNode src = sources.addObject();
      src.put("dir", dir.toString());
      src.put("sent", summary.path("requests").path("sent").asLong());
      readLog(dir.resolve(ReportWriter.PHASE_LOG), stats);
    }

    Map<String, String> basisOf = new HashMap<>();
    Map<String, long[]> summed = sumCounts(instanceCounts);
    List<String> finalHeader = header;
    ClientBudgets.ExactCounts exact =
        (phase, limitNanos) -> {
          String key = key(phase, limitNanos);
          // Counts that do not cover exactly the values of the merged histogram are not the
          // phase's: a pairs.csv without the phase's values, a summary from another population.
          long values = stats.count(phase);
          long[] c = summed.get(key);
          String basis = EXACT_SUMMARIES;
          if (c == null || c[1] != values) {
            c = pairsCounts(finalHeader, rows, phase, limitNanos);
            basis = EXACT_PAIRS;
            if (c == null || c[1] != values) {
              c = null;
              basis = QUANTILE;
            }
          }
          basisOf.put(key, basis);
          return c;
        };
    Api runApi = api == null ? null : Api.parse(dir(inputs) + " summary.json api", api);
    List<BudgetResult> judged =
        budgets == null || model == null
            ? List.of()
            : ClientBudgets.notApplicable(budgets.judgeLatency(model, stats, exact), runApi);
    List<String> basis = new ArrayList<>();
    for (BudgetResult r : judged) {
      basis.add(
          !r.applicable()
              ? NOT_APPLICABLE
              : basisOf.get(
                  key(ClientBudgets.canonicalKey(r.phase()), LatencyLimit.nanos(r.limitMs()))));
    }
    List<String> notApplicable = runApi == null ? List.of() : runApi.notApplicable();

    Files.createDirectories(out);
    writeLog(out.resolve(ReportWriter.PHASE_LOG), stats);
    try (BufferedWriter w =
        Files.newBufferedWriter(out.resolve(ReportWriter.PAIRS), StandardCharsets.UTF_8)) {
      List<String> outHeader = new ArrayList<>(header);
      outHeader.add("instance");
      w.write(String.join(",", outHeader));
      w.write("\r\n");
      for (String r : rows) {
        w.write(r);
        w.write("\r\n");
      }
    }
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    root.put("v", 1);
    if (api != null) {
      root.put("api", api);
    }
    root.set("merged_from", sources);
    ObjectNode req = root.putObject("requests");
    requests.forEach(req::put);
    // Counted again over the merged pairs.csv: exact, where the instances' top lists are not.
    failures.result().write(root.putObject("failures"));
    putNumber(root, "join_coverage", stats.joinCoverage());
    ObjectNode join = root.putObject("join");
    join.put("ok", stats.okCount());
    join.put("joined_ok", stats.joinedOkCount());
    join.put("finished", stats.startedCount());
    join.put("joined", stats.joinedCount());
    replicas.write(join);
    putNumber(root, "achieved_rate", achievedRate);
    mergeGoodput(root, goodputs);
    root.put("unique_trace_ids", seen.size());
    ObjectNode phases = root.putObject("phases");
    for (String name : PhaseStats.NAMES) {
      if (notApplicable.contains(name)) {
        phases.putNull(name);
        continue;
      }
      PhaseStats.Summary s = stats.summary(name);
      if (s.count() == 0) {
        continue;
      }
      ObjectNode p = phases.putObject(name);
      p.put("count", s.count());
      putNumber(p, "p50_ms", s.p50());
      putNumber(p, "p95_ms", s.p95());
      putNumber(p, "p99_ms", s.p99());
      putNumber(p, "max_ms", s.max());
      p.put("negative", stats.negativeCount(name));
    }
    ArrayNode b = root.putArray("budgets");
    for (int i = 0; i < judged.size(); i++) {
      BudgetResult r = judged.get(i);
      ObjectNode o = b.addObject();
      o.put("name", r.name());
      o.put("phase", r.phase());
      putNumber(o, "limit_ms", r.limitMs());
      putNumber(o, "observed_ms", r.observedMs());
      if (!r.applicable()) {
        o.putNull("breached");
        o.put("not_applicable", r.notApplicable());
        o.put("basis", basis.get(i));
        continue;
      }
      o.put("breached", r.breached());
      if (r.counts() != null) {
        putNumber(o, "over_limit_share", r.counts().overLimitShare());
        o.put("at_or_below", r.counts().atOrBelow());
        o.put("count", r.counts().total());
      }
      o.put("basis", basis.get(i));
    }
    if (basis.contains(QUANTILE)) {
      root.put("budgets_note", QUANTILE_NOTE);
    }
    root.put(
        "method",
        "histograms of every instance added (HdrHistogram), quantiles taken on the sum;"
            + " percentiles of instances are never averaged");
    JSON.writeValue(out.resolve(ReportWriter.SUMMARY).toFile(), root);
    return new Result(stats, requests, rows.size(), judged, List.copyOf(basis));
  }

  /**
   * {@code goodput} of the merged run: the instances' counts summed, attainment recomputed over the
   * summed requests sent, good requests and tokens per second summed (the instances ran at the same
   * time, as {@code achieved_rate}: runs one after another give a sum no instance saw); null with a
   * {@code goodput_note} when the instances' objectives differ or only some had any (never a number
   * over different definitions); null when none had any.
   */
  static void mergeGoodput(ObjectNode root, List<JsonNode> goodputs) {
    boolean none = goodputs.stream().allMatch(g -> g.isMissingNode() || g.isNull());
    String objectives = goodputs.get(0).path("objectives_ms").toString();
    boolean same =
        goodputs.stream()
            .allMatch(g -> g.isObject() && g.path("objectives_ms").toString().equals(objectives));
    if (!same) {
      root.putNull("goodput");
      if (!none) {
        root.put(
            "goodput_note",
            "not merged: the runs' goodput objectives differ (or only some runs had any); each"
                + " run's summary.json has its own");
      }
      return;
    }
    ObjectNode g = root.putObject("goodput");
    g.set("objectives_ms", goodputs.get(0).path("objectives_ms").deepCopy());
    String source = goodputs.get(0).path("source").asText();
    g.put(
        "source",
        goodputs.stream().allMatch(x -> x.path("source").asText().equals(source))
            ? source
            : "merged");
    long sent = sum(goodputs, "sent");
    long good = sum(goodputs, "good");
    g.put("sent", sent);
    g.put("good", good);
    g.put("failed", sum(goodputs, "failed"));
    if (goodputs.stream().allMatch(x -> x.path("judged").isNumber())) {
      g.put("judged", sum(goodputs, "judged"));
    } else {
      g.putNull("judged"); // a summary written before judged was counted
    }
    putNumber(g, "attainment", sent == 0 ? Double.NaN : (double) good / sent);
    for (String rate : List.of("request_goodput", "output_token_goodput")) {
      boolean all = goodputs.stream().allMatch(x -> x.path(rate).isNumber());
      putNumber(
          g,
          rate,
          all ? goodputs.stream().mapToDouble(x -> x.path(rate).asDouble()).sum() : Double.NaN);
    }
    for (String counts : List.of("missed", "first_missed", "unjudged")) {
      ObjectNode o = g.putObject(counts);
      for (JsonNode x : goodputs) {
        x.path(counts)
            .properties()
            .forEach(e -> o.put(e.getKey(), o.path(e.getKey()).asLong(0) + e.getValue().asLong()));
      }
    }
    mergeServer(g, goodputs);
    mergeTenants(g, goodputs, sent);
  }

  /**
   * {@code goodput.server} of the merged run, when any run's has one: the counts summed over the
   * runs that have it (a run without one had no record carrying the proxy's verdict), attainment
   * recomputed, the first {@value ServerVerdicts#KEPT} disagreements in input order.
   */
  static void mergeServer(ObjectNode g, List<JsonNode> goodputs) {
    List<JsonNode> servers =
        goodputs.stream().map(x -> x.path("server")).filter(JsonNode::isObject).toList();
    if (servers.isEmpty()) {
      return;
    }
    ObjectNode s = g.putObject("server");
    long judged = sum(servers, "judged");
    long met = sum(servers, "met");
    s.put("judged", judged);
    s.put("met", met);
    putNumber(s, "attainment", judged == 0 ? Double.NaN : (double) met / judged);
    for (String f : List.of("agree", "client_good_server_missed", "client_missed_server_met")) {
      s.put(f, sum(servers, f));
    }
    ObjectNode causes = s.putObject("causes");
    ArrayNode list = s.putArray("disagreements");
    for (JsonNode x : servers) {
      x.path("causes")
          .properties()
          .forEach(
              e ->
                  causes.put(
                      e.getKey(), causes.path(e.getKey()).asLong(0) + e.getValue().asLong()));
      for (JsonNode d : x.path("disagreements")) {
        if (list.size() < ServerVerdicts.KEPT) {
          list.add(d.deepCopy());
        }
      }
    }
  }

  /**
   * {@code goodput.by_tenant} of the merged run: each tenant's counts summed, attainments
   * recomputed; {@code by_tenant_unattributed} is what the merged {@code sent} leaves.
   */
  static void mergeTenants(ObjectNode g, List<JsonNode> goodputs, long sent) {
    Map<String, long[]> sums = new TreeMap<>();
    List<String> fields = List.of("sent", "good", "server_judged", "server_met");
    for (JsonNode x : goodputs) {
      x.path("by_tenant")
          .properties()
          .forEach(
              e -> {
                long[] c = sums.computeIfAbsent(e.getKey(), k -> new long[fields.size()]);
                for (int i = 0; i < fields.size(); i++) {
                  c[i] += e.getValue().path(fields.get(i)).asLong(0);
                }
              });
    }
    if (sums.isEmpty()) {
      return;
    }
    ObjectNode o = g.putObject("by_tenant");
    long attributed = 0;
    long[] other = sums.remove(TenantGoodput.OTHER);
    Map<String, long[]> ordered = new LinkedHashMap<>(sums);
    if (other != null) {
      ordered.put(TenantGoodput.OTHER, other);
    }
    for (Map.Entry<String, long[]> e : ordered.entrySet()) {
      long[] c = e.getValue();
      ObjectNode t = o.putObject(e.getKey());
      t.put("sent", c[0]);
      t.put("good", c[1]);
      putNumber(t, "attainment", c[0] == 0 ? Double.NaN : (double) c[1] / c[0]);
      t.put("server_judged", c[2]);
      t.put("server_met", c[3]);
      putNumber(t, "server_attainment", c[2] == 0 ? Double.NaN : (double) c[3] / c[2]);
      attributed += c[0];
    }
    g.put("by_tenant_unattributed", Math.max(0, sent - attributed));
  }

  private static long sum(List<JsonNode> nodes, String field) {
    return nodes.stream().mapToLong(n -> n.path(field).asLong(0)).sum();
  }

  private static String dir(List<Path> inputs) {
    return inputs.get(0).toString();
  }

  private static String key(String phase, long limitNanos) {
    return phase + "@" + limitNanos;
  }

  /**
   * One instance's exact counts from its summary.json budgets ({@code at_or_below}, {@code count}),
   * by canonical phase and limit in nanoseconds; empty for a run written before they existed.
   */
  static Map<String, long[]> summaryCounts(JsonNode summary) {
    Map<String, long[]> out = new HashMap<>();
    for (JsonNode o : summary.path("budgets")) {
      if (!o.path("at_or_below").isIntegralNumber() || !o.path("count").isIntegralNumber()) {
        continue;
      }
      String phase;
      try {
        phase = ClientBudgets.canonicalKey(o.path("phase").asText());
      } catch (RuntimeException e) {
        continue;
      }
      out.put(
          key(phase, LatencyLimit.nanos(o.path("limit_ms").asDouble())),
          new long[] {o.path("at_or_below").asLong(), o.path("count").asLong()});
    }
    return out;
  }

  /** The counts every instance has for a phase and limit, summed; the others are left out. */
  static Map<String, long[]> sumCounts(List<Map<String, long[]>> instances) {
    Map<String, long[]> out = new HashMap<>(instances.get(0));
    out.replaceAll((k, v) -> v.clone());
    for (Map<String, long[]> m : instances.subList(1, instances.size())) {
      out.keySet().retainAll(m.keySet());
      out.forEach(
          (k, v) -> {
            v[0] += m.get(k)[0];
            v[1] += m.get(k)[1];
          });
    }
    return out;
  }

  /**
   * {@code {atOrBelow, total}} of one phase over the merged pairs.csv rows, the values in
   * nanoseconds as a run records them ({@code Math.round(ms × 1e6)}); null when pairs.csv has no
   * column for the phase. Its population is the histograms': schedule lag of every request, every
   * other phase of the successful ones (class NONE) that have a value.
   */
  static long[] pairsCounts(List<String> header, List<String> rows, String phase, long limit) {
    int column = header.indexOf(phase + "_ms");
    int cls = header.indexOf("class");
    if (column < 0 || cls < 0) {
      return null;
    }
    boolean everyRequest = phase.equals("schedule_lag");
    long atOrBelow = 0;
    long total = 0;
    for (String row : rows) {
      List<String> f = splitCsv(row);
      String v = f.get(column);
      if (v.isEmpty() || (!everyRequest && !f.get(cls).equals("NONE"))) {
        continue;
      }
      double ms = Double.parseDouble(v);
      if (!Double.isFinite(ms)) {
        continue;
      }
      total++;
      if (Math.round(ms * 1e6) <= limit) {
        atOrBelow++;
      }
    }
    return new long[] {atOrBelow, total};
  }

  /** Adds every interval of one phases.hlog to {@code stats}. */
  static void readLog(Path file, PhaseStats stats) throws IOException, MergeException {
    try (InputStream in = Files.newInputStream(file)) {
      HistogramLogReader reader = new HistogramLogReader(in);
      EncodableHistogram h;
      while ((h = reader.nextIntervalHistogram()) != null) {
        if (!(h instanceof Histogram histogram) || h.getTag() == null) {
          throw new MergeException(2, file + " holds an untagged or non-integer histogram");
        }
        try {
          stats.addLogged(h.getTag(), histogram);
        } catch (IllegalArgumentException e) {
          throw new MergeException(2, file + ": " + e.getMessage());
        }
      }
    }
  }

  /** The merged log: one interval per phase tag, covering the whole merged run. */
  private static void writeLog(Path file, PhaseStats stats) throws IOException {
    try (OutputStream os = Files.newOutputStream(file);
        PrintStream ps = new PrintStream(os, false, StandardCharsets.UTF_8)) {
      HistogramLogWriter w = new HistogramLogWriter(ps);
      w.outputComment("Phasemeter load merge: each phase's histograms of every instance, added");
      w.outputComment("Values in microseconds; NAME" + PhaseLog.NEGATIVE_SUFFIX + " as in a run");
      w.outputLogFormatVersion();
      w.outputLegend();
      Map<String, Histogram> byTag = new TreeMap<>();
      for (String name : PhaseStats.NAMES) {
        for (boolean negatives : new boolean[] {false, true}) {
          Histogram h = stats.microsHistogram(name, negatives);
          if (h.getTotalCount() > 0) {
            byTag.put(negatives ? name + PhaseLog.NEGATIVE_SUFFIX : name, h);
          }
        }
      }
      for (Map.Entry<String, Histogram> e : byTag.entrySet()) {
        e.getValue().setTag(e.getKey());
        e.getValue().setStartTimeStamp(0);
        e.getValue().setEndTimeStamp(0);
        w.outputIntervalHistogram(e.getValue());
      }
    }
  }

  private static void putNumber(ObjectNode o, String key, double v) {
    if (Double.isFinite(v)) {
      o.put(key, v);
    } else {
      o.putNull(key);
    }
  }

  /**
   * Splits one pairs.csv line: RFC 4180 quoted fields with doubled quotes, as {@link PairsCsv}
   * writes them (no line breaks inside fields).
   */
  public static List<String> splitCsv(String line) {
    List<String> out = new ArrayList<>();
    StringBuilder f = new StringBuilder();
    boolean quoted = false;
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (quoted) {
        if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
          f.append('"');
          i++;
        } else if (c == '"') {
          quoted = false;
        } else {
          f.append(c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        out.add(f.toString());
        f.setLength(0);
      } else {
        f.append(c);
      }
    }
    out.add(f.toString());
    return out;
  }
}
