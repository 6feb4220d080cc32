package io.phasemeter.load.report;

import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ReplicaCounts;
import io.phasemeter.load.workload.Api;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * What a run shows while it goes: the live table every report interval (the window since the last
 * table and the whole run so far), the SLOW and FAIL lines of notable requests, and the final
 * table. Owns the run's cumulative statistics, which the budgets are judged on at the end.
 */
public final class LiveReport implements AutoCloseable {
  /** At most this many SLOW/FAIL lines per report interval; the rest are counted. */
  private static final int NOTABLE_LINES = 10;

  /**
   * What the run reports of itself in a table's header line.
   *
   * @param step the current step in words
   * @param sent requests started
   * @param done requests finished
   * @param inFlight requests started and not finished
   * @param dropped iterations dropped at the in-flight cap
   * @param staleRetries requests sent once more after a stale connection
   * @param joining whether the run joins with the proxy's records (--admin)
   * @param replicas each proxy replica's part in the join (a line each when there are several)
   */
  public record Status(
      String step,
      long sent,
      long done,
      int inFlight,
      long dropped,
      long staleRetries,
      boolean joining,
      List<ReplicaCounts> replicas) {
    public Status {
      replicas = List.copyOf(replicas);
    }

    /** A run with one proxy, or none: no replica lines. */
    public Status(
        String step,
        long sent,
        long done,
        int inFlight,
        long dropped,
        long staleRetries,
        boolean joining) {
      this(step, sent, done, inFlight, dropped, staleRetries, joining, List.of());
    }
  }

  private final PrintWriter out;
  private final ClientBudgets budgets;
  private final String model;
  private final Api api;
  private final Supplier<Status> status;
  private final Object statsLock = new Object();
  // The client's own floor in words (ClientFloor.line), under every table's header; null: none.
  private volatile String clientFloor;

  /** The whole run, with exact counts against every budget limit (what the verdict is on). */
  private final PhaseStats cumulative;

  private final PhaseWindow window = new PhaseWindow();

  /** Per turn index of the requests of sessions, for the final table; empty without any. */
  private final TurnStats turns = new TurnStats();

  /** Goodput over the requests finished so far; null without objectives. */
  private final GoodputCounts goodput;

  private long lastGood;
  private final AtomicLong notable = new AtomicLong();
  private final AtomicLong notableSuppressed = new AtomicLong();
  private long lastPrintNanos;
  private long lastPrintDone;
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

  public LiveReport(PrintWriter out, ClientBudgets budgets, String model, Supplier<Status> status) {
    this(out, budgets, model, null, status);
  }

  /**
   * @param api the run's API: its tables say which phases do not apply to it (null: all apply)
   */
  public LiveReport(
      PrintWriter out, ClientBudgets budgets, String model, Api api, Supplier<Status> status) {
    this(out, budgets, model, api, status, null);
  }

  /**
   * @param goodput the run's goodput objectives: a line under every table gives the attainment so
   *     far (null: none)
   */
  public LiveReport(
      PrintWriter out,
      ClientBudgets budgets,
      String model,
      Api api,
      Supplier<Status> status,
      Goodput goodput) {
    this.goodput = goodput == null ? null : new GoodputCounts(goodput);
    this.out = out;
    this.budgets = budgets;
    this.model = model;
    this.api = api;
    this.status = status;
    this.cumulative = PhaseStats.withLimits(budgets.limitsNanos(model));
  }

  /** One finished request, joined or alone: into the window and the whole run. */
  public void add(Pair pair) {
    if (goodput != null) {
      goodput.add(pair);
    }
    synchronized (statsLock) {
      cumulative.add(pair);
      window.add(pair);
    }
    turns.add(pair);
  }

  /** One inter-token gap of a measured request, in nanoseconds. */
  public void addItl(long nanos) {
    synchronized (statsLock) {
      cumulative.addItl(nanos);
      window.addItl(nanos);
    }
  }

  /** The SLOW threshold of the measured run, read from its cumulative statistics. */
  public SlowThreshold slowThreshold() {
    return new SlowThreshold(cumulative);
  }

  /**
   * Prints a table of the warm-up's figures to nowhere after {@code delay}: the first real table
   * then runs compiled code. Its first run, class loading and all, coincided with 400 ms of late
   * requests in one bench run at 2,000 req/s.
   */
  public void rehearseAfter(Duration delay, PhaseStats warmUp) {
    reporter.schedule(
        () -> {
          try {
            PhaseStats all = warmUp.copy();
            printTable(new PrintWriter(java.io.Writer.nullWriter()), 0, 0, 1, all, all);
          } catch (RuntimeException e) {
            // Only a rehearsal: the real tables report their own failures.
          }
        },
        delay.toNanos(),
        TimeUnit.NANOSECONDS);
  }

  /** The line under a table's header that gives the client's floor; empty when none. */
  private String floorLine() {
    String floor = clientFloor;
    return floor == null ? "" : "\n  " + floor;
  }

  /** The client's floor in words, shown under every table's header line. */
  public void clientFloor(String line) {
    clientFloor = line;
  }

  /** The clock starts: a table every {@code interval} (at least a second) from now. */
  public void start(long runStartNanos, Duration interval) {
    runStart = runStartNanos;
    lastPrintNanos = runStartNanos;
    long period = Math.max(1000, interval.toMillis());
    reporter.scheduleAtFixedRate(this::printLiveSafely, period, period, TimeUnit.MILLISECONDS);
  }

  /** Lines already handed to the reporter are printed; the periodic table stops. */
  public void stop() throws InterruptedException {
    reporter.shutdown();
    reporter.awaitTermination(10, TimeUnit.SECONDS);
  }

  /** Stops the reporter's thread at once, whichever way the run ended. */
  @Override
  public void close() {
    reporter.shutdownNow();
  }

  /**
   * Failed requests, and very slow ones, are printed with their trace id; nothing else is. At most
   * {@link #NOTABLE_LINES} per report interval are formatted and printed, by the reporter's thread;
   * the rest are only counted. A GC pause or a stall makes hundreds of requests SLOW at once:
   * formatting and printing each on the event loop (as this once did) made the stall longer.
   */
  public void notable(ClientResult r, SlowThreshold threshold) {
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

  /** The run's statistics so far; read them once the run has ended. */
  public PhaseStats cumulative() {
    return cumulative;
  }

  /** Share of successful requests that joined a proxy record; 1 when none succeeded. */
  public double coverage() {
    double c;
    synchronized (statsLock) {
      c = cumulative.joinCoverage();
    }
    return Double.isNaN(c) ? 1.0 : c;
  }

  /** The last table: the whole run, with its breaches. */
  public void printFinal() {
    long suppressed = notableSuppressed.getAndSet(0);
    synchronized (statsLock) {
      LiveTable.print(
          out,
          "final (whole run):"
              + (suppressed > 0
                  ? "  (" + suppressed + " more slow/failed since the last table not printed)"
                  : "")
              + floorLine(),
          cumulative,
          cumulative,
          budgets.judgeLatency(model, cumulative, api).stream()
              .filter(BudgetResult::breached)
              .toList(),
          this::culprit,
          api);
      replicaLines(out, status.get().replicas());
    }
    turns.print(out);
    if (goodput != null) {
      out.println(goodputFinal(status.get().sent()));
      out.flush();
    }
  }

  /**
   * The final goodput line: attainment over every request sent (a request that never finished is
   * not good), as summary.json gives it; reported, never a gate of the run.
   */
  private String goodputFinal(long sent) {
    long good = goodput.good();
    return String.format(
            Locale.ROOT,
            "  goodput (%s): attainment %s (%d good of %d sent)",
            goodput.goodput().source(),
            sent == 0 ? "-" : String.format(Locale.ROOT, "%.1f%%", 100.0 * good / sent),
            good,
            sent)
        + goodput.firstMissedText()
        + goodput.unjudgedText()
        + goodput.serverText();
  }

  /** The phase behind a breach, judged on the whole run at the budget's quantile. */
  public String culprit(BudgetResult b) {
    synchronized (statsLock) {
      return culprit(b, cumulative);
    }
  }

  private String culprit(BudgetResult b, PhaseStats stats) {
    double q =
        budgets.forModel(model).stream()
            .filter(x -> x.name().equals(b.name()))
            .mapToDouble(ClientBudgets.Budget::quantile)
            .findFirst()
            .orElse(0.95);
    return ClientBudgets.culprit(b.phase(), q, stats);
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
   * One live table, on the reporter's own thread. Only swapping the window (its Recorders' interval
   * histograms) and copying the run's figures hold the lock that every finished request takes; the
   * quantiles, the budgets and the formatting happen outside it. Printed under that lock on a timer
   * of the event loops, the table once held the loop that reads the responses for 50 ms (bench at
   * 2,000 req/s: 300 requests late at every table).
   */
  private void printLive() {
    PhaseStats w;
    PhaseStats all;
    synchronized (statsLock) {
      w = window.interval();
      all = cumulative.copy();
    }
    long nowNanos = System.nanoTime();
    long done = status.get().done();
    double windowSeconds = Math.max(1e-3, (nowNanos - lastPrintNanos) / 1e9);
    double achieved = (done - lastPrintDone) / windowSeconds;
    lastPrintNanos = nowNanos;
    lastPrintDone = done;
    long suppressed = notableSuppressed.getAndSet(0);
    notable.set(0);
    String goodLine = null;
    if (goodput != null) {
      long good = goodput.good();
      goodLine = goodput.liveLine((good - lastGood) / windowSeconds);
      lastGood = good;
    }
    synchronized (out) {
      printTable(out, (nowNanos - runStart) / 1e9, achieved, suppressed, w, all);
      if (goodLine != null) {
        out.println(goodLine);
        out.flush();
      }
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
        budgets.judgeLatency(model, all, api).stream().filter(BudgetResult::breached).toList();
    double coverage = all.joinCoverage();
    Status s = status.get();
    String header =
        String.format(
            Locale.ROOT,
            "[%6.1fs] %s  achieved %.2f req/s  sent %d  done %d  in-flight %d  drops %d%s  join %s%s",
            elapsed,
            s.step(),
            achieved,
            s.sent(),
            s.done(),
            s.inFlight(),
            s.dropped(),
            s.staleRetries() > 0 ? "  stale-conn retries " + s.staleRetries() : "",
            !s.joining()
                ? "-"
                : String.format(
                    Locale.ROOT, "%.1f%%", 100 * (Double.isNaN(coverage) ? 1.0 : coverage)),
            suppressed > 0 ? "  (" + suppressed + " more slow/failed not printed)" : "");
    header += floorLine();
    LiveTable.print(to, header, w, all, breaches, b -> culprit(b, all), api);
    replicaLines(to, s.replicas());
  }

  /**
   * One line per proxy replica when the run joins with several: what each contributed, its feed's
   * reconnects and whether it is up. Nothing with one (the header's join figure says it all).
   */
  static void replicaLines(PrintWriter to, List<ReplicaCounts> replicas) {
    if (replicas.size() < 2) {
      return;
    }
    for (ReplicaCounts r : replicas) {
      to.println(
          String.format(
              Locale.ROOT,
              "  replica %-21s joined %7d  share %6s%s  reconnects %d  %s",
              r.replica(),
              r.joined(),
              Double.isNaN(r.share()) ? "-" : String.format(Locale.ROOT, "%.1f%%", 100 * r.share()),
              r.fetched() > 0 ? "  fetched " + r.fetched() : "",
              r.feedReconnects(),
              r.state()));
    }
    to.flush();
  }
}
