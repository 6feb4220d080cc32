package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.LoadOptions;
import io.phasemeter.load.LoadRun;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.schedule.WarmUp;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.dataset.Dataset;
import io.phasemeter.load.workload.replay.Replay;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Runs a campaign: gathers the conditions, optionally starts the server and times its start, then
 * runs the schedule (one discarded warm-up per point, then the randomized blocks), each run a
 * {@link LoadRun} of its own writing into {@code runs/NAME/}. Every run is judged by {@link
 * Validity}; the statistics take only valid runs; the invalid ones are listed with their reasons.
 * One progress line per run.
 */
public final class CampaignRunner {

  /**
   * Everything a campaign needs beside the plan.
   *
   * @param serverUrl where {@code --start-cmd}'s server answers {@code /health} (default: url)
   * @param startPairs cold/warm start pairs to time (0 without a start command)
   * @param apiKey the key of the plan's {@code api_key_env}, read at start, or null
   * @param admin the proxies' admin addresses ({@code --admin}, {@code --admin-discover}), or null
   * @param joinFetchTimeout how long each run's end-of-run lookup of unjoined records may take
   */
  public record Options(
      Path planFile,
      URI url,
      Admins admin,
      String adminToken,
      Path out,
      Map<String, String> labels,
      Path proxyConfig,
      String startCmd,
      String coldCmd,
      URI serverUrl,
      int startPairs,
      Duration readyTimeout,
      Duration joinGrace,
      Duration joinFetchTimeout,
      ApiKey apiKey) {
    public Options {
      labels = Map.copyOf(labels);
    }
  }

  /**
   * One finished run.
   *
   * @param seed the seed of its arrivals and prompts
   * @param reasons why it is invalid; empty when valid
   * @param metrics its figures (NaN where unknown)
   * @param loadSent whether it sent its load ({@link Validity#loadSent}): goodput's statistics take
   *     it even when invalid for failed requests
   */
  public record Run(
      Schedule.Entry entry,
      long seed,
      Path dir,
      Instant startedAt,
      int exitCode,
      long sent,
      List<String> reasons,
      Map<String, Double> metrics,
      boolean loadSent) {

    /** A run that sent its load only when valid. */
    public Run(
        Schedule.Entry entry,
        long seed,
        Path dir,
        Instant startedAt,
        int exitCode,
        long sent,
        List<String> reasons,
        Map<String, Double> metrics) {
      this(entry, seed, dir, startedAt, exitCode, sent, reasons, metrics, reasons.isEmpty());
    }

    public boolean valid() {
      return reasons.isEmpty();
    }
  }

  /** What a campaign produced. */
  public record Result(
      Plan plan,
      Schedule schedule,
      ObjectNode conditions,
      List<StartupProbe.Start> startup,
      String startupNote,
      List<Run> runs) {}

  private final Plan plan;
  private final Options o;
  private final PrintWriter out;
  private Consumer<Schedule.Entry> beforeRun = e -> {};

  public CampaignRunner(Plan plan, Options options, PrintWriter out) {
    this.plan = plan;
    this.o = options;
    this.out = out;
  }

  /** Called before each run starts (tests use it to inject a fault into one chosen run). */
  CampaignRunner beforeRun(Consumer<Schedule.Entry> hook) {
    this.beforeRun = hook;
    return this;
  }

  /** Runs the whole campaign and writes campaign.json, runs.csv and report.html. */
  public Result run() throws IOException, InterruptedException {
    Files.createDirectories(o.out().resolve("runs"));
    List<Plan.Point> points = plan.points();
    Schedule schedule =
        Schedule.of(points.stream().map(Plan.Point::id).toList(), plan.repeats(), plan.seed());
    List<Schedule.Entry> entries = schedule.entries(points);
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter campaign: %d points × %d repeats in randomized blocks (seed %d), plus one"
                + " discarded warm-up run each: %d runs of %s (warm-up %s%s) -> %s",
            points.size(),
            plan.repeats(),
            plan.seed(),
            entries.size(),
            human(plan.duration()),
            human(plan.warmupDuration()),
            plan.sources().stream().anyMatch(x -> x instanceof Source.Trace)
                ? "; a replay runs the length of its trace"
                : "",
            o.out()));
    plan.notes().forEach(n -> out.println("phasemeter campaign: " + n));
    out.flush();
    List<StartupProbe.Start> startup = new ArrayList<>();
    String startupNote = null;
    Process server = null;
    if (o.startCmd() != null) {
      StartupProbe probe =
          new StartupProbe(
              o.startCmd(),
              o.coldCmd(),
              o.serverUrl() == null ? o.url() : o.serverUrl(),
              plan.model(),
              plan.api(),
              o.apiKey(),
              o.readyTimeout(),
              o.out(),
              out);
      StartupProbe.Launched launched = probe.measure(o.startPairs(), startup);
      startupNote =
          o.coldCmd() == null
              ? "cold = the first start of a pair after the server was stopped; without --cold-cmd"
                  + " only the first pair's cold start is sure to find no cache this campaign warmed"
              : "cold = the first start of a pair, after --cold-cmd ran: " + o.coldCmd();
      if (launched.process() == null) {
        throw new ServerStartException(
            "the server did not become ready: " + launched.start().error());
      }
      server = launched.process();
    }
    try {
      ObjectNode conditions =
          Conditions.gather(
              o.planFile(),
              o.url(),
              o.admin(),
              o.adminToken(),
              o.proxyConfig(),
              o.labels(),
              plan.model(),
              o.apiKey());
      conditions.put("start_cmd", o.startCmd());
      List<Run> runs = new ArrayList<>();
      for (Schedule.Entry e : entries) {
        beforeRun.accept(e);
        Run r = runOne(e, entries.size(), schedule.blocks().size());
        runs.add(r);
      }
      Result result =
          new Result(plan, schedule, conditions, startup, startupNote, List.copyOf(runs));
      CampaignReport.write(o.out(), result);
      return result;
    } finally {
      StartupProbe.stop(server);
    }
  }

  /** The server named by --start-cmd never became ready. */
  public static final class ServerStartException extends IOException {
    ServerStartException(String message) {
      super(message);
    }
  }

  private Run runOne(Schedule.Entry e, int total, int blocks) throws IOException {
    Path dir = o.out().resolve("runs").resolve(e.name());
    Files.createDirectories(dir);
    long seed = plan.seed() + e.index();
    Instant started = Instant.now();
    int code;
    String clientError = null;
    try (PrintWriter log =
        new PrintWriter(
            Files.newBufferedWriter(dir.resolve("run.log"), StandardCharsets.UTF_8), true)) {
      try {
        code =
            LoadRun.execute(
                options(e, dir, seed),
                log,
                log,
                false,
                e.point().source() instanceof Source.Trace t ? t.replayed() : null);
      } catch (RuntimeException ex) {
        code = LoadRun.INVALID_RUN;
        clientError = ex.toString();
      }
    }
    RunData data = null;
    if (Files.exists(dir.resolve("summary.json")) && Files.exists(dir.resolve("pairs.csv"))) {
      data = RunData.read(dir);
    } else if (clientError == null) {
      clientError =
          "exit " + code + ", no report written (" + lastLine(dir.resolve("run.log")) + ")";
    }
    List<String> reasons = Validity.reasons(code, data, clientError);
    Map<String, Double> metrics = data == null ? emptyMetrics() : data.metrics();
    long sent = data == null ? 0 : data.summary().path("requests").path("sent").asLong(0);
    Run run =
        new Run(
            e,
            seed,
            dir,
            started,
            code,
            sent,
            List.copyOf(reasons),
            metrics,
            Validity.loadSent(code, data, clientError));
    progress(run, total, blocks);
    return run;
  }

  private void progress(Run r, int total, int blocks) {
    Schedule.Entry e = r.entry();
    String where =
        e.warmup()
            ? "warm-up     "
            : String.format(Locale.ROOT, "block %d/%d   ", e.block(), blocks);
    String verdict;
    if (!r.valid()) {
      verdict = "INVALID: " + String.join("; ", r.reasons());
    } else {
      verdict =
          plan.api().generates()
              ? String.format(
                  Locale.ROOT,
                  "valid  %d requests  ttft p50 %.1f ms  tpot p50 %.2f ms  total p95 %.1f ms  %.1f out tok/s",
                  r.sent(),
                  r.metrics().get("ttft_p50_ms"),
                  r.metrics().get("tpot_p50_ms"),
                  r.metrics().get("total_p95_ms"),
                  r.metrics().get("output_token_throughput"))
              : String.format(
                  Locale.ROOT,
                  "valid  %d requests  total p50 %.1f ms  total p95 %.1f ms  %.2f req/s"
                      + "  (ttft, tpot: not applicable to %s)",
                  r.sent(),
                  r.metrics().get("total_p50_ms"),
                  r.metrics().get("total_p95_ms"),
                  r.metrics().get("request_throughput"),
                  plan.api().key());
    }
    out.println(
        String.format(
            Locale.ROOT,
            "[run %" + String.valueOf(total).length() + "d/%d] %s%-22s %s  %s",
            e.index(),
            total,
            where,
            e.point().id(),
            e.warmup() ? "(discarded)" : "repeat " + e.repeat(),
            verdict));
    out.flush();
  }

  /**
   * Builds every run's options, and what a run's usage phase builds from them, before the first
   * run: what the plan's own checks let through and {@code load run} refuses is then a plan error
   * (exit 2), not a campaign of invalid runs.
   *
   * @throws IllegalArgumentException naming the plan file and the point
   */
  public void check() {
    for (Plan.Point p : plan.points()) {
      for (boolean warmup : new boolean[] {true, false}) {
        Schedule.Entry e = new Schedule.Entry(1, warmup ? 0 : 1, warmup ? 0 : 1, p);
        try {
          LoadOptions lo = options(e, o.out().resolve("runs"), plan.seed());
          lo.workload(p.source() instanceof Source.Trace t ? t.replayed() : null);
          if (lo.sessions() != null) {
            lo.conversations();
          }
        } catch (IllegalArgumentException ex) {
          throw new IllegalArgumentException(
              plan.file() + ": point " + p.id() + ": " + ex.getMessage(), ex);
        }
      }
    }
  }

  private LoadOptions options(Schedule.Entry e, Path dir, long seed) {
    Plan.Point p = e.point();
    Source source = p.source();
    Duration d = e.warmup() ? plan.warmupDuration() : plan.duration();
    // What each run sends, by the entry's kind: a profile's lengths, a dataset, sessions of a
    // profile's turns (the level: the sessions at once), or a trace (its own schedule and lengths).
    Profile profile = null;
    Dataset dataset = null;
    int datasetOutput = -1;
    Replay replay = null;
    SessionSpec sessions = null;
    if (source instanceof Source.Shape s) {
      profile = s.profile();
    } else if (source instanceof Source.FromDataset s) {
      dataset = s.dataset();
      datasetOutput = s.outputTokens() > 0 ? s.outputTokens() : -1;
    } else if (source instanceof Source.Sessions s) {
      profile = s.profile();
      sessions = new SessionSpec(p.concurrency(), s.turns(), s.thinkTime(), s.maxTokens());
    } else if (source instanceof Source.Trace t) {
      replay = t.replay();
      // The plan's duration does not cut a replay: its trace is its length, or the entry's
      // duration; a warm-up replays the trace's first warmup_duration.
      Duration cut = t.duration();
      d = e.warmup() && (cut == null || d.compareTo(cut) < 0) ? d : cut;
    }
    // Free text (chat, responses) takes only the output length of the profile; embeddings only
    // the input length; completions both.
    boolean named = profile != null && Profile.names().contains(profile.name());
    boolean freeText = plan.api() == Api.CHAT || plan.api() == Api.RESPONSES;
    boolean inputs = !freeText;
    boolean outputs = plan.api() != Api.EMBEDDINGS;
    return new LoadOptions(
        o.url(),
        o.admin(),
        o.adminToken(),
        plan.model(),
        p.open() ? p.rate() : 0,
        plan.arrival(),
        1.0,
        sessions != null ? 0 : p.concurrency(),
        List.of(),
        null,
        d,
        plan.maxInFlight(),
        named && inputs ? profile.name() : null,
        profile == null || named || !inputs ? -1 : profile.inputTokens(),
        profile == null
            ? datasetOutput
            : (named && inputs) || !outputs ? -1 : profile.outputTokens(),
        null,
        plan.stream(),
        null,
        dir,
        seed,
        plan.timeout(),
        Duration.ofSeconds(5),
        o.joinGrace(),
        o.joinFetchTimeout(),
        plan.api(),
        0,
        Duration.ZERO,
        false,
        plan.connectionReuse(),
        o.apiKey(),
        // Stricter still: Validity makes a run with any failed request invalid.
        LoadOptions.DEFAULT_MAX_ERROR_RATE,
        // The campaign's own warm-up runs warm the client (one JVM for every run).
        WarmUp.Target.SERVER,
        false,
        plan.slo(),
        dataset,
        replay,
        null,
        sessions,
        // Each run draws a salt of its own.
        null,
        null);
  }

  static Map<String, Double> emptyMetrics() {
    Map<String, Double> m = new LinkedHashMap<>();
    RunData.METRICS.forEach(k -> m.put(k, Double.NaN));
    return m;
  }

  private static String lastLine(Path log) {
    try {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      for (int i = lines.size() - 1; i >= 0; i--) {
        if (!lines.get(i).isBlank()) {
          return lines.get(i).trim();
        }
      }
    } catch (IOException e) {
      // fall through
    }
    return "no output";
  }

  static String human(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }
}
