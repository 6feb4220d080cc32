package io.phasemeter.load;

import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.http.CalibrationServer;
import io.phasemeter.load.http.ClientFloor;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Joiner;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ProxyJoin;
import io.phasemeter.load.join.ReplicaFeeds;
import io.phasemeter.load.report.Connections;
import io.phasemeter.load.report.Goodput;
import io.phasemeter.load.report.LiveReport;
import io.phasemeter.load.report.LiveTable;
import io.phasemeter.load.report.ReportInput;
import io.phasemeter.load.report.ReportWriter;
import io.phasemeter.load.report.SlowThreshold;
import io.phasemeter.load.schedule.ReplayTurns;
import io.phasemeter.load.schedule.Series;
import io.phasemeter.load.schedule.Sessions;
import io.phasemeter.load.schedule.StepInfo;
import io.phasemeter.load.schedule.StepRunner;
import io.phasemeter.load.schedule.WarmUp;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.load.workload.replay.Replayed;
import io.phasemeter.load.workload.replay.SessionLabels;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One load run, wired from its parts: the schedule starts requests step by step ({@link
 * StepRunner}: from a clock in the open model, N in flight in the closed one) after the warm-up
 * ({@link WarmUp}); each finished request is joined with the proxy's record ({@link ProxyJoin});
 * the live table follows the run ({@link LiveReport}); at the end the budgets are judged and the
 * report written. Exit codes as in docs/design.md §7.
 */
public final class LoadRun {
  /** Exit codes (docs/design.md §7). */
  public static final int OK = 0;

  public static final int USAGE = 2;
  public static final int BREACHED = 3;
  public static final int INVALID_RUN = 4;

  private final LoadOptions o;
  private final PrintWriter out;
  private final ClientBudgets budgets;
  private final Goodput goodput;

  /** A budgets file's slo_ms objectives this run cannot judge, key to why; empty when none. */
  private final Map<String, String> sloSkipped;

  /** Where the objectives came from, kept when none was left to judge; null without any. */
  private final String sloSource;

  private final TraceIds ids = TraceIds.random();
  private final String prefix = String.format("%016x", ids.instanceId());
  private final Workload workload;

  /** The trace of {@code --replay}, read once before the run; null without one. */
  private final Replayed replayed;

  /** Its one step, which runs its sessions closed-loop; null without {@code --replay}. */
  private final ReplayTurns replayTurns;

  /** What pairs.csv says for a replayed row's session; null without sessions in a trace. */
  private final SessionLabels sessionLabels;

  private final AtomicLong seq = new AtomicLong();
  private final AtomicLong completed = new AtomicLong();
  private final List<StepInfo> steps = new CopyOnWriteArrayList<>();
  private final Map<String, Object> conditions = new LinkedHashMap<>();
  private final StepRunner schedule;
  private final LiveReport live;
  private final Joiner joiner;
  private final ProxyJoin join;

  /** The sessions of a {@code --sessions} run; null for any other. */
  private final Sessions sessions;

  private long runStart;

  /** See {@link #execute(LoadOptions, PrintWriter, PrintWriter, boolean)}. */
  private boolean warmProcess;

  /** The step number seeding a full-rate warm-up's arrivals: none of the run's own steps. */
  private static final int WARM_UP_ARRIVALS = -1;

  LoadRun(
      Vertx vertx,
      LoadOptions o,
      PrintWriter out,
      PrintWriter err,
      ClientBudgets budgets,
      Goodput goodput,
      Map<String, String> sloSkipped,
      String sloSource,
      Replayed replayed) {
    this.o = o;
    this.out = out;
    this.budgets = budgets;
    this.goodput = goodput;
    this.sloSkipped = sloSkipped;
    this.sloSource = sloSource;
    this.replayed = replayed;
    this.replayTurns = replayed == null ? null : ReplayTurns.of(replayed, o.duration());
    this.sessionLabels =
        replayed == null || replayed.trace().sessions() == 0
            ? null
            : replayed.sessionLabels(prefix);
    this.workload = o.workload(replayed);
    this.schedule =
        new StepRunner(
            vertx,
            o.url(),
            o.maxInFlight(),
            o.timeout(),
            o.connectionReuse(),
            o.steps().isEmpty() ? 1 : o.steps().size(),
            o.transport());
    this.sessions =
        o.sessions() == null ? null : new Sessions(o.conversations(), prefix, o.duration());
    this.live = new LiveReport(out, budgets, o.model(), o.api(), this::status, goodput);
    this.joiner = new Joiner(prefix, 100_000, live::add);
    this.join =
        new ProxyJoin(
            vertx,
            o.admin(),
            o.adminToken(),
            joiner,
            line -> {
              out.println("phasemeter load: " + line);
              out.flush();
            },
            line -> {
              err.println("phasemeter load: " + line);
              err.flush();
            },
            o.joinFetchTimeout(),
            ReplicaFeeds.JDK);
  }

  /**
   * One note each, before the run: the budget whose slo_ms is used when several budgets for the
   * model give one (the others are ignored), and the file's objectives this run cannot judge.
   */
  private static void sloNotes(
      PrintWriter out,
      ClientBudgets budgets,
      String model,
      String source,
      Map<String, String> skipped) {
    if (source == null || source.equals(Goodput.FLAG)) {
      return;
    }
    List<ClientBudgets.Budget> all = budgets.sloBudgets(model);
    ClientBudgets.Budget used = budgets.sloBudget(model);
    if (all.size() > 1) {
      out.println(
          "note: goodput's objectives are the slo_ms of budget '"
              + used.name()
              + "'; ignored, though they also give slo_ms for this model: "
              + String.join(
                  ", ",
                  all.stream().filter(b -> b != used).map(b -> "'" + b.name() + "'").toList()));
    }
    if (!skipped.isEmpty()) {
      StringBuilder sb =
          new StringBuilder("note: slo_ms of budget '")
              .append(used.name())
              .append("': not judged in this run");
      skipped.forEach((k, why) -> sb.append("; ").append(k).append(": ").append(why));
      out.println(
          sb.append(
                  skipped.size() == used.slo().list().size()
                      ? " (no objective left: goodput is null)"
                      : "")
              .toString());
    }
    out.flush();
  }

  /** Runs with a Vert.x of its own and returns the exit code. */
  public static int execute(LoadOptions o, PrintWriter out, PrintWriter err) {
    return execute(o, out, err, false);
  }

  /**
   * {@link #execute(LoadOptions, PrintWriter, PrintWriter)}; {@code warmProcess}: this JVM has
   * already run this load (a capacity search's later probes), so the warm-up at load ({@code
   * --warmup-duration}) offers the full rate from its start instead of rising from 0 (the rise is
   * for a JIT that has not compiled the load path yet), and no JIT wait follows it: the server is
   * not left to drain between the warm-up and the clock.
   */
  public static int execute(LoadOptions o, PrintWriter out, PrintWriter err, boolean warmProcess) {
    return execute(o, out, err, warmProcess, null);
  }

  /**
   * {@link #execute(LoadOptions, PrintWriter, PrintWriter, boolean)} of a trace already read and
   * checked ({@code o.replay().load()}, by a campaign's plan): a campaign replays one trace in
   * every repeat without reading it again.
   *
   * @param read the trace of {@code o.replay()}, or null: read here
   */
  public static int execute(
      LoadOptions o, PrintWriter out, PrintWriter err, boolean warmProcess, Replayed read) {
    if (read != null && !read.replay().equals(o.replay())) {
      throw new IllegalStateException("the trace read is not this run's --replay");
    }
    ClientBudgets budgets;
    Goodput goodput;
    Map<String, String> sloSkipped = new LinkedHashMap<>();
    String sloSource;
    Replayed replayed;
    try {
      budgets = o.budgets() == null ? ClientBudgets.none() : ClientBudgets.load(o.budgets());
      goodput = Goodput.of(o.slo(), budgets, o.model());
      sloSource = goodput == null ? null : goodput.source();
      if (goodput != null) {
        goodput =
            goodput.forRun(
                o.api(), o.stream(), o.admin() != null, o.joinSampledOnly(), sloSkipped::put);
      }
      sloNotes(out, budgets, o.model(), sloSource, sloSkipped);
      for (ClientBudgets.Budget b : budgets.tenantBudgets(o.model())) {
        out.println(
            "note: budget '"
                + b.name()
                + "' covers tenant "
                + b.tenant()
                + " only: the proxy judges it on that tenant's requests; this run judges the"
                + " budgets of every tenant");
      }
      // The whole trace is read and checked here, before anything is sent.
      replayed = o.replay() == null ? null : read != null ? read : o.replay().load();
      o.workload(replayed);
      if (o.dataset() != null) {
        // Read (and every entry checked) by o.workload() above, before any request.
        o.datasetEntries().lines().forEach(l -> out.println("phasemeter load: " + l));
        out.flush();
      }
      if (o.sessions() != null) {
        o.conversations();
      }
      for (double rate : o.steps().isEmpty() ? List.of(o.rate()) : o.steps()) {
        if (o.concurrency() == 0 && replayed == null && o.sessions() == null) {
          o.arrivals(rate, 0);
        }
      }
    } catch (IllegalArgumentException e) {
      err.println("phasemeter load: " + e.getMessage());
      return USAGE;
    }
    Vertx vertx = Vertx.vertx();
    try {
      LoadRun run =
          new LoadRun(vertx, o, out, err, budgets, goodput, sloSkipped, sloSource, replayed);
      run.warmProcess = warmProcess;
      return run.run(vertx, err);
    } catch (Exception e) {
      err.println("phasemeter load: the run failed: " + e);
      return INVALID_RUN;
    } finally {
      closeBounded(vertx);
    }
  }

  /**
   * Closes the run's Vert.x and waits for it, at most 10 s: a search's next probe then does not
   * start while this one's event loops and sockets are still closing.
   */
  private static void closeBounded(Vertx vertx) {
    try {
      vertx.close().await(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (Exception e) {
      // Closing late or failing to close does not change the run's result.
    }
  }

  private int run(Vertx vertx, PrintWriter err) throws Exception {
    try (live) {
      if (o.admin() != null) {
        try {
          join.start(o.joinSampledOnly());
        } catch (Exception e) {
          err.println("phasemeter load: " + e.getMessage());
          return USAGE;
        }
        conditions.putAll(join.proxyConditions());
      }
      recordConditions();
      if (o.transport().insecure()) {
        err.println(
            "phasemeter load: warning: --insecure: the server's certificate and name are not"
                + " verified (recorded as tls_verify off)");
        err.flush();
      }
      out.println(
          "phasemeter load: "
              + arrivalText()
              + " -> "
              + o.url()
              + " (model "
              + o.model()
              + ", "
              + workloadText()
              + (o.admin() == null
                  ? "; no --admin: no join, no envelope"
                  : "; joining with " + joinedWith())
              + ")");
      out.flush();
      WarmUp.Plan warm =
          new WarmUp.Plan(
              o.warmup(),
              o.warmupTarget(),
              o.warmupDuration(),
              o.url(),
              o.timeout(),
              o.connectionReuse(),
              // Sessions warm up as the closed model of as many single turns at once.
              o.sessions() != null ? o.sessions().count() : o.concurrency(),
              replayed != null
                  ? replayed.meanRate(o.duration())
                  : o.steps().isEmpty() ? o.rate() : o.steps().get(0),
              o.transport());
      // The client's own warm-up and floor first, then the target's warm-up, then the clock: the
      // target's warmed connections do not idle behind the client's own (vLLM closes an idle
      // keep-alive connection after 5 s).
      boolean warmedTheClient = selfWarmUpAndFloor(vertx, warm);
      double jitWaitMs = warmedTheClient ? WarmUp.awaitQuietCompiler(out) : 0;
      if (warm.target() == WarmUp.Target.SERVER && warm.requests() > 0) {
        long sent = WarmUp.oneByOne(vertx, warm, workload, null, out);
        conditions.put("warmup_requests", sent);
        conditions.put("warmup_target", sent == 0 ? null : warm.target().key());
      }
      if (warmProcess) {
        WarmUp.atLoad(
            schedule,
            warm,
            workload,
            live,
            out,
            warm.concurrency() > 0 ? null : o.arrivals(warm.firstRate(), WARM_UP_ARRIVALS));
      } else if (WarmUp.atLoad(schedule, warm, workload, live, out)) {
        // The compiles the target's load queued, as after the client's own.
        double more = WarmUp.awaitQuietCompiler(out);
        jitWaitMs = jitWaitMs < 0 || more < 0 ? -1 : jitWaitMs + more;
      }
      // Null when the JVM does not say; 0 when nothing warmed the client (nothing to wait for).
      conditions.put("client_jit_wait_ms", jitWaitMs < 0 ? null : jitWaitMs);
      WarmUp.collectBeforeTheClock(conditions);
      // bench/run and the accuracy suite's K6Test wait for this line: keep its words.
      out.println("phasemeter load: clock starts");
      out.flush();
      runStart = System.nanoTime();
      schedule.startTheClock();
      live.start(runStart, o.reportInterval());
      try {
        measure();
        // Whatever is still in flight finishes (or times out) before the join is closed.
        schedule.drain(System.nanoTime() + o.timeout().toNanos() + 5_000_000_000L);
        join.finish(o.joinGrace());
      } finally {
        live.stop();
        recordWire(err);
        schedule.close();
        join.close();
      }
      return finish(System.nanoTime());
    }
  }

  /**
   * The client's own warm-up, against its own endpoint: the one-by-one requests and the run's load
   * briefly ({@code --warmup-target self}), then the client's floor (after a warm-up of its own
   * when nothing warmed the client yet), all recorded in the conditions; the endpoint is closed
   * before anything is sent to the target. The target's warm-up ({@code --warmup-target server})
   * comes after, in {@link #run}.
   *
   * @return whether anything was sent to the client's own endpoint (the JIT then has compiles to
   *     finish)
   */
  private boolean selfWarmUpAndFloor(Vertx vertx, WarmUp.Plan warm) throws Exception {
    boolean self = warm.requests() > 0 && warm.target() == WarmUp.Target.SELF;
    conditions.put("warmup_requests", 0L);
    conditions.put("warmup_target", null);
    conditions.put("client_floor_warmup_requests", 0L);
    if (!self && !o.clientFloor()) {
      return false;
    }
    // The same requests, but not the API key: a dummy of its length.
    Workload own = workload.forOwnEndpoint();
    CalibrationServer endpoint = CalibrationServer.start(vertx).await();
    try {
      long sent = 0;
      if (self) {
        sent = WarmUp.oneByOne(vertx, warm, own, endpoint, out);
        if (warm.atLoad().isZero()) {
          // The run's own load, briefly, to the endpoint; --warmup-duration does it to the target.
          try (StepRunner toSelf =
              new StepRunner(
                  vertx,
                  URI.create("http://127.0.0.1:" + endpoint.port()),
                  o.maxInFlight(),
                  o.timeout(),
                  o.connectionReuse(),
                  1)) {
            sent += WarmUp.atLoadAgainstSelf(toSelf, warm, own, live, out);
          }
        }
        conditions.put("warmup_requests", sent);
        conditions.put("warmup_target", sent == 0 ? null : warm.target().key());
      }
      if (o.clientFloor()) {
        if (!self) {
          // The floor is the warm client's: a client that sent the target a few requests, or
          // none, is still interpreted (a floor TTFT of 15 ms against a 7 ms envelope, measured).
          // These requests are the floor's own, recorded as such (client_floor_warmup_requests).
          long floorWarm =
              WarmUp.oneByOne(
                  vertx,
                  new WarmUp.Plan(
                      ClientFloor.WARM_UP,
                      WarmUp.Target.SELF,
                      Duration.ZERO,
                      o.url(),
                      o.timeout(),
                      o.connectionReuse(),
                      o.concurrency(),
                      warm.firstRate(),
                      io.phasemeter.load.http.Transport.DEFAULT),
                  own,
                  endpoint,
                  out,
                  "for the client's floor (--client-floor on)");
          conditions.put("client_floor_warmup_requests", floorWarm);
        }
        out.println("phasemeter load: measuring the client's floor on its own endpoint ...");
        out.flush();
        ClientFloor floor = ClientFloor.measure(vertx, endpoint, own::request);
        floor.record(conditions);
        String line = ClientFloor.line(conditions);
        live.clientFloor(line);
        out.println("phasemeter load: " + line);
        out.flush();
      }
      return true;
    } finally {
      endpoint.close().await();
    }
  }

  /** The measured steps, one after the other. */
  private void measure() throws Exception {
    SlowThreshold slow = live.slowThreshold();
    Series measured =
        Series.measured(
            ids,
            seq,
            workload,
            live::addItl,
            r -> {
              completed.incrementAndGet();
              live.notable(r, slow);
              join.client(labelled(r));
            });
    if (replayTurns != null) {
      // One step from the clock's start: row i is due its (scaled) time after it.
      steps.add(schedule.replay(measured, replayTurns, runStart));
    } else if (sessions != null) {
      Duration bound = sessions.bound(o.timeout());
      steps.add(StepRunner.await(schedule.sessions(measured, sessions), sessions, bound));
      long stopped = sessions.counts().stoppedAtDeadline();
      if (stopped > 0) {
        out.println(
            "phasemeter load: the sessions had not ended "
                + bound.toSeconds()
                + " s after the clock started ("
                + (o.duration() != null
                    ? "--duration + --timeout"
                    : "--turns × (--timeout + --think-time)")
                + " + 10 s): "
                + stopped
                + " sessions stopped where they were (stopped_at_deadline); the run ends with what"
                + " it has");
        out.flush();
      }
    } else if (o.concurrency() > 0) {
      steps.add(schedule.closed(measured, 0, o.concurrency(), o.duration()).await());
    } else if (!o.steps().isEmpty()) {
      for (int i = 0; i < o.steps().size(); i++) {
        double rate = o.steps().get(i);
        steps.add(schedule.open(measured, i, rate, o.stepDuration(), o.arrivals(rate, i)));
      }
    } else {
      steps.add(schedule.open(measured, 0, o.rate(), o.duration(), o.arrivals(o.rate(), 0)));
    }
  }

  /**
   * {@code r} as pairs.csv keeps it: a replayed row's session id (the user's data) replaced by its
   * label ({@link SessionLabels}); request {@code seq} is row {@code seq - 1}.
   */
  private ClientResult labelled(ClientResult r) {
    return sessionLabels == null || r.turn() == 0
        ? r
        : r.withSession(sessionLabels.label((int) (r.seq() - 1)));
  }

  /** What the sessions did: a {@code --sessions} run's, a replayed trace's; null otherwise. */
  private Sessions.Counts sessionCounts() {
    return sessions != null ? sessions.counts() : replayTurns != null ? replayTurns.counts() : null;
  }

  /** The load shape in words: the replay's, once its trace is read, or the options'. */
  private String arrivalText() {
    return replayed != null ? replayed.arrivalText(o.duration()) : o.arrivalDescription();
  }

  /** The workload in words: the replay's (its format, rows, prefixes), or the options'. */
  private String workloadText() {
    return replayed != null ? replayed.workloadText(o.stream()) : o.workloadText();
  }

  private LiveReport.Status status() {
    return new LiveReport.Status(
        schedule.stepText(),
        seq.get(),
        completed.get(),
        schedule.inFlight(),
        schedule.dropped(),
        schedule.connections().staleRetries(),
        join.joining(),
        join.replicaCounts());
  }

  /** The replicas the run joins with, in the start line. */
  private String joinedWith() {
    List<String> names =
        join.replicaCounts().stream().map(io.phasemeter.load.join.ReplicaCounts::replica).toList();
    return names.size() == 1
        ? o.admin().describe()
        : names.size() + " replicas (" + String.join(", ", names) + ")";
  }

  /**
   * The protocol and TLS version the run's connections actually used, in the conditions; said once
   * when {@code --http2} was asked over https and the server chose http/1.1 (ALPN).
   */
  private void recordWire(PrintWriter err) {
    String protocol = schedule.protocol();
    conditions.put("protocol", protocol);
    conditions.put("tls_version", schedule.tlsVersion());
    if (o.transport().http2() && protocol != null && !protocol.contains("h2")) {
      err.println(
          "phasemeter load: note: --http2 asked, but the server chose "
              + protocol
              + " (ALPN): the run spoke "
              + protocol);
      err.flush();
    }
  }

  private void recordConditions() {
    conditions.put("phasemeter_version", Version.version());
    conditions.put("git_commit", Version.gitCommit());
    conditions.put("target_url", o.url().toString());
    conditions.put("admin_url", o.admin() == null ? null : o.admin().describe());
    conditions.put("model", o.model());
    conditions.put("api", o.api().key());
    conditions.put("workload", workloadText());
    conditions.put("arrival", arrivalText());
    if (replayed != null) {
      conditions.putAll(replayed.conditions(o.duration()));
    }
    if (o.sharedPrefix() != null) {
      conditions.putAll(o.sharedPrefix().conditions());
    }
    if (o.sessions() != null) {
      conditions.put("sessions", o.sessions().count());
      conditions.put("turns", o.sessions().turns());
      conditions.put("think_time_s", o.sessions().thinkTimeSeconds());
      // Exact lengths only: a chat session is bounded by its history's size instead.
      conditions.put(
          "session_max_tokens",
          o.api() == io.phasemeter.load.workload.Api.COMPLETIONS ? o.sessions().maxTokens() : null);
    }
    conditions.put("max_in_flight", o.maxInFlight());
    conditions.put("connection_reuse", o.connectionReuse() ? "on" : "off");
    conditions.put("http_version_asked", o.transport().http2() ? "h2" : "http/1.1");
    if (o.url().getScheme().equalsIgnoreCase("https")) {
      conditions.put("tls_verify", o.transport().insecure() ? "off" : "on");
      conditions.put("tls_trust", o.transport().verification());
    }
    conditions.put("streaming", o.stream());
    if (o.apiKey() != null) {
      // The variable's name only: the key itself is never written.
      conditions.put("api_key_env", o.apiKey().envName());
    }
    if (o.dataset() != null) {
      // Lengths, counts and the file's hash; never its text.
      conditions.putAll(o.datasetEntries().conditions());
    }
    conditions.put("seed", o.seed());
    // --seed N --prompt-salt S sends the same prompts again; none: the seed's alone.
    conditions.put("prompt_salt", o.promptSalt().hex());
    conditions.put("warmup_requests", o.warmup());
    conditions.put("warmup_target", o.warmup() == 0 ? null : o.warmupTarget().key());
    conditions.put("warmup_at_load_s", o.warmupDuration().toNanos() / 1e9);
    conditions.put("budgets_file", o.budgets() == null ? null : o.budgets().toString());
    conditions.put("budgets_sha256", budgets.sha256());
    // Budgets of one tenant, which the run does not judge (the proxy does, per tenant).
    List<String> tenantBudgets =
        budgets.tenantBudgets(o.model()).stream().map(ClientBudgets.Budget::name).toList();
    conditions.put("budgets_of_one_tenant", tenantBudgets.isEmpty() ? null : tenantBudgets);
    // Goodput's objectives (catalogue names) and where they came from: --slo wins over slo_ms.
    conditions.put("slo", goodput == null ? null : goodput.objectives().toString());
    conditions.put("slo_source", sloSource);
    // A budgets file's objectives this run cannot judge (key: why); goodput is null when none
    // is left.
    conditions.put("slo_skipped", sloSkipped.isEmpty() ? null : new LinkedHashMap<>(sloSkipped));
    conditions.put("trace_id_prefix", prefix);
    conditions.put("started_at", java.time.Instant.now().toString());
  }

  /** Judges the run, writes the report, prints the summary and returns the exit code. */
  private int finish(long runEnd) throws Exception {
    List<Pair> pairs = joiner.pairs();
    long sent = seq.get();
    long ok = pairs.stream().filter(p -> p.client().ok()).count();
    long invalid = pairs.stream().filter(p -> p.client().error() == ErrorClass.INVALID).count();
    long errors = pairs.size() - ok;
    long dropped = steps.stream().mapToLong(StepInfo::dropped).sum();
    // Achieved rate over the time the schedule ran (not the drain and join grace after it).
    double sendSeconds =
        Math.max(1e-9, steps.stream().mapToLong(st -> st.endNanos() - st.startNanos()).sum() / 1e9);
    double achieved = sent / sendSeconds;
    double errorRate = ClientBudgets.errorRate(sent, ok);
    // A budgets file's max_error_rate, where it gives one for the model, judges instead.
    boolean errorRateByBudgets = budgets.limitsErrorRate(o.model());
    conditions.put("max_error_rate", errorRateByBudgets ? null : o.maxErrorRate());
    conditions.put("max_error_rate_from", errorRateByBudgets ? "budgets" : "--max-error-rate");
    double coverage = live.coverage();
    List<BudgetResult> results =
        new ArrayList<>(budgets.judgeLatency(o.model(), live.cumulative(), o.api()));
    List<BudgetResult> gates = budgets.judgeGates(o.model(), errorRate, coverage, join.joining());
    results.addAll(gates);
    String joinBasis = join.describe(pairs, conditions, o.joinSampledOnly(), coverage);
    Path outDir = o.out();
    ReportWriter.write(
        outDir,
        new ReportInput(
            pairs,
            List.copyOf(steps),
            runStart,
            runEnd,
            conditions,
            sent,
            ok,
            errors,
            dropped,
            invalid,
            achieved,
            results,
            live.cumulative(),
            schedule.connections(),
            o.api(),
            join.feedCounts(),
            goodput,
            sessionCounts()));
    live.printFinal();
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: sent %d, ok %d, errors %d (invalid %d), dropped %d, achieved %.2f req/s, join coverage %s",
            sent,
            ok,
            errors,
            invalid,
            dropped,
            achieved,
            !join.joining()
                ? "n/a (no --admin)"
                : String.format(Locale.ROOT, "%.1f%%", 100 * coverage)));
    if (joinBasis != null) {
      out.println("phasemeter load: note: " + joinBasis);
    }
    Sessions.Counts c = sessionCounts();
    if (c != null) {
      out.println(
          String.format(
              Locale.ROOT,
              "phasemeter load: sessions: %d started, %d completed, %d cut by a failed turn, %d at"
                  + " their token limit, %d stopped by the duration's end%s; %d turns not sent%s",
              c.started(),
              c.completed(),
              c.cut(),
              c.atMaxTokens(),
              c.endedByDuration(),
              c.stoppedAtDeadline() > 0
                  ? ", " + c.stoppedAtDeadline() + " stopped at the run's deadline"
                  : "",
              c.turnsNotSent(),
              c.answersTruncated() > 0
                  ? "; "
                      + c.answersTruncated()
                      + " chat answers over 64 KiB sent back cut (answers_truncated)"
                  : ""));
      if (c.clientErrors() > 0) {
        out.println(
            "phasemeter load: note: "
                + c.clientErrors()
                + " of the cut sessions were cut by an error in the client, not by a failed turn"
                + " (first: "
                + sessions.firstClientError()
                + ")");
      }
    }
    printConnections(schedule.connections());
    out.println(
        "phasemeter load: report written to " + outDir.toAbsolutePath().resolve("report.html"));
    return verdict(
        sent, ok, errors, dropped, errorRateByBudgets ? Double.NaN : errorRate, gates, results);
  }

  /** A share as a percentage without trailing zeros: 0.01 is "1", 0.125 is "12.5". */
  private static String percent(double share) {
    return java.math.BigDecimal.valueOf(share)
        .movePointRight(2)
        .stripTrailingZeros()
        .toPlainString();
  }

  private void printConnections(Connections conns) {
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: connections: %d opened (%s), %d closed by the server after a"
                + " response, %d stale-connection retries",
            conns.opened(),
            conns.reuse() ? "reused" : "one per request",
            conns.closedByServer(),
            conns.staleRetries()));
    if (conns.closedByServer() + conns.staleRetries() > 0) {
      // Said once, so that a user learns it about their engine.
      out.println(
          "phasemeter load: note: the server closed kept-alive connections after responses"
              + " although it did not say 'Connection: close' (llama.cpp's server does so after"
              + " every stream); each request that went out on such a connection before its close"
              + " was seen was sent once more on a fresh connection, its latency from the intended"
              + " start. --connection-reuse off opens a connection per request instead.");
    }
  }

  /**
   * An invalid run (exit 4) before a breached budget (exit 3); else every budget holds (0).
   *
   * @param errorRate the run's error rate to judge against {@code --max-error-rate}, or NaN when
   *     the budgets' gates judge it
   */
  private int verdict(
      long sent,
      long ok,
      long errors,
      long dropped,
      double errorRate,
      List<BudgetResult> gates,
      List<BudgetResult> results) {
    List<String> reasons = new ArrayList<>();
    if (sent == 0) {
      reasons.add("no request was sent");
    } else if (ok == 0) {
      // Without a budgets file there is no error-rate gate, but a run without one success has
      // no latency to report: a wrong --model or --url must not exit 0.
      reasons.add(
          "no request succeeded ("
              + errors
              + " errors; the FAIL lines above say why): there is no latency to report");
    }
    if (sent > 0 && errorRate > o.maxErrorRate()) {
      reasons.add(
          String.format(
              Locale.ROOT,
              "error rate %.1f %% (%d of %d requests sent failed) is above the limit of %s %%"
                  + " (--max-error-rate%s)",
              100 * errorRate,
              sent - ok,
              sent,
              percent(o.maxErrorRate()),
              o.maxErrorRate() == LoadOptions.DEFAULT_MAX_ERROR_RATE
                  ? ", the default; a budgets file's max_error_rate wins"
                  : ""));
    }
    if (dropped > 0) {
      reasons.add(
          dropped
              + " iterations dropped at --max-in-flight "
              + o.maxInFlight()
              + ": the promised load was not generated");
    }
    for (BudgetResult g : gates) {
      if (g.breached()) {
        reasons.add(LiveTable.breachLine(g, null).trim());
      }
    }
    if (!reasons.isEmpty()) {
      out.println("phasemeter load: INVALID RUN (exit 4):");
      reasons.forEach(r -> out.println("  " + r));
      out.flush();
      return INVALID_RUN;
    }
    List<BudgetResult> breached = results.stream().filter(BudgetResult::breached).toList();
    if (!breached.isEmpty()) {
      out.println("phasemeter load: budget breached (exit 3):");
      breached.forEach(b -> out.println(LiveTable.breachLine(b, live.culprit(b))));
      out.flush();
      return BREACHED;
    }
    out.println("phasemeter load: every budget holds (exit 0)");
    out.flush();
    return OK;
  }
}
