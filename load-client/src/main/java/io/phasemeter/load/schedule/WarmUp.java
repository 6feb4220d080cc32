package io.phasemeter.load.schedule;

import io.phasemeter.load.http.CalibrationServer;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.join.Joiner;
import io.phasemeter.load.report.LiveReport;
import io.phasemeter.load.report.PhaseStats;
import io.phasemeter.load.report.SlowThreshold;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import java.io.PrintWriter;
import java.net.URI;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** What runs before the clock starts, so that JIT, connections and garbage stay out of the run. */
public final class WarmUp {
  private WarmUp() {}

  /** Where the one-by-one warm-up goes ({@code --warmup-target}). */
  public enum Target {
    /** The client's own in-process endpoint: the target sees no extra request. */
    SELF,
    /** The target, as every counted request: its path and the connection are warmed too. */
    SERVER;

    /** {@code self} or {@code server}, for a flag. */
    public static Target parse(String flag, String value) {
      if ("self".equalsIgnoreCase(value)) {
        return SELF;
      }
      if ("server".equalsIgnoreCase(value)) {
        return SERVER;
      }
      throw new IllegalArgumentException(flag + " must be self or server, got '" + value + "'");
    }

    /** The flag's word. */
    public String key() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  /**
   * The longest the one-by-one warm-up against the client's own endpoint takes, whatever {@code
   * --warmup} says: on a slow machine it stops there, and says how many it sent.
   */
  public static final Duration SELF_LIMIT = Duration.ofSeconds(3);

  /**
   * What the warm-up needs of the run's options.
   *
   * @param requests {@code --warmup}: requests sent one by one
   * @param target {@code --warmup-target}: where they go
   * @param atLoad {@code --warmup-duration}: the first step's load, uncounted (zero for none)
   * @param url the target
   * @param timeout a request's timeout
   * @param connectionReuse whether connections are kept alive
   * @param concurrency the closed model's concurrency, or 0 for the open model
   * @param firstRate the open model's first rate (req/s)
   * @param transport how the target is spoken to (its trust, its HTTP version); the client's own
   *     endpoint is plain HTTP/1.1 whatever it says
   */
  public record Plan(
      int requests,
      Target target,
      Duration atLoad,
      URI url,
      Duration timeout,
      boolean connectionReuse,
      int concurrency,
      double firstRate,
      Transport transport) {}

  /**
   * Sends {@code --warmup} requests one by one before the clock starts, through the same client
   * code as the run's (connection pool, exchange, parsing, validation) with the run's own request
   * bodies, so that the JIT has compiled the client's request path before the first counted
   * request, whatever the rate: at a few requests a second a run never sends enough requests for
   * that, and its requests would be timed by an interpreter. To the target ({@link Target#SERVER}),
   * under a different trace-id prefix so their records are ignored; or to the client's own
   * in-process endpoint ({@code self}, bounded by {@link #SELF_LIMIT}), which the target never
   * sees.
   *
   * @param self the client's own endpoint, for {@link Target#SELF}
   * @return the requests sent
   */
  public static int oneByOne(
      io.vertx.core.Vertx vertx, Plan o, Workload w, CalibrationServer self, PrintWriter out)
      throws Exception {
    return oneByOne(
        vertx,
        o,
        w,
        self,
        out,
        o.target() == Target.SELF ? "(--warmup-target self)" : "(--warmup-target server)");
  }

  /**
   * {@link #oneByOne(io.vertx.core.Vertx, Plan, Workload, CalibrationServer, PrintWriter)}, saying
   * why in the lines it prints.
   *
   * @param why what the requests are for, in the printed lines
   */
  public static int oneByOne(
      io.vertx.core.Vertx vertx,
      Plan o,
      Workload w,
      CalibrationServer self,
      PrintWriter out,
      String why)
      throws Exception {
    if (o.requests() <= 0) {
      return 0;
    }
    boolean toSelf = o.target() == Target.SELF;
    String where = toSelf ? "the client's own endpoint" : "the target";
    out.println(
        "phasemeter load: warming up: up to "
            + o.requests()
            + " requests one by one to "
            + where
            + (toSelf ? String.format(Locale.ROOT, " (at most %d s)", SELF_LIMIT.toSeconds()) : "")
            + " "
            + why
            + " ...");
    out.flush();
    URI url = toSelf ? URI.create("http://127.0.0.1:" + self.port()) : o.url();
    long limit = toSelf ? System.nanoTime() + SELF_LIMIT.toNanos() : Long.MAX_VALUE;
    TraceIds warm = TraceIds.random();
    RequestRunner warmRunner =
        new RequestRunner(
            vertx,
            url,
            1,
            o.timeout(),
            gap -> {},
            o.connectionReuse(),
            toSelf ? Transport.DEFAULT : o.transport());
    int sent = 0;
    long t0 = System.nanoTime();
    try {
      for (int i = 1; i <= o.requests() && System.nanoTime() < limit; i++) {
        RequestSpec spec = w.request(-i);
        warmRunner
            .run(-i, spec, warm.traceId(i), warm.traceparent(i), 0, System.nanoTime())
            .await(o.timeout().toMillis() + 5000, TimeUnit.MILLISECONDS);
        sent++;
      }
    } finally {
      warmRunner.close();
    }
    out.println(
        "phasemeter load: "
            + sent
            + " warm-up requests sent one by one to "
            + where
            + " "
            + why
            + String.format(
                Locale.ROOT, " in %.1f s (not counted)", (System.nanoTime() - t0) / 1e9));
    return sent;
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
  public static boolean atLoad(
      StepRunner steps, Plan o, Workload workload, LiveReport live, PrintWriter out)
      throws Exception {
    return atLoad(steps, o, workload, live, out, null);
  }

  /**
   * {@link #atLoad(StepRunner, Plan, Workload, LiveReport, PrintWriter)}, an open model's load at
   * its full rate from the start with {@code atRate} (a process whose JIT has already compiled this
   * load: nothing to rise for), or rising from 0 when it is null.
   */
  public static boolean atLoad(
      StepRunner steps,
      Plan o,
      Workload workload,
      LiveReport live,
      PrintWriter out,
      Arrivals atRate)
      throws Exception {
    if (o.atLoad().isZero()) {
      return false;
    }
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: warming up: the first step's load for %.1f s to the target"
                + " (--warmup-duration) ...",
            o.atLoad().toNanos() / 1e9));
    out.flush();
    StepInfo s = atLoad(steps, o, o.atLoad(), workload, live, atRate);
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: warm-up at load for %.1f s%s: %d requests sent, %d dropped (not"
                + " counted)",
            o.atLoad().toNanos() / 1e9,
            o.concurrency() > 0
                ? ""
                : String.format(
                    Locale.ROOT,
                    atRate == null ? " (rising to %.2f req/s)" : " (at %.2f req/s)",
                    o.firstRate()),
            s.sent(),
            s.dropped()));
    out.flush();
    return true;
  }

  /**
   * The first step's load for {@link #SELF_AT_LOAD} against the client's own endpoint (a runner of
   * its own), as {@link #atLoad} does against the target: after the one-by-one warm-up, which
   * compiles one request at a time, this compiles what a run at its rate executes (the pacing, the
   * requests in flight together, the bookkeeping of every result), which the one-by-one requests
   * never reach; without it, the first seconds of a run at 200 req/s had envelopes of 6-13 ms
   * against 0.6 ms later (measured in bench/run clientfloor). Nothing of it is counted or sent to
   * the target.
   *
   * @param self a step runner whose requests go to the client's own endpoint
   * @return requests sent
   */
  public static long atLoadAgainstSelf(
      StepRunner self, Plan o, Workload workload, LiveReport live, PrintWriter out)
      throws Exception {
    // A low rate sends too few requests in that time to compile anything: at least SELF_MIN_RATE.
    Plan p =
        new Plan(
            o.requests(),
            o.target(),
            SELF_AT_LOAD,
            o.url(),
            o.timeout(),
            o.connectionReuse(),
            o.concurrency(),
            Math.max(SELF_MIN_RATE, o.firstRate()),
            o.transport());
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: warming up: the run's load for %.1f s to the client's own endpoint"
                + " ...",
            SELF_AT_LOAD.toNanos() / 1e9));
    out.flush();
    StepInfo s = atLoad(self, p, SELF_AT_LOAD, workload, live, null);
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: %d requests in %.1f s at the run's %s to the client's own endpoint"
                + " (not counted)",
            s.sent(),
            SELF_AT_LOAD.toNanos() / 1e9,
            o.concurrency() > 0
                ? "concurrency"
                : String.format(
                    Locale.ROOT, "rate or more (rising to %.2f req/s)", p.firstRate())));
    out.flush();
    return s.sent();
  }

  /** The lowest rate {@link #atLoadAgainstSelf} rises to (req/s). */
  public static final double SELF_MIN_RATE = 500;

  /** How long the run's load goes to the client's own endpoint ({@link #atLoadAgainstSelf}). */
  public static final Duration SELF_AT_LOAD = Duration.ofSeconds(2);

  /** The first step's load for {@code d}, uncounted; null when {@code d} is zero. */
  private static StepInfo atLoad(
      StepRunner steps, Plan o, Duration d, Workload workload, LiveReport live, Arrivals atRate)
      throws Exception {
    if (d.isZero()) {
      return null;
    }
    PhaseStats discarded = new PhaseStats();
    TraceIds ids = TraceIds.random();
    Joiner alone = new Joiner(String.format("%016x", ids.instanceId()), 0, discarded::add);
    SlowThreshold slow = new SlowThreshold(discarded);
    Series warm =
        Series.warmUp(
            ids,
            o.requests(),
            workload,
            discarded::addItl,
            r -> {
              if (r.ok()) {
                // The same threshold work as a measured request, so that the run starts compiled.
                SlowThreshold.slow(r, slow.p99Ms());
              }
              alone.alone(r);
            });
    live.rehearseAfter(Duration.ofNanos(d.toNanos() / 2), discarded);
    if (o.concurrency() > 0) {
      return steps.closed(warm, 0, o.concurrency(), d).await();
    }
    double rate = o.firstRate();
    if (atRate != null) {
      return steps.open(warm, 0, rate, d, atRate);
    }
    // Rising from 0 to the rate: the JIT compiles while the load is light, and the client
    // never starts the run already behind.
    return steps.open(warm, 0, rate, d, Arrivals.ramp(rate, d.toNanos() / 1e9));
  }

  /** The longest {@link #awaitQuietCompiler} waits. */
  public static final Duration COMPILER_WAIT_LIMIT = Duration.ofSeconds(5);

  /**
   * Waits, before the clock, until the JIT compiler has stopped compiling what the warm-up made hot
   * (its total compilation time grew by under 2 ms in each of two consecutive 100 ms polls), at
   * most {@link #COMPILER_WAIT_LIMIT}: the compiles a warm-up queues otherwise run in the first
   * seconds of the run, on the cores the target shares on a small machine (on 2 cores, the first
   * 1,000 requests at 200 req/s had ttft_envelope p50 4-38 ms and the proxy's own server_ttft 5-12
   * ms, against 0.6 and 2 ms after, measured in bench/run clientfloor). Says how long it waited;
   * the caller puts it into the conditions ({@code client_jit_wait_ms}).
   *
   * @return milliseconds waited, or -1 when the JVM does not say
   */
  public static double awaitQuietCompiler(PrintWriter out) throws InterruptedException {
    java.lang.management.CompilationMXBean jit =
        java.lang.management.ManagementFactory.getCompilationMXBean();
    if (jit == null || !jit.isCompilationTimeMonitoringSupported()) {
      return -1;
    }
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: waiting for the JIT compiler to finish (at most %d s) ...",
            COMPILER_WAIT_LIMIT.toSeconds()));
    out.flush();
    long t0 = System.nanoTime();
    long deadline = t0 + COMPILER_WAIT_LIMIT.toNanos();
    long last = jit.getTotalCompilationTime();
    int quiet = 0;
    while (quiet < 2 && System.nanoTime() < deadline) {
      Thread.sleep(100);
      long now = jit.getTotalCompilationTime();
      quiet = now - last < 2 ? quiet + 1 : 0;
      last = now;
    }
    double ms = Math.round((System.nanoTime() - t0) / 1e5) / 10.0;
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load: waited %.1f s for the JIT compiler (limit %d s)",
            ms / 1000,
            COMPILER_WAIT_LIMIT.toSeconds()));
    out.flush();
    return ms;
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
  public static void collectBeforeTheClock(Map<String, Object> conditions) {
    if (!youngCollectionOnRequest()) {
      conditions.put("client_gc_before_clock_ms", null);
      return;
    }
    long t0 = System.nanoTime();
    System.gc();
    conditions.put("client_gc_before_clock_ms", Math.round((System.nanoTime() - t0) / 1e4) / 100.0);
  }

  /** Whether {@code System.gc()} is G1's young pause plus a concurrent cycle here. */
  public static boolean youngCollectionOnRequest() {
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
}
