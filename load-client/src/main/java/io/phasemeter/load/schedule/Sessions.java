package io.phasemeter.load.schedule;

import io.phasemeter.load.http.AnswerText;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.SessionSpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * The multi-turn load shape ({@code --sessions N --turns T --think-time D}, docs/design.md §7
 * "Sessions"): N sessions at once, each sending its turns one after the other ({@link Conversation}
 * builds them). Turn k + 1's <em>intended</em> start is turn k's last byte plus the think time, and
 * its latencies run from there: a turn that leaves late shows as schedule lag, as in the open
 * model.
 *
 * <p>A session ends when its turns are done ({@code completed}), when a turn fails ({@code cut}:
 * the rest are not sent), or before a turn past its token or history limit ({@code at_max_tokens}:
 * not an error). Without a duration the run ends when the N sessions have; with one, a session that
 * ends is replaced at once by a new one, no turn starts at or after the end, and a session whose
 * next turn would is stopped there ({@code ended_by_duration}). Every turn of a started session
 * that was not sent, whatever the reason, is counted ({@code turns_not_sent}): started × T = turns
 * sent + turns not sent.
 *
 * <p>Each turn's body is built by the {@code builder} (a worker in a run: off the event loop that
 * times the responses, as the open model builds in {@link Pacer}), as soon as the previous answer
 * has ended, so that building takes its time out of the think time; the turn is handed to the
 * runner when due. An exception in a session's path (building a turn, handing it out, taking its
 * answer) cuts that session ({@code cut}, and {@code client_errors}), not the run; {@link #stop()}
 * ends the sessions still open where they are ({@code stopped_at_deadline}), for a run that has
 * waited past {@link #bound(Duration)}.
 *
 * <p>Each session's id is the run's prefix, {@code -s} and its number (1, 2, …, in the order the
 * sessions start); its number also seeds its turns.
 *
 * <p>Thread-safe: results come on the runner's context, builds on the builder's threads, think-time
 * timers and the start on others. Every count and the set of open sessions are guarded by this
 * object's lock, never held while a body is built; a session's {@link Conversation} by its own.
 */
public final class Sessions {
  /** Starts one turn's request; {@code done} is told its result. */
  @FunctionalInterface
  public interface Launcher {
    /**
     * @param answer where its answer's text goes (a chat turn), or null
     */
    void launch(
        RequestSpec spec, long intendedNanos, AnswerText answer, Consumer<ClientResult> done);
  }

  /** Runs a task after a delay (a Vert.x timer in a run; by hand in tests). */
  @FunctionalInterface
  public interface Timers {
    void after(long delayNanos, Runnable task);
  }

  /**
   * What the sessions did, for summary.json's {@code sessions}: started = completed + cut +
   * atMaxTokens + endedByDuration + stoppedAtDeadline once the sessions have ended.
   *
   * @param started sessions started
   * @param completed sessions whose every turn succeeded
   * @param cut sessions ended by a failed turn or by an error in the client
   * @param atMaxTokens sessions ended before a turn past their token or history limit
   * @param endedByDuration sessions stopped because their next turn would have started at or after
   *     the run's end
   * @param stoppedAtDeadline sessions still open when the run stopped waiting for them ({@link
   *     #stop()})
   * @param turnsNotSent turns of the started sessions that were never sent
   * @param answersTruncated chat answers longer than {@link Conversation#MAX_ANSWER_BYTES}, sent
   *     back cut there
   * @param clientErrors of {@code cut}: sessions cut by an exception in the client, not by a turn's
   *     result
   */
  public record Counts(
      long started,
      long completed,
      long cut,
      long atMaxTokens,
      long endedByDuration,
      long stoppedAtDeadline,
      long turnsNotSent,
      long answersTruncated,
      long clientErrors) {}

  /** What {@link #bound(Duration)} adds for building and handing out the turns, in seconds. */
  static final long BOUND_SLACK_SECONDS = 10;

  private final SessionSpec spec;
  private final Conversation.Shape shape;
  private final String idPrefix;
  private final Duration duration;
  private final long thinkNanos;

  private Launcher launcher;
  private Timers timers;
  private Executor builder;
  private LongSupplier clock;
  private Runnable whenDone;
  private volatile Runnable buildHook;

  // Guarded by this.
  /**
   * The sessions open, each with the turns handed to the runner so far: what a session that ends
   * did not send is counted from these, never from the turns built (a built turn may still wait for
   * its think time when the session ends, and is then never sent).
   */
  private final Map<Conversation, int[]> open = new HashMap<>();

  private long startNanos;
  private long endNanos;
  private long lastEnd;
  private long stoppedAt = -1;
  private long launched;
  private boolean ended;
  private long started;
  private long completed;
  private long cut;
  private long atMaxTokens;
  private long endedByDuration;
  private long stoppedAtDeadline;
  private long turnsNotSent;
  private long answersTruncated;
  private long clientErrors;
  private String firstClientError;

  /**
   * @param shape what the conversations share (model, API, lengths, seed, headers, the spec)
   * @param idPrefix the sessions' ids start with it (the run's trace-id prefix)
   * @param duration how long new sessions and turns may start ({@code --duration}); null: the run
   *     ends when the first N sessions have
   */
  public Sessions(Conversation.Shape shape, String idPrefix, Duration duration) {
    this.shape = Objects.requireNonNull(shape, "shape");
    this.spec = shape.spec();
    this.idPrefix = Objects.requireNonNull(idPrefix, "idPrefix");
    this.duration = duration;
    this.thinkNanos = spec.thinkTime().toNanos();
  }

  /** The shape in words, for the live table's header. */
  public String describe() {
    return spec.describe();
  }

  /** The sessions at once. */
  public int count() {
    return spec.count();
  }

  /**
   * How long the sessions may take, at most, when every request ends by its {@code timeout}: the
   * duration + the timeout, or without a duration T × (timeout + think time); plus {@value
   * #BOUND_SLACK_SECONDS} s for building and handing out the turns; at most {@link Long#MAX_VALUE}
   * nanoseconds. A run waits no longer ({@link #stop()}).
   */
  public Duration bound(Duration timeout) {
    try {
      Duration b =
          duration != null
              ? duration.plus(timeout)
              : timeout.plus(spec.thinkTime()).multipliedBy(spec.turns());
      b = b.plusSeconds(BOUND_SLACK_SECONDS);
      b.toNanos(); // throws past Long.MAX_VALUE
      return b;
    } catch (ArithmeticException e) {
      return Duration.ofNanos(Long.MAX_VALUE);
    }
  }

  /**
   * Starts the N sessions now, their first turns built by the {@code builder}; {@code whenDone}
   * runs once every session has ended (or {@link #stop()} ended them).
   *
   * @param builder where turns are built: a worker, off the event loop that times responses
   * @param clock the client's monotonic clock ({@link System#nanoTime()} in a run)
   */
  public void start(
      Launcher launcher, Timers timers, Executor builder, LongSupplier clock, Runnable whenDone) {
    List<Conversation> first = new ArrayList<>();
    synchronized (this) {
      if (this.launcher != null) {
        throw new IllegalStateException("sessions already started");
      }
      this.launcher = Objects.requireNonNull(launcher, "launcher");
      this.timers = Objects.requireNonNull(timers, "timers");
      this.builder = Objects.requireNonNull(builder, "builder");
      this.clock = Objects.requireNonNull(clock, "clock");
      this.whenDone = Objects.requireNonNull(whenDone, "whenDone");
      startNanos = clock.getAsLong();
      endNanos = duration == null ? Long.MAX_VALUE : startNanos + duration.toNanos();
      lastEnd = startNanos;
      for (int i = 0; i < spec.count(); i++) {
        Conversation c = open(startNanos);
        if (c != null) {
          first.add(c);
        }
      }
    }
    for (Conversation c : first) {
      build(c, startNanos());
    }
    endIfDone();
  }

  /**
   * {@link #start(Launcher, Timers, Executor, LongSupplier, Runnable)} with every turn built on the
   * thread that asks for it (tests).
   */
  void start(Launcher launcher, Timers timers, LongSupplier clock, Runnable whenDone) {
    start(launcher, timers, Runnable::run, clock, whenDone);
  }

  /** Runs {@code hook} on the builder's thread before each turn's body is built (tests). */
  void beforeEachBuild(Runnable hook) {
    buildHook = hook;
  }

  /** When the sessions started (client clock). */
  public synchronized long startNanos() {
    return startNanos;
  }

  /**
   * When the schedule ended (client clock): the duration's end; without one, when the last session
   * ended (the last answer's last byte), or when {@link #stop()} stopped them.
   */
  public synchronized long endNanos() {
    long last = stoppedAt >= 0 ? Math.max(lastEnd, stoppedAt) : lastEnd;
    return duration == null ? last : endNanos;
  }

  /** Turns handed to the runner so far. */
  public synchronized long launched() {
    return launched;
  }

  /** What the sessions did so far. */
  public synchronized Counts counts() {
    return new Counts(
        started,
        completed,
        cut,
        atMaxTokens,
        endedByDuration,
        stoppedAtDeadline,
        turnsNotSent,
        answersTruncated,
        clientErrors);
  }

  /** The class of the first exception that cut a session ({@code clientErrors}), or null. */
  public synchronized String firstClientError() {
    return firstClientError;
  }

  /**
   * Ends every session still open where it is, as if its remaining turns were not sent ({@code
   * stopped_at_deadline}); a turn of theirs still in flight finishes, and nothing follows it.
   * {@code whenDone} runs, if it has not.
   *
   * @return the sessions stopped
   */
  public long stop() {
    long stopped;
    synchronized (this) {
      if (ended || launcher == null) {
        return 0;
      }
      stopped = open.size();
      for (int[] handed : open.values()) {
        turnsNotSent += spec.turns() - handed[0];
      }
      stoppedAtDeadline += stopped;
      open.clear();
      stoppedAt = clock.getAsLong();
    }
    endIfDone();
    return stopped;
  }

  /**
   * A new session whose first turn is intended at {@code at}, unless the run has ended by then; its
   * first turn is for the caller to {@linkplain #build build} once this lock is released.
   */
  private Conversation open(long at) {
    if (at >= endNanos || stoppedAt >= 0) {
      return null;
    }
    long n = ++started;
    Conversation c = new Conversation(shape, idPrefix + "-s" + n, n);
    open.put(c, new int[1]);
    return c;
  }

  /** Builds session {@code c}'s next turn, due at {@code intended}, on the builder. */
  private void build(Conversation c, long intended) {
    try {
      builder.execute(() -> buildNow(c, intended));
    } catch (Throwable t) {
      failed(c, t);
    }
  }

  /** On the builder: the turn's body, then the turn handed out when due. */
  private void buildNow(Conversation c, long intended) {
    try {
      synchronized (this) {
        if (!open.containsKey(c)) {
          return;
        }
      }
      Runnable hook = buildHook;
      if (hook != null) {
        hook.run();
      }
      RequestSpec next;
      synchronized (c) {
        next = c.next();
      }
      if (next == null) {
        Conversation replacement;
        synchronized (this) {
          if (!open.containsKey(c)) {
            return;
          }
          atMaxTokens++;
          // The replacement starts when this session's next turn would have.
          replacement = close(c, intended, true);
        }
        if (replacement != null) {
          build(replacement, intended);
        }
        endIfDone();
        return;
      }
      AnswerText answer =
          c.needsAnswerText() ? new AnswerText(Conversation.MAX_ANSWER_BYTES) : null;
      long early = intended - clock.getAsLong() - RequestRunner.HAND_OUT_LEAD_NANOS;
      if (early > 0) {
        timers.after(early, () -> launch(c, next, intended, answer));
      } else {
        launch(c, next, intended, answer);
      }
    } catch (Throwable t) {
      failed(c, t);
    }
  }

  /** Hands a built turn to the runner. */
  private void launch(Conversation c, RequestSpec next, long intended, AnswerText answer) {
    try {
      synchronized (this) {
        if (!open.containsKey(c)) {
          // Stopped while it waited: never sent.
          return;
        }
        launched++;
        open.get(c)[0]++;
      }
      launcher.launch(next, intended, answer, r -> answered(c, answer, r));
    } catch (Throwable t) {
      synchronized (this) {
        if (open.containsKey(c)) {
          launched--;
          open.get(c)[0]--;
        }
      }
      failed(c, t);
    }
  }

  /** Turn {@code r} of session {@code c} has ended: the next turn, or the session's end. */
  private void answered(Conversation c, AnswerText answer, ClientResult r) {
    try {
      long end = r.endNanos() >= 0 ? r.endNanos() : clock.getAsLong();
      if (r.ok()) {
        synchronized (c) {
          c.answered(r.usageCompletionTokens(), answer == null ? null : answer.text());
        }
      }
      Conversation replacement = null;
      boolean next = false;
      long intended = end + thinkNanos;
      synchronized (this) {
        if (!open.containsKey(c)) {
          return;
        }
        lastEnd = Math.max(lastEnd, end);
        if (!r.ok()) {
          cut++;
          replacement = close(c, end, true);
        } else {
          if (answer != null && answer.truncated()) {
            answersTruncated++;
          }
          // Every turn sent: completed, whatever its history's size.
          if (finished(c)) {
            completed++;
            replacement = close(c, end, true);
          } else if (atLimit(c)) {
            atMaxTokens++;
            replacement = close(c, end, true);
          } else if (intended >= endNanos) {
            endedByDuration++;
            close(c, end, false);
          } else {
            next = true;
          }
        }
      }
      if (next) {
        build(c, intended);
      }
      if (replacement != null) {
        build(replacement, end);
      }
      endIfDone();
    } catch (Throwable t) {
      failed(c, t);
    }
  }

  /**
   * An exception in session {@code c}'s path: the session is cut there (not replaced: the same
   * fault would likely cut the next); a turn it built and did not hand out counts as not sent.
   */
  private void failed(Conversation c, Throwable t) {
    synchronized (this) {
      if (!open.containsKey(c)) {
        return;
      }
      cut++;
      clientErrors++;
      if (firstClientError == null) {
        firstClientError = t.getClass().getName();
      }
      lastEnd = Math.max(lastEnd, clock.getAsLong());
      close(c, 0, false);
    }
    endIfDone();
  }

  /**
   * Session {@code c} has ended at {@code at}: its turns not sent are counted, and with a duration
   * a new session replaces it ({@code replace}: not when the run's end stopped it), whose first
   * turn the caller builds.
   */
  private Conversation close(Conversation c, long at, boolean replace) {
    int[] handed = open.remove(c);
    turnsNotSent += spec.turns() - (handed == null ? 0 : handed[0]);
    return replace && duration != null ? open(at) : null;
  }

  /** Runs {@code whenDone} once, when no session is open: never under this lock. */
  private void endIfDone() {
    synchronized (this) {
      if (ended || !open.isEmpty() || launcher == null) {
        return;
      }
      ended = true;
    }
    whenDone.run();
  }

  private static boolean finished(Conversation c) {
    synchronized (c) {
      return c.finished();
    }
  }

  private static boolean atLimit(Conversation c) {
    synchronized (c) {
      return c.atLimit();
    }
  }
}
