package io.phasemeter.load.schedule;

import io.phasemeter.load.http.AnswerText;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.report.Connections;
import io.phasemeter.load.workload.Arrivals;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.net.URI;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * Starts the requests of a run on time, step by step: from a clock in the open model ({@link
 * Pacer}), keeping N in flight in the closed model, or turn after turn in N sessions ({@link
 * Sessions}). Counts what is in flight and what was dropped at the in-flight cap, and what the
 * connections did.
 */
public final class StepRunner implements AutoCloseable {
  private final Vertx vertx;
  private final RequestRunner runner;
  private final int maxInFlight;
  private final int totalSteps;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicLong droppedTotal = new AtomicLong();
  private volatile String stepText = "";
  private volatile Connections connectionsAtStart;

  /**
   * @param totalSteps how many steps the run has, for the step's words in the live table
   */
  public StepRunner(
      Vertx vertx,
      URI url,
      int maxInFlight,
      Duration timeout,
      boolean connectionReuse,
      int totalSteps) {
    this(vertx, url, maxInFlight, timeout, connectionReuse, totalSteps, Transport.DEFAULT);
  }

  /**
   * Like {@link #StepRunner(Vertx, URI, int, Duration, boolean, int)}, speaking as {@code
   * transport} says ({@code --ca-file}, {@code --insecure}, {@code --http2}).
   */
  public StepRunner(
      Vertx vertx,
      URI url,
      int maxInFlight,
      Duration timeout,
      boolean connectionReuse,
      int totalSteps,
      Transport transport) {
    this.vertx = vertx;
    this.maxInFlight = maxInFlight;
    this.totalSteps = totalSteps;
    this.runner =
        new RequestRunner(
            vertx,
            url,
            Math.min(maxInFlight, 4096),
            timeout,
            gap -> {},
            connectionReuse,
            transport);
  }

  /**
   * Open model: requests leave at their scheduled times, whatever the responses do. The calling
   * thread paces the schedule ({@link Pacer}); the runner's event loop only sends and reads.
   */
  public StepInfo open(Series series, int index, double rate, Duration d, Arrivals arrivals) {
    if (series.counted()) {
      stepText = stepText(index, String.format(Locale.ROOT, "offered %.2f req/s", rate));
    }
    long start = System.nanoTime();
    long end = start + d.toNanos();
    Series.Prepared[] pending = new Series.Prepared[1];
    Pacer.Launcher launcher =
        new Pacer.Launcher() {
          @Override
          public boolean launch(long intended) {
            if (inFlight.get() >= maxInFlight) {
              if (series.counted()) {
                droppedTotal.incrementAndGet();
              }
              return false;
            }
            Series.Prepared p = pending[0] != null ? pending[0] : series.build();
            pending[0] = null;
            series.issue();
            start(series, p, intended, index, null, null);
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
  public Future<StepInfo> closed(Series series, int index, int concurrency, Duration d) {
    Promise<StepInfo> done = Promise.promise();
    Context ctx = vertx.getOrCreateContext();
    if (series.counted()) {
      stepText = stepText(index, "concurrency " + concurrency);
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
                  Series.Prepared p = series.build();
                  series.issue();
                  start(series, p, now, index, r -> ctx.runOnContext(x -> loop[0].run()), null);
                };
            loop[0].run();
          }
        });
    return done.future();
  }

  /**
   * Sessions ({@code --sessions}): each session's turns one after the other, as {@link Sessions}
   * schedules them; the step ends once every session has. Each turn's body is built on a worker
   * thread (unordered: sessions build side by side), never on the event loop that times the
   * responses; a timer hands it to the runner when due.
   */
  public Future<StepInfo> sessions(Series series, Sessions sessions) {
    Promise<StepInfo> done = Promise.promise();
    if (series.counted()) {
      stepText = sessions.describe();
    }
    Context ctx = vertx.getOrCreateContext();
    ctx.runOnContext(
        v ->
            sessions.start(
                (spec, intended, answer, then) ->
                    start(series, series.issue(spec), intended, 0, then, answer),
                (delay, task) -> vertx.setTimer(Math.max(1, delay / 1_000_000), id -> task.run()),
                task ->
                    ctx.executeBlocking(
                        () -> {
                          task.run();
                          return null;
                        },
                        false),
                System::nanoTime,
                () -> done.tryComplete(step(sessions))));
    return done.future();
  }

  /**
   * Waits for a {@link #sessions} step at most {@code bound} ({@link Sessions#bound}); past it the
   * sessions still open are stopped where they are ({@link Sessions#stop()}) and the step ends with
   * what it has, so that no fault in a session's path holds the run forever.
   */
  public static StepInfo await(Future<StepInfo> step, Sessions sessions, Duration bound) {
    try {
      return step.await(bound.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      sessions.stop();
      return step.isComplete() && step.succeeded() ? step.result() : step(sessions);
    }
  }

  /** A sessions step's figures as they stand. */
  private static StepInfo step(Sessions sessions) {
    return new StepInfo(
        0,
        -1,
        sessions.count(),
        sessions.startNanos(),
        sessions.endNanos(),
        sessions.launched(),
        0);
  }

  /**
   * A replayed trace ({@code --replay}), one step from {@code startNanos} (client clock, the
   * clock's start, now or just past) so that each row's intended start is the clock's start plus
   * its time: the calling thread paces the rows outside sessions and every session's first turn
   * ({@link Pacer}); a session's later turns leave as {@link ReplayTurns} schedules them, each
   * built on a worker thread once its previous turn has left (never on the event loop that reads
   * responses) and handed to the runner from a timer. Request {@code seq} is row {@code seq - 1},
   * whatever was dropped or sent before. Returns once every row has been sent, dropped or cut; the
   * step ends at the later of the paced rows' end and the last later turn's intended start and 1 ms
   * ({@code --duration}'s end at most).
   */
  public StepInfo replay(Series series, ReplayTurns turns, long startNanos) {
    if (series.counted()) {
      stepText = stepText(0, String.format(Locale.ROOT, "offered %.2f req/s", turns.rate()));
    }
    Context ctx = vertx.getOrCreateContext();
    Map<Integer, Future<Series.Prepared>> built = new ConcurrentHashMap<>();
    AtomicLong laterSent = new AtomicLong();
    Promise<Void> done = Promise.promise();
    turns.start(
        new ReplayTurns.Launcher() {
          @Override
          public void prepare(int row) {
            built.put(row, ctx.executeBlocking(() -> series.build(row + 1), false));
          }

          @Override
          public void forget(int row) {
            built.remove(row);
          }

          @Override
          public boolean launch(
              int row, long intended, Consumer<ClientResult> then, Runnable notSent) {
            Future<Series.Prepared> f = built.remove(row);
            if (inFlight.get() >= maxInFlight) {
              if (series.counted()) {
                droppedTotal.incrementAndGet();
              }
              return false;
            }
            inFlight.incrementAndGet();
            if (f == null) {
              f = ctx.executeBlocking(() -> series.build(row + 1), false);
            }
            f.onComplete(
                b -> {
                  if (b.succeeded()) {
                    series.issue();
                    laterSent.incrementAndGet();
                    send(series, b.result(), intended, 0, then, null);
                  } else {
                    inFlight.decrementAndGet();
                    notSent.run();
                  }
                });
            return true;
          }
        },
        (delay, task) -> vertx.setTimer(Math.max(1, delay / 1_000_000), id -> task.run()),
        System::nanoTime,
        startNanos,
        () -> done.complete());
    long pacedEnd = startNanos + turns.pacedLength().toNanos();
    Series.Prepared[] pending = new Series.Prepared[1];
    int[] arrival = {0};
    Pacer.Launcher launcher =
        new Pacer.Launcher() {
          @Override
          public boolean launch(long intended) {
            int row = turns.pacedRow(arrival[0]++);
            Series.Prepared p = pending[0];
            pending[0] = null;
            if (inFlight.get() >= maxInFlight) {
              if (series.counted()) {
                droppedTotal.incrementAndGet();
              }
              turns.pacedDropped(row);
              return false;
            }
            if (p == null) {
              p = series.build(row + 1);
            }
            series.issue();
            start(series, p, intended, 0, turns.paced(row), null);
            return true;
          }

          @Override
          public void prepare() {
            if (pending[0] == null && arrival[0] < turns.pacedCount()) {
              pending[0] = series.build(turns.pacedRow(arrival[0]) + 1);
            }
          }
        };
    long[] counts =
        new Pacer(System::nanoTime, Pacer.PARK)
            .run(turns.arrivals(), startNanos, pacedEnd, launcher);
    turns.pacerDone();
    done.future().await();
    long end = pacedEnd;
    if (turns.lastDueNanos() != Long.MIN_VALUE) {
      end = Math.max(end, turns.lastDueNanos() + 1_000_000);
    }
    if (turns.cut() != null) {
      end = Math.min(end, startNanos + turns.cut().toNanos());
    }
    return new StepInfo(
        0,
        turns.rate(),
        0,
        startNanos,
        end,
        counts[0] + laterSent.get(),
        counts[1] + turns.droppedLater());
  }

  /** Waits until nothing is in flight, or until {@code deadlineNanos} (client clock). */
  public void drain(long deadlineNanos) throws InterruptedException {
    while (inFlight.get() > 0 && System.nanoTime() < deadlineNanos) {
      Thread.sleep(20);
    }
  }

  /** Requests started and not yet finished. */
  public int inFlight() {
    return inFlight.get();
  }

  /** Iterations of the measured run dropped at the in-flight cap, so far. */
  public long dropped() {
    return droppedTotal.get();
  }

  /** The current step in words, for the live table. */
  public String stepText() {
    return stepText;
  }

  /** The clock starts now: the warm-up's connections are not the run's. */
  public void startTheClock() {
    connectionsAtStart = connectionCounts();
  }

  /** What the run's connections did since the clock started (not during the warm-up). */
  public Connections connections() {
    Connections now = connectionCounts();
    Connections base = connectionsAtStart;
    return base == null
        ? now
        : new Connections(
            now.reuse(),
            now.opened() - base.opened(),
            now.closedByServer() - base.closedByServer(),
            now.staleRetries() - base.staleRetries());
  }

  /** The protocol the run's connections spoke ({@code h2}, {@code http/1.1}), or null. */
  public String protocol() {
    return runner.protocol();
  }

  /** The TLS version of the run's connections, or null over plain http. */
  public String tlsVersion() {
    return runner.tlsVersion();
  }

  @Override
  public void close() {
    runner.close();
  }

  private Connections connectionCounts() {
    return new Connections(
        runner.connectionReuse(),
        runner.connectionsOpened(),
        runner.connectionsClosedByServer(),
        runner.staleConnectionRetries());
  }

  private String stepText(int index, String what) {
    return "step " + (index + 1) + "/" + totalSteps + " (" + what + ")";
  }

  /**
   * @param then told the result after the series (the closed model's next request, a session's next
   *     turn), or null
   * @param answer where a session's chat answer goes, or null
   */
  private void start(
      Series series,
      Series.Prepared p,
      long intended,
      int step,
      Consumer<ClientResult> then,
      AnswerText answer) {
    inFlight.incrementAndGet();
    send(series, p, intended, step, then, answer);
  }

  /** {@link #start} once its place in flight is counted. */
  private void send(
      Series series,
      Series.Prepared p,
      long intended,
      int step,
      Consumer<ClientResult> then,
      AnswerText answer) {
    runner.run(
        p.seq(),
        p.spec(),
        p.traceId(),
        p.traceparent(),
        step,
        intended,
        series.itl(),
        r -> {
          inFlight.decrementAndGet();
          series.done(r);
          if (then != null) {
            then.accept(r);
          }
        },
        answer);
  }
}
