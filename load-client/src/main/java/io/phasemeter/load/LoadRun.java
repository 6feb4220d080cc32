package io.phasemeter.load;

import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.report.PhaseStats;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongConsumer;

/**
 * One load run: schedules requests from a clock (open model) or keeps N in flight (closed model),
 * step by step; joins each with the proxy's record; prints the live table; judges the budgets and
 * writes the report. Exit codes as in DESIGN.md §7.
 */
public final class LoadRun {
  /** Exit codes (DESIGN.md §7). */
  public static final int OK = 0;

  public static final int USAGE = 2;
  public static final int BREACHED = 3;
  public static final int INVALID_RUN = 4;

  /** At most this many SLOW/FAIL lines per report interval; the rest are counted. */
  private static final int NOTABLE_LINES = 10;

  private final Vertx vertx;
  private final LoadOptions o;
  private final PrintWriter out;
  private final ClientBudgets budgets;
  private final TraceIds ids;
  private final Workload workload;
  private final String workloadText;
  private final String prefix;
  private final RequestRunner runner;
  private final Joiner joiner;
  private final Series measured;
  private final Object statsLock = new Object();
  private final PhaseStats cumulative = new PhaseStats();
  private final AtomicReference<PhaseStats> window = new AtomicReference<>(new PhaseStats());
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicLong seq = new AtomicLong();
  private final AtomicLong completed = new AtomicLong();
  private final AtomicLong notable = new AtomicLong();
  private final AtomicLong notableSuppressed = new AtomicLong();
  private final List<StepInfo> steps = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final AtomicLong droppedTotal = new AtomicLong();
  private final Map<String, Object> conditions = new LinkedHashMap<>();
  private volatile int currentStep;
  private long lastPrintNanos;
  private long lastPrintCompleted;
  private volatile String currentStepText = "";
  private RecordFeedClient feed;
  private long runStart;

  /**
   * The live table's thread, which also prints the SLOW and FAIL lines: the event loop that reads
   * the responses never writes to the terminal.
   */
  private final ScheduledExecutorService reporter =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "phasemeter-live-table");
            t.setDaemon(true);
            return t;
          });

  private volatile io.phasemeter.load.report.Connections connectionsAtStart;

  LoadRun(Vertx vertx, LoadOptions o, PrintWriter out, ClientBudgets budgets) {
    this.vertx = vertx;
    this.o = o;
    this.out = out;
    this.budgets = budgets;
    this.ids = TraceIds.random();
    this.prefix = String.format("%016x", ids.instanceId());
    this.workload = workload(o);
    this.workloadText = workloadText(o);
    this.runner =
        new RequestRunner(
            vertx,
            o.url(),
            Math.min(o.maxInFlight(), 4096),
            o.timeout(),
            gap -> {},
            o.connectionReuse());
    this.joiner =
        new Joiner(
            prefix,
            100_000,
            pair -> {
              synchronized (statsLock) {
                cumulative.add(pair);
                window.get().add(pair);
              }
            });
    this.measured = new Series(ids, seq, null);
  }

  /** Runs with a Vert.x of its own and returns the exit code. */
  public static int execute(LoadOptions o, PrintWriter out, PrintWriter err) {
    ClientBudgets budgets;
    try {
      budgets = o.budgets() == null ? ClientBudgets.none() : ClientBudgets.load(o.budgets());
      workload(o);
      for (double rate : o.steps().isEmpty() ? List.of(o.rate()) : o.steps()) {
        if (o.concurrency() == 0) {
          arrivalsFor(o, rate, 0);
        }
      }
    } catch (IllegalArgumentException e) {
      err.println("phasemeter load: " + e.getMessage());
      return USAGE;
    }
    Vertx vertx = Vertx.vertx();
    try {
      return new LoadRun(vertx, o, out, budgets).run(err);
    } catch (Exception e) {
      err.println("phasemeter load: the run failed: " + e);
      return INVALID_RUN;
    } finally {
      vertx.close();
    }
  }

  int run(PrintWriter err) throws Exception {
    try {
      return runOnce(err);
    } finally {
      // Already stopped on the way out of a run; here for every other way out.
      reporter.shutdownNow();
    }
  }

  private int runOnce(PrintWriter err) throws Exception {
    if (o.admin() != null) {
      joiner.sampledOnly(o.joinSampledOnly());
      feed = new RecordFeedClient(vertx, o.admin(), o.adminToken());
      try {
        feed.start(joiner::record).await(10, TimeUnit.SECONDS);
      } catch (Exception e) {
        err.println("phasemeter load: " + e.getMessage());
        return USAGE;
      }
      conditions.putAll(proxyConditions());
    }
    recordConditions();
    out.println(
        "phasemeter load: "
            + o.arrivalDescription()
            + " -> "
            + o.url()
            + " (model "
            + o.model()
            + ", "
            + workloadText
            + (o.admin() == null
                ? "; no --admin: no join, no envelope"
                : "; joining with " + o.admin())
            + ")");
    out.flush();
    warmUp();
    warmUpAtLoad(reporter);
    collectBeforeTheClock();
    runStart = System.nanoTime();
    // The warm-up's connections are not the run's.
    connectionsAtStart = connectionCounts();
    lastPrintNanos = runStart;
    long period = Math.max(1000, o.reportInterval().toMillis());
    reporter.scheduleAtFixedRate(this::printLiveSafely, period, period, TimeUnit.MILLISECONDS);
    try {
      if (o.concurrency() > 0) {
        steps.add(closedStep(measured, 0, o.concurrency(), o.duration()).await());
      } else if (!o.steps().isEmpty()) {
        for (int i = 0; i < o.steps().size(); i++) {
          double rate = o.steps().get(i);
          steps.add(openStep(measured, i, rate, o.stepDuration(), arrivals(rate, i)));
        }
      } else {
        steps.add(openStep(measured, 0, o.rate(), o.duration(), arrivals(o.rate(), 0)));
      }
      // Whatever is still in flight finishes (or times out) before the join is closed.
      long deadline = System.nanoTime() + o.timeout().toNanos() + 5_000_000_000L;
      while (inFlight.get() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      long joinDeadline = System.nanoTime() + o.joinGrace().toNanos();
      while (feed != null
          && feed.connected()
          && joiner.waiting() > 0
          && System.nanoTime() < joinDeadline) {
        Thread.sleep(20);
      }
      joiner.flush();
    } finally {
      // Lines already handed to the reporter are printed; the periodic table stops.
      reporter.shutdown();
      reporter.awaitTermination(10, TimeUnit.SECONDS);
      runner.close();
      if (feed != null) {
        feed.close();
      }
    }
    long runEnd = System.nanoTime();
    return finish(runEnd);
  }

  /** Exact lengths (token-id prompts) unless --chat; from --mix, --profile or custom lengths. */
  static Workload workload(LoadOptions o) {
    if (o.chat()) {
      return Workload.chat(
          o.model(), o.outputTokens() > 0 ? o.outputTokens() : 128, o.stream(), o.seed());
    }
    if (o.mix() != null) {
      return Workload.completions(o.model(), Mix.parse(o.mix()), o.stream(), o.seed());
    }
    return Workload.completions(o.model(), profile(o), o.stream(), o.seed());
  }

  static Profile profile(LoadOptions o) {
    if (o.profile() != null) {
      return Profile.named(o.profile());
    }
    if (o.inputTokens() > 0 && o.outputTokens() > 0) {
      return Profile.custom(o.inputTokens(), o.outputTokens());
    }
    if (o.inputTokens() > 0 || o.outputTokens() > 0) {
      throw new IllegalArgumentException("--input-tokens and --output-tokens go together");
    }
    return Profile.DOC_QA;
  }

  static String workloadText(LoadOptions o) {
    String lengths;
    if (o.chat()) {
      lengths = "chat, free text";
    } else if (o.mix() != null) {
      lengths = "mix " + o.mix();
    } else {
      Profile p = profile(o);
      lengths = p.name() + " (" + p.inputTokens() + " in / " + p.outputTokens() + " out)";
    }
    return lengths + (o.stream() ? ", streamed" : ", whole responses");
  }

  /**
   * Sends {@code --warmup} requests one by one before the clock starts, under a different trace-id
   * prefix so their records are ignored: JIT and connection set-up stay out of the figures.
   */
  private void warmUp() throws Exception {
    if (o.warmup() <= 0) {
      return;
    }
    TraceIds warm = TraceIds.random();
    Workload w = workload(o);
    RequestRunner warmRunner =
        new RequestRunner(vertx, o.url(), 1, o.timeout(), gap -> {}, o.connectionReuse());
    try {
      for (int i = 1; i <= o.warmup(); i++) {
        warmRunner
            .run(-i, w.request(-i), warm.traceId(i), warm.traceparent(i), 0, System.nanoTime())
            .await(o.timeout().toMillis() + 5000, TimeUnit.MILLISECONDS);
      }
    } finally {
      warmRunner.close();
    }
    out.println("phasemeter load: " + o.warmup() + " warm-up requests sent (not counted)");
  }

  /**
   * Runs the first step's load for {@code --warmup-duration} before the clock starts (an open
   * model's rate rising linearly from 0 to the first step's, a closed model's concurrency), through
   * the same pacing, connections and bookkeeping as the run, so that the JIT compiles what the run
   * will execute and the pool opens what it will need. Nothing of it is counted: its requests carry
   * another trace-id prefix (their records are ignored) and their results go to statistics that are
   * thrown away. The clock starts as the warm-up's schedule ends, after at most the one collection
   * of {@link #collectBeforeTheClock} (tens of milliseconds); warm-up requests still in flight then
   * finish uncounted.
   */
  private void warmUpAtLoad(ScheduledExecutorService live) throws Exception {
    Duration d = o.warmupDuration();
    if (d.isZero()) {
      return;
    }
    PhaseStats discarded = new PhaseStats();
    Series warm = new Series(TraceIds.random(), new AtomicLong(), discarded);
    live.schedule(
        () -> {
          try {
            rehearseLiveTable(discarded);
          } catch (RuntimeException e) {
            // Only a rehearsal: the real tables report their own failures.
          }
        },
        d.toNanos() / 2,
        TimeUnit.NANOSECONDS);
    StepInfo s;
    double rate = 0;
    if (o.concurrency() > 0) {
      s = closedStep(warm, 0, o.concurrency(), d).await();
    } else {
      // Rising from 0 to the rate: the JIT compiles while the load is light, and the client
      // never starts the run already behind.
      rate = o.steps().isEmpty() ? o.rate() : o.steps().get(0);
      s = openStep(warm, 0, rate, d, Arrivals.ramp(rate, d.toNanos() / 1e9));
    }
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: warm-up at load for %.1f s%s: %d requests sent, %d dropped (not"
                + " counted)",
            d.toNanos() / 1e9,
            rate > 0 ? String.format(Locale.ROOT, " (rising to %.2f req/s)", rate) : "",
            s.sent(),
            s.dropped()));
    out.flush();
  }

  /**
   * Collects the client's young generation once, between the warm-up and the clock, so that the run
   * starts with an empty eden: the warm-up leaves it part full, and a young pause in the first
   * seconds of the run (10-30 ms at 5,000 req/s) makes every request due during it leave late. Only
   * with G1 and {@code -XX:+ExplicitGCInvokesConcurrent} (both in config/load-client.jvm): {@code
   * System.gc()} is then a young pause that starts a concurrent cycle, and returns when the cycle
   * ends (25-45 ms in all at 5,000 req/s on a 2-core VM, during which nothing is sent). A full
   * collection there instead once left the first 0.6 s of a run at 5,000 req/s up to 68 ms late, so
   * with any other collector or without the flag nothing is collected. Warm-up requests still in
   * flight wait for it; none is counted. How long it took goes into the report's conditions ({@code
   * client_gc_before_clock_ms}, null when skipped).
   */
  private void collectBeforeTheClock() {
    if (!youngCollectionOnRequest()) {
      conditions.put("client_gc_before_clock_ms", null);
      return;
    }
    long t0 = System.nanoTime();
    System.gc();
    conditions.put("client_gc_before_clock_ms", Math.round((System.nanoTime() - t0) / 1e4) / 100.0);
  }

  /** Whether {@code System.gc()} is G1's young pause plus a concurrent cycle here. */
  static boolean youngCollectionOnRequest() {
    try {
      boolean g1 =
          java.lang.management.ManagementFactory.getGarbageCollectorMXBeans().stream()
              .anyMatch(b -> b.getName().startsWith("G1 "));
      return g1
          && Boolean.parseBoolean(
              java.lang.management.ManagementFactory.getPlatformMXBean(
                      com.sun.management.HotSpotDiagnosticMXBean.class)
                  .getVMOption("ExplicitGCInvokesConcurrent")
                  .getValue());
    } catch (RuntimeException e) {
      // Not HotSpot, or no such option: leave the collector alone.
      return false;
    }
  }

  private Arrivals arrivals(double rate, int step) {
    return arrivalsFor(o, rate, step);
  }

  static Arrivals arrivalsFor(LoadOptions o, double rate, int step) {
    long seed = o.seed() * 31 + step;
    return switch (o.arrival()) {
      case "poisson" -> Arrivals.poisson(rate, seed);
      case "gamma" -> Arrivals.gamma(rate, o.burstiness(), seed);
      default -> Arrivals.constant(rate);
    };
  }

  /**
   * Open model: requests leave at their scheduled times, whatever the responses do. The calling
   * thread paces the schedule ({@link Pacer}); the runner's event loop only sends and reads.
   */
  private StepInfo openStep(Series series, int index, double rate, Duration d, Arrivals arrivals) {
    if (series.counted()) {
      currentStep = index;
      currentStepText = stepText(index, String.format(Locale.ROOT, "offered %.2f req/s", rate));
    }
    long start = System.nanoTime();
    long end = start + d.toNanos();
    Prepared[] pending = new Prepared[1];
    Pacer.Launcher launcher =
        new Pacer.Launcher() {
          @Override
          public boolean launch(long intended) {
            if (inFlight.get() >= o.maxInFlight()) {
              if (series.counted()) {
                droppedTotal.incrementAndGet();
              }
              return false;
            }
            Prepared p = pending[0] != null ? pending[0] : series.build();
            pending[0] = null;
            series.issue();
            start(series, p, intended, index, null);
            return true;
          }

          @Override
          public void prepare() {
            if (pending[0] == null) {
              pending[0] = series.build();
            }
          }
        };
    long[] counts = new Pacer(System::nanoTime, Pacer.PARK).run(arrivals, start, end, launcher);
    return new StepInfo(index, rate, 0, start, end, counts[0], counts[1]);
  }

  /** Closed model: N requests in flight, each followed at once by the next. */
  private Future<StepInfo> closedStep(Series series, int index, int concurrency, Duration d) {
    Promise<StepInfo> done = Promise.promise();
    Context ctx = vertx.getOrCreateContext();
    if (series.counted()) {
      currentStepText = stepText(index, "concurrency " + concurrency);
    }
    AtomicLong sent = new AtomicLong();
    AtomicInteger running = new AtomicInteger(concurrency);
    ctx.runOnContext(
        v -> {
          long start = System.nanoTime();
          long end = start + d.toNanos();
          for (int w = 0; w < concurrency; w++) {
            Runnable[] loop = new Runnable[1];
            loop[0] =
                () -> {
                  long now = System.nanoTime();
                  if (now >= end) {
                    if (running.decrementAndGet() == 0) {
                      done.complete(
                          new StepInfo(index, -1, concurrency, start, end, sent.get(), 0));
                    }
                    return;
                  }
                  sent.incrementAndGet();
                  Prepared p = series.build();
                  series.issue();
                  start(series, p, now, index, () -> ctx.runOnContext(x -> loop[0].run()));
                };
            loop[0].run();
          }
        });
    return done.future();
  }

  /** A request built before its start: its number, body and trace context. */
  private record Prepared(long seq, RequestSpec spec, String traceId, String traceparent) {}

  /**
   * The {@code client_total} p99 above twice which a successful request is SLOW, read from a run's
   * statistics. Reading a p99 walks the histogram: once per request it was a third of the event
   * loop at 3,000 req/s (JFR, bench/run); at every 1 % of growth (every request from the 100th to
   * the 200th, ~460 walks by the 10,000th) it still took most of the loop in the first second of a
   * run at 5,000 req/s, the walk not yet compiled. So it is refreshed every 100 ms, and tried every
   * 100 successes until there is one. Thread-safe.
   */
  static final class SlowThreshold {
    static final long REFRESH_NANOS = 100_000_000L;
    private final PhaseStats stats;
    private long okSeen;
    private long atNanos;
    private double p99 = Double.NaN;

    SlowThreshold(PhaseStats stats) {
      this.stats = stats;
    }

    /** The current p99 in ms, counting one more success; NaN until 100 successes are in. */
    synchronized double p99Ms() {
      okSeen++;
      long now = System.nanoTime();
      if (Double.isNaN(p99) ? okSeen % 100 == 0 : now - atNanos >= REFRESH_NANOS) {
        atNanos = now;
        p99 =
            stats.count("client_total") >= 100
                ? stats.quantileMs("client_total", 0.99)
                : Double.NaN;
      }
      return p99;
    }

    /** Whether {@code r} took more than twice {@code p99Ms}; never before there is a p99. */
    static boolean slow(ClientResult r, double p99Ms) {
      return !Double.isNaN(p99Ms) && r.totalNanos() / 1e6 > 2 * p99Ms;
    }
  }

  /**
   * The requests of the measured run, or of the warm-up at load: where their numbers and trace ids
   * come from, and where their results go. Warm-up requests are numbered below zero (beneath the
   * one-by-one warm-up's), and their results and inter-token gaps go through a joiner of their own
   * into statistics that nobody reads: the same code runs as for a measured request, and nothing is
   * counted.
   */
  private final class Series {
    private final TraceIds ids;
    private final AtomicLong issued;
    private final PhaseStats discarded;
    private final Joiner pairs;
    private final LongConsumer itl;
    private final SlowThreshold slow;

    /**
     * @param issued the run's {@code seq} (numbers 1, 2, …), or a counter of its own
     * @param discarded null for the measured run; else where the warm-up's results go
     */
    Series(TraceIds ids, AtomicLong issued, PhaseStats discarded) {
      this.ids = ids;
      this.issued = issued;
      this.discarded = discarded;
      this.slow = new SlowThreshold(discarded == null ? cumulative : discarded);
      this.pairs =
          discarded == null
              ? joiner
              : new Joiner(String.format("%016x", ids.instanceId()), 0, discarded::add);
      this.itl =
          discarded != null
              ? discarded::addItl
              : gap -> {
                synchronized (statsLock) {
                  cumulative.addItl(gap);
                  window.get().addItl(gap);
                }
              };
    }

    boolean counted() {
      return discarded == null;
    }

    /** Builds the next request; it counts as issued once {@link #issue} is called. */
    Prepared build() {
      long k = issued.get() + 1;
      long n = counted() ? k : -(o.warmup() + k);
      return new Prepared(n, workload.request(n), ids.traceId(k), ids.traceparent(k));
    }

    void issue() {
      issued.incrementAndGet();
    }

    void done(ClientResult r) {
      if (counted()) {
        completed.incrementAndGet();
        notable(r, slow);
      } else if (r.ok()) {
        // The same threshold work as a measured request, so that the run starts compiled.
        SlowThreshold.slow(r, slow.p99Ms());
      }
      if (feed != null && counted()) {
        pairs.client(r);
      } else {
        pairs.alone(r);
      }
    }
  }

  private void start(Series series, Prepared p, long intended, int step, Runnable then) {
    inFlight.incrementAndGet();
    runner.run(
        p.seq(),
        p.spec(),
        p.traceId(),
        p.traceparent(),
        step,
        intended,
        series.itl,
        r -> {
          inFlight.decrementAndGet();
          series.done(r);
          if (then != null) {
            then.run();
          }
        });
  }

  /**
   * Failed requests, and very slow ones, are printed with their trace id; nothing else is. At most
   * {@link #NOTABLE_LINES} per report interval are formatted and printed, by the reporter's thread;
   * the rest are only counted. A GC pause or a stall makes hundreds of requests SLOW at once:
   * formatting and printing each on the event loop (as this once did) made the stall longer.
   */
  private void notable(ClientResult r, SlowThreshold threshold) {
    double p99 = r.ok() ? threshold.p99Ms() : Double.NaN;
    if (r.ok() && !SlowThreshold.slow(r, p99)) {
      return;
    }
    if (notable.incrementAndGet() > NOTABLE_LINES) {
      notableSuppressed.incrementAndGet();
      return;
    }
    try {
      reporter.execute(() -> printLine(notableLine(r, p99)));
    } catch (RejectedExecutionException e) {
      // The run has ended (a response after the in-flight deadline): counted, not printed.
      notableSuppressed.incrementAndGet();
    }
  }

  /** The SLOW or FAIL line of a notable request. */
  static String notableLine(ClientResult r, double p99Ms) {
    if (!r.ok()) {
      return "  FAIL trace="
          + r.traceId()
          + " class="
          + r.error()
          + " status="
          + r.status()
          + (r.invalidReason() == null ? "" : " reason=" + r.invalidReason());
    }
    return String.format(
        Locale.ROOT,
        "  SLOW trace=%s client_total=%.1f ms (> 2 × p99 %.1f ms)",
        r.traceId(),
        r.totalNanos() / 1e6,
        p99Ms);
  }

  private void printLine(String line) {
    synchronized (out) {
      out.println(line);
      out.flush();
    }
  }

  private void printLiveSafely() {
    try {
      printLive();
    } catch (RuntimeException e) {
      // A failed table must not stop the next ones (a scheduled task that throws is cancelled).
      synchronized (out) {
        out.println("phasemeter load: live table failed: " + e);
        out.flush();
      }
    }
  }

  /**
   * One live table, on the reporter's own thread. Only swapping the window and copying the run's
   * figures hold the lock that every finished request takes; the quantiles, the budgets and the
   * formatting happen outside it. Printed under that lock on a timer of the event loops, the table
   * once held the loop that reads the responses for 50 ms (bench at 2,000 req/s: 300 requests late
   * at every table).
   */
  private void printLive() {
    PhaseStats w;
    PhaseStats all;
    synchronized (statsLock) {
      w = window.getAndSet(new PhaseStats());
      all = cumulative.copy();
    }
    long nowNanos = System.nanoTime();
    long done = completed.get();
    double windowSeconds = Math.max(1e-3, (nowNanos - lastPrintNanos) / 1e9);
    double achieved = (done - lastPrintCompleted) / windowSeconds;
    lastPrintNanos = nowNanos;
    lastPrintCompleted = done;
    long suppressed = notableSuppressed.getAndSet(0);
    notable.set(0);
    synchronized (out) {
      printTable(out, (nowNanos - runStart) / 1e9, achieved, suppressed, w, all);
    }
  }

  private void printTable(
      PrintWriter to,
      double elapsed,
      double achieved,
      long suppressed,
      PhaseStats w,
      PhaseStats all) {
    List<BudgetResult> breaches =
        budgets.judgeLatency(o.model(), all).stream().filter(BudgetResult::breached).toList();
    double coverage = all.joinCoverage();
    String header =
        String.format(
            Locale.ROOT,
            "[%6.1fs] %s  achieved %.2f req/s  sent %d  done %d  in-flight %d  drops %d%s  join %s%s",
            elapsed,
            currentStepText,
            achieved,
            seq.get(),
            completed.get(),
            inFlight.get(),
            droppedTotal.get(),
            connections().staleRetries() > 0
                ? "  stale-conn retries " + connections().staleRetries()
                : "",
            feed == null
                ? "-"
                : String.format(
                    Locale.ROOT, "%.1f%%", 100 * (Double.isNaN(coverage) ? 1.0 : coverage)),
            suppressed > 0 ? "  (" + suppressed + " more slow/failed not printed)" : "");
    LiveTable.print(to, header, w, all, breaches, b -> culprit(b, all));
  }

  /**
   * Prints a table of the warm-up's figures to nowhere, half-way through the warm-up at load: the
   * first real table then runs compiled code. Its first run, class loading and all, coincided with
   * 400 ms of late requests in one bench run at 2,000 req/s.
   */
  private void rehearseLiveTable(PhaseStats warmUp) {
    PhaseStats all = warmUp.copy();
    printTable(new PrintWriter(java.io.Writer.nullWriter()), 0, 0, 1, all, all);
  }

  private double coverage() {
    double c;
    synchronized (statsLock) {
      c = cumulative.joinCoverage();
    }
    return Double.isNaN(c) ? 1.0 : c;
  }

  private String stepText(int index, String what) {
    int total = o.steps().isEmpty() ? 1 : o.steps().size();
    return "step " + (index + 1) + "/" + total + " (" + what + ")";
  }

  private Map<String, Object> proxyConditions() {
    Map<String, Object> c = new LinkedHashMap<>();
    try {
      HttpGet.Result r = HttpGet.get(vertx, o.admin().resolve("/admin/stats"), o.adminToken());
      if (r.status() == 200) {
        JsonObject stats = new JsonObject(r.body());
        c.put("proxy_version", stats.getValue("version"));
        c.put("proxy_sampling", stats.getValue("sampling"));
        c.put("record_schema", stats.getValue("record_schema"));
      }
    } catch (Exception e) {
      c.put("proxy_stats_error", e.getMessage());
    }
    return c;
  }

  private void recordConditions() {
    conditions.put("phasemeter_version", Version.version());
    conditions.put("git_commit", Version.gitCommit());
    conditions.put("target_url", o.url().toString());
    conditions.put("admin_url", o.admin() == null ? null : o.admin().toString());
    conditions.put("model", o.model());
    conditions.put("workload", workloadText);
    conditions.put("arrival", o.arrivalDescription());
    conditions.put("max_in_flight", o.maxInFlight());
    conditions.put("connection_reuse", o.connectionReuse() ? "on" : "off");
    conditions.put("streaming", o.stream());
    conditions.put("seed", o.seed());
    conditions.put("warmup_requests", o.warmup());
    conditions.put("warmup_at_load_s", o.warmupDuration().toNanos() / 1e9);
    conditions.put("budgets_file", o.budgets() == null ? null : o.budgets().toString());
    conditions.put("budgets_sha256", budgets.sha256());
    conditions.put("trace_id_prefix", prefix);
    conditions.put("started_at", java.time.Instant.now().toString());
  }

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
    double errorRate = pairs.isEmpty() ? 0 : (double) errors / pairs.size();
    double coverage = coverage();
    List<BudgetResult> results = new ArrayList<>(budgets.judgeLatency(o.model(), cumulative));
    List<BudgetResult> gates = budgets.judgeGates(o.model(), errorRate, coverage, feed != null);
    results.addAll(gates);
    String joinBasis = null;
    if (feed != null) {
      long exported = pairs.stream().filter(p -> p.joined() && p.server().sampled()).count();
      long joinedOk = pairs.stream().filter(p -> p.joined() && p.client().ok()).count();
      double exportedShare = pairs.isEmpty() ? 1.0 : (double) exported / pairs.size();
      Object sampling = conditions.get("proxy_sampling");
      if (o.joinSampledOnly()) {
        joinBasis =
            String.format(
                Locale.ROOT,
                "envelopes and server phases come only from the requests whose traces the proxy"
                    + " exported (%s): %d of %d successful requests joined (%.1f%%). With"
                    + " keep_slower_than and a low ratio that share is the slow tail, so these"
                    + " quantiles describe the tail, not every request.",
                sampling,
                joinedOk,
                pairs.stream().filter(p -> p.client().ok()).count(),
                100 * coverage());
      } else if (exportedShare < 1.0) {
        joinBasis =
            String.format(
                Locale.ROOT,
                "every record was joined from the feed; the proxy exported the traces of %.1f%% of"
                    + " requests (%s)",
                100 * exportedShare,
                sampling);
      }
      conditions.put(
          "join_basis", joinBasis == null ? "every record from the proxy's feed" : joinBasis);
      conditions.put("join_unsampled_records_left_out", joiner.unsampled());
      conditions.put("join_foreign_records_ignored", joiner.foreign());
      conditions.put("feed_malformed_events", feed.malformed());
    }
    java.nio.file.Path outDir = o.out();
    io.phasemeter.load.report.ReportWriter.write(
        outDir,
        new io.phasemeter.load.report.ReportInput(
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
            cumulative,
            connections()));
    printLiveFinal();
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
            feed == null
                ? "n/a (no --admin)"
                : String.format(Locale.ROOT, "%.1f%%", 100 * coverage)));
    if (joinBasis != null) {
      out.println("phasemeter load: note: " + joinBasis);
    }
    io.phasemeter.load.report.Connections conns = connections();
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
    out.println(
        "phasemeter load: report written to " + outDir.toAbsolutePath().resolve("report.html"));
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
      breached.forEach(b -> out.println(LiveTable.breachLine(b, culprit(b))));
      out.flush();
      return BREACHED;
    }
    out.println("phasemeter load: every budget holds (exit 0)");
    out.flush();
    return OK;
  }

  private void printLiveFinal() {
    long suppressed = notableSuppressed.getAndSet(0);
    synchronized (statsLock) {
      LiveTable.print(
          out,
          "final (whole run):"
              + (suppressed > 0
                  ? "  (" + suppressed + " more slow/failed since the last table not printed)"
                  : ""),
          cumulative,
          cumulative,
          budgets.judgeLatency(o.model(), cumulative).stream()
              .filter(BudgetResult::breached)
              .toList(),
          this::culprit);
    }
  }

  private io.phasemeter.load.report.Connections connectionCounts() {
    return new io.phasemeter.load.report.Connections(
        runner.connectionReuse(),
        runner.connectionsOpened(),
        runner.connectionsClosedByServer(),
        runner.staleConnectionRetries());
  }

  /** What the run's connections did since the clock started (not during the warm-up). */
  private io.phasemeter.load.report.Connections connections() {
    io.phasemeter.load.report.Connections now = connectionCounts();
    io.phasemeter.load.report.Connections base = connectionsAtStart;
    return base == null
        ? now
        : new io.phasemeter.load.report.Connections(
            now.reuse(),
            now.opened() - base.opened(),
            now.closedByServer() - base.closedByServer(),
            now.staleRetries() - base.staleRetries());
  }

  /** The phase behind a breach, judged on the whole run at the budget's quantile. */
  private String culprit(BudgetResult b) {
    synchronized (statsLock) {
      return culprit(b, cumulative);
    }
  }

  private String culprit(BudgetResult b, PhaseStats stats) {
    double q =
        budgets.forModel(o.model()).stream()
            .filter(x -> x.name().equals(b.name()))
            .mapToDouble(ClientBudgets.Budget::quantile)
            .findFirst()
            .orElse(0.95);
    return ClientBudgets.culprit(b.phase(), q, stats);
  }
}
