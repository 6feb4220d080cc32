package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.workload.Profile;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A campaign's outputs: {@code campaign.json} (plan, schedule, conditions, server starts, per-point
 * statistics, every run), {@code runs.csv} (one row per run, warm-ups included and marked) and
 * {@code report.html} (the per-point table with mean ± 95 % interval, the invalid runs with their
 * reasons, and plots of each metric against concurrency and latency against rate).
 */
public final class CampaignReport {
  /** The machine-readable campaign. */
  public static final String JSON_FILE = "campaign.json";

  /** One row per run. */
  public static final String CSV_FILE = "runs.csv";

  /** The page a person reads. */
  public static final String HTML_FILE = "report.html";

  static final String T_NOTE =
      "95 % Student-t interval of the mean across valid repeats: mean ± t(0.975, n−1)·s/√n. With"
          + " n = 3 valid runs t = 4.30 (n = 5: 2.78, n = 10: 2.26), so three runs give a wide"
          + " interval: that is what three runs know.";

  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private CampaignReport() {}

  /**
   * Per-point statistics, metric by metric: over valid measured runs, and for goodput's metrics
   * over every measured run that sent its load ({@link #runsFor}).
   */
  static Map<String, Map<String, Stats.Interval>> statistics(CampaignRunner.Result r) {
    Map<String, Map<String, Stats.Interval>> out = new LinkedHashMap<>();
    for (Plan.Point p : r.plan().points()) {
      Map<String, Stats.Interval> m = new LinkedHashMap<>();
      for (String metric : RunData.METRICS) {
        m.put(
            metric,
            Stats.of(runsFor(r, p, metric).stream().map(x -> x.metrics().get(metric)).toList()));
      }
      out.put(p.id(), m);
    }
    return out;
  }

  /**
   * The measured runs of {@code p} whose {@code metric} the statistics take: for goodput's metrics
   * every run that sent its load, failed requests included (attainment counts failures; a point
   * near the knee keeps its runs with a timeout), for the others the valid runs.
   */
  static List<CampaignRunner.Run> runsFor(CampaignRunner.Result r, Plan.Point p, String metric) {
    if (!RunData.GOODPUT.contains(metric)) {
      return validRuns(r, p);
    }
    return r.runs().stream()
        .filter(x -> !x.entry().warmup() && x.loadSent() && x.entry().point().id().equals(p.id()))
        .toList();
  }

  /** The lowest and highest a metric can take, where bounded: attainment's interval is clamped. */
  static double[] bounds(String metric) {
    return metric.equals(RunData.ATTAINMENT) || metric.equals(RunData.SERVER_ATTAINMENT)
        ? new double[] {0, 1}
        : null;
  }

  static List<CampaignRunner.Run> validRuns(CampaignRunner.Result r, Plan.Point p) {
    return r.runs().stream()
        .filter(x -> !x.entry().warmup() && x.valid() && x.entry().point().id().equals(p.id()))
        .toList();
  }

  /** Writes the three files into {@code dir}. */
  public static void write(Path dir, CampaignRunner.Result r) throws IOException {
    Files.createDirectories(dir);
    Map<String, Map<String, Stats.Interval>> stats = statistics(r);
    JSON.writeValue(dir.resolve(JSON_FILE).toFile(), json(r, stats, dir));
    writeCsv(dir.resolve(CSV_FILE), r, dir);
    Files.writeString(
        dir.resolve(HTML_FILE), CampaignHtml.render(r, stats), StandardCharsets.UTF_8);
  }

  static ObjectNode json(
      CampaignRunner.Result r, Map<String, Map<String, Stats.Interval>> stats, Path dir) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    ObjectNode root = f.objectNode();
    root.put("v", 1);
    root.put("kind", "phasemeter-campaign");
    Plan plan = r.plan();
    ObjectNode p = root.putObject("plan");
    p.put("file", plan.file());
    p.put("model", plan.model());
    p.put("repeats", plan.repeats());
    p.put("seed", plan.seed());
    p.put("duration_s", plan.duration().toMillis() / 1000.0);
    p.put("warmup_duration_s", plan.warmupDuration().toMillis() / 1000.0);
    p.put("arrival", plan.arrival());
    p.put("stream", plan.stream());
    p.put("api", plan.api().key());
    // Goodput's objectives, catalogue names (each run's summary.json has them too); null: none.
    p.put("slo", plan.slo() == null ? null : plan.slo().toString());
    p.put("max_in_flight", plan.maxInFlight());
    p.put("timeout_s", plan.timeout().toMillis() / 1000.0);
    if (plan.apiKeyEnv() != null) {
      p.put("api_key_env", plan.apiKeyEnv());
    }
    ObjectNode sched = root.putObject("schedule");
    sched.put("seed", r.schedule().seed());
    sched.put(
        "note",
        "one discarded warm-up run per point, then each block runs every point once in a fresh"
            + " random order drawn from one generator seeded with this seed");
    sched.set("warmup", JSON.valueToTree(r.schedule().warmup()));
    sched.set("blocks", JSON.valueToTree(r.schedule().blocks()));
    root.set("conditions", r.conditions());
    ArrayNode startup = root.putArray("server_starts");
    for (StartupProbe.Start s : r.startup()) {
      ObjectNode o = startup.addObject();
      o.put("pair", s.pair());
      o.put("kind", s.kind());
      num(o, "health_ms", s.healthMs());
      num(o, "ready_ms", s.readyMs());
      o.put("error", s.error());
    }
    if (r.startupNote() != null) {
      root.put("server_starts_note", r.startupNote());
      ObjectNode ss = root.putObject("server_start_statistics");
      for (String kind : List.of("cold", "warm")) {
        for (String field : List.of("health_ms", "ready_ms")) {
          Stats.Interval i =
              Stats.of(
                  r.startup().stream()
                      .filter(s -> s.kind().equals(kind))
                      .map(s -> field.equals("health_ms") ? s.healthMs() : s.readyMs())
                      .toList());
          ss.set(kind + "_" + field, interval(i));
        }
      }
    }
    root.put("statistics_note", T_NOTE);
    root.putArray("metrics").addAll(RunData.METRICS.stream().map(f::textNode).toList());
    ArrayNode points = root.putArray("points");
    for (Plan.Point pt : plan.points()) {
      ObjectNode o = points.addObject();
      o.put("id", pt.id());
      source(o, pt);
      List<CampaignRunner.Run> measured =
          r.runs().stream()
              .filter(x -> !x.entry().warmup() && x.entry().point().id().equals(pt.id()))
              .toList();
      o.put("valid_runs", measured.stream().filter(CampaignRunner.Run::valid).count());
      o.put("invalid_runs", measured.stream().filter(x -> !x.valid()).count());
      if (plan.slo() != null) {
        // Goodput's metrics take every run that sent its load, failures included.
        o.put("goodput_runs", measured.stream().filter(CampaignRunner.Run::loadSent).count());
      }
      ObjectNode metrics = o.putObject("metrics");
      for (Map.Entry<String, Stats.Interval> m : stats.get(pt.id()).entrySet()) {
        ObjectNode mo = interval(m.getValue(), bounds(m.getKey()));
        ArrayNode runs = mo.putArray("runs");
        List<CampaignRunner.Run> taken = runsFor(r, pt, m.getKey());
        for (CampaignRunner.Run x : measured) {
          if (taken.contains(x)) {
            double v = x.metrics().get(m.getKey());
            if (Double.isFinite(v)) {
              runs.add(v);
            } else {
              runs.addNull();
            }
          }
        }
        metrics.set(m.getKey(), mo);
      }
    }
    ArrayNode runs = root.putArray("runs");
    ArrayNode invalid = root.putArray("invalid_runs");
    for (CampaignRunner.Run x : r.runs()) {
      ObjectNode o = runs.addObject();
      runFields(o, x, dir);
      ObjectNode m = o.putObject("metrics");
      x.metrics().forEach((k, v) -> num(m, k, v));
      if (!x.valid() && !x.entry().warmup()) {
        ObjectNode i = invalid.addObject();
        runFields(i, x, dir);
      }
    }
    return root;
  }

  /**
   * A point's entry: {@code kind}, {@code profile} (the entry's name), its lengths where a profile
   * gives them, the load, and a file's path and SHA-256 (as its runs' conditions give them).
   */
  private static void source(ObjectNode o, Plan.Point pt) {
    Source s = pt.source();
    o.put("kind", s.kind());
    o.put("profile", s.name());
    Profile lengths =
        s instanceof Source.Shape x
            ? x.profile()
            : s instanceof Source.Sessions x ? x.profile() : null;
    if (lengths != null) {
      o.put("input_tokens", lengths.inputTokens());
      o.put("output_tokens", lengths.outputTokens());
    } else {
      o.putNull("input_tokens");
      if (s instanceof Source.FromDataset d && d.outputTokens() > 0) {
        o.put("output_tokens", d.outputTokens());
      } else {
        o.putNull("output_tokens");
      }
    }
    if (s instanceof Source.Trace) {
      o.putNull("concurrency");
    } else {
      o.put("concurrency", pt.concurrency());
    }
    if (pt.open()) {
      o.put("rate", pt.rate());
    } else {
      o.putNull("rate");
    }
    if (s instanceof Source.Sessions x) {
      o.put("turns", x.turns());
      o.put("think_time_s", x.thinkTime().toNanos() / 1e9);
    }
    if (s instanceof Source.Trace t) {
      o.put("replay_speed", t.replay().speed());
      o.put("replay_prefixes", t.replay().prefixes().key());
      if (t.duration() != null) {
        o.put("duration_s", t.duration().toNanos() / 1e9);
      }
    }
    if (s.file() != null) {
      o.put("file", s.file());
      o.put("sha256", s.sha256());
    }
  }

  private static void runFields(ObjectNode o, CampaignRunner.Run x, Path dir) {
    o.put("index", x.entry().index());
    o.put("name", x.entry().name());
    o.put("point", x.entry().point().id());
    o.put("warmup", x.entry().warmup());
    o.put("block", x.entry().block());
    o.put("repeat", x.entry().repeat());
    o.put("seed", x.seed());
    o.put("started_at", x.startedAt().toString());
    o.put("dir", dir.relativize(x.dir()).toString());
    o.put("exit_code", x.exitCode());
    o.put("requests_sent", x.sent());
    o.put("valid", x.valid());
    ArrayNode reasons = o.putArray("reasons");
    x.reasons().forEach(reasons::add);
  }

  static ObjectNode interval(Stats.Interval i) {
    return interval(i, null);
  }

  /**
   * @param bounds the lowest and highest the metric can take, or null: the interval's ends are
   *     clamped to them (a Student-t interval of a share near 1 over three runs passes 1); the half
   *     width is the unclamped one
   */
  static ObjectNode interval(Stats.Interval i, double[] bounds) {
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    o.put("n", i.n());
    num(o, "mean", i.mean());
    num(o, "sd", i.sd());
    num(o, "t", i.t());
    num(o, "ci95_low", bounds == null ? i.low() : Math.max(bounds[0], i.low()));
    num(o, "ci95_high", bounds == null ? i.high() : Math.min(bounds[1], i.high()));
    num(o, "ci95_half_width", i.half());
    return o;
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }

  /** Reads a campaign.json back (for compare). */
  static JsonNode read(Path fileOrDir) throws IOException {
    Path file = Files.isDirectory(fileOrDir) ? fileOrDir.resolve(JSON_FILE) : fileOrDir;
    if (!Files.exists(file)) {
      throw new IllegalArgumentException(fileOrDir + ": no " + JSON_FILE + " there");
    }
    JsonNode n = JSON.readTree(file.toFile());
    if (!"phasemeter-campaign".equals(n.path("kind").asText())) {
      throw new IllegalArgumentException(file + ": not a Phasemeter campaign.json");
    }
    return n;
  }

  private static void writeCsv(Path file, CampaignRunner.Result r, Path dir) throws IOException {
    List<String> header =
        new ArrayList<>(
            List.of(
                "index",
                "name",
                "point",
                "profile",
                "concurrency",
                "rate",
                "warmup",
                "block",
                "repeat",
                "seed",
                "started_at",
                "exit_code",
                "requests_sent",
                "valid",
                "reasons"));
    header.addAll(RunData.METRICS);
    try (Writer w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
      w.write(String.join(",", header));
      w.write("\r\n");
      for (CampaignRunner.Run x : r.runs()) {
        Plan.Point p = x.entry().point();
        List<String> row = new ArrayList<>();
        row.add(String.valueOf(x.entry().index()));
        row.add(x.entry().name());
        row.add(p.id());
        row.add(p.source().name());
        row.add(p.source() instanceof Source.Trace ? "" : String.valueOf(p.concurrency()));
        row.add(p.open() ? Plan.trim(p.rate()) : "");
        row.add(String.valueOf(x.entry().warmup()));
        row.add(String.valueOf(x.entry().block()));
        row.add(String.valueOf(x.entry().repeat()));
        row.add(String.valueOf(x.seed()));
        row.add(x.startedAt().toString());
        row.add(String.valueOf(x.exitCode()));
        row.add(String.valueOf(x.sent()));
        row.add(String.valueOf(x.valid()));
        row.add(quote(String.join("; ", x.reasons())));
        for (String m : RunData.METRICS) {
          double v = x.metrics().get(m);
          row.add(Double.isFinite(v) ? String.format(Locale.ROOT, "%.4f", v) : "");
        }
        w.write(String.join(",", row));
        w.write("\r\n");
      }
    }
  }

  static String quote(String field) {
    if (field.indexOf(',') < 0 && field.indexOf('"') < 0 && field.indexOf('\n') < 0) {
      return field;
    }
    return '"' + field.replace("\"", "\"\"") + '"';
  }
}
