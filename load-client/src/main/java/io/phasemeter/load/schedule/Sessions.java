package io.phasemeter.load.schedule;

import io.phasemeter.load.http.AnswerText;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.SessionSpec;
import java.time.Duration;
import java.util.Objects;
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
 * <p>Each session's id is the run's prefix, {@code -s} and its number (1, 2, …, in the order the
 * sessions start); its number also seeds its turns.
 *
 * <p>Thread-safe: results come on the runner's context, think-time timers and the start on others;
 * every change of state holds this object's lock (a few per turn).
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
   * What the sessions did, for summary.json's {@code sessions}.
   *
   * @param started sessions started
   * @param completed sessions whose every turn succeeded
   * @param cut sessions ended by a failed turn
   * @param atMaxTokens sessions ended before a turn past their token or history limit
   * @param endedByDuration sessions stopped because their next turn would have started at or after
   *     the run's end
   * @param turnsNotSent turns of the started sessions that were never sent
   */
  public record Counts(
      long started,
      long completed,
      long cut,
      long atMaxTokens,
      long endedByDuration,
      long turnsNotSent) {}

  private final SessionSpec spec;
  private final Conversation.Shape shape;
  private final String idPrefix;
  private final Duration duration;
  private final long thinkNanos;

  private Launcher launcher;
  private Timers timers;
  private LongSupplier clock;
  private Runnable whenDone;

  private long startNanos;
  private long endNanos;
  private long lastLaunch;
  private long launched;
  private int active;
  private boolean ended;
  private long started;
  private long completed;
  private long cut;
  private long atMaxTokens;
  private long endedByDuration;
  private long turnsNotSent;

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
   * Starts the N sessions now; {@code whenDone} runs once every session has ended.
   *
   * @param clock the client's monotonic clock ({@link System#nanoTime()} in a run)
   */
  public synchronized void start(
      Launcher launcher, Timers timers, LongSupplier clock, Runnable whenDone) {
    if (this.launcher != null) {
      throw new IllegalStateException("sessions already started");
    }
    this.launcher = Objects.requireNonNull(launcher, "launcher");
    this.timers = Objects.requireNonNull(timers, "timers");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.whenDone = Objects.requireNonNull(whenDone, "whenDone");
    startNanos = clock.getAsLong();
    endNanos = duration == null ? Long.MAX_VALUE : startNanos + duration.toNanos();
    lastLaunch = startNanos;
    for (int i = 0; i < spec.count(); i++) {
      open(startNanos);
    }
    if (active == 0) {
      end();
    }
  }

  /** When the sessions started (client clock). */
  public synchronized long startNanos() {
    return startNanos;
  }

  /**
   * When the schedule ended (client clock): the duration's end, or without one the last turn's
   * intended start.
   */
  public synchronized long endNanos() {
    return duration == null ? lastLaunch : endNanos;
  }

  /** Turns started so far. */
  public synchronized long launched() {
    return launched;
  }

  /** What the sessions did so far. */
  public synchronized Counts counts() {
    return new Counts(started, completed, cut, atMaxTokens, endedByDuration, turnsNotSent);
  }

  /** A new session whose first turn is intended at {@code at}, unless the run has ended by then. */
  private void open(long at) {
    if (at >= endNanos) {
      return;
    }
    long n = ++started;
    active++;
    turn(new Conversation(shape, idPrefix + "-s" + n, n), at);
  }

  /** The session's next turn, due at {@code intended}. */
  private synchronized void turn(Conversation c, long intended) {
    if (intended >= endNanos) {
      endedByDuration++;
      close(c, intended, false);
      return;
    }
    RequestSpec next = c.next();
    if (next == null) {
      atMaxTokens++;
      close(c, intended, true);
      return;
    }
    AnswerText answer = c.needsAnswerText() ? new AnswerText(Conversation.MAX_ANSWER_BYTES) : null;
    launched++;
    lastLaunch = Math.max(lastLaunch, intended);
    launcher.launch(next, intended, answer, r -> answered(c, answer, r));
  }

  private synchronized void answered(Conversation c, AnswerText answer, ClientResult r) {
    long end = r.endNanos() >= 0 ? r.endNanos() : clock.getAsLong();
    if (!r.ok()) {
      cut++;
      close(c, end, true);
      return;
    }
    c.answered(r.usageCompletionTokens(), answer == null ? null : answer.text());
    if (c.atLimit()) {
      atMaxTokens++;
      close(c, end, true);
    } else if (c.finished()) {
      completed++;
      close(c, end, true);
    } else {
      long intended = end + thinkNanos;
      long early = intended - clock.getAsLong() - RequestRunner.HAND_OUT_LEAD_NANOS;
      if (early > 0) {
        timers.after(early, () -> turn(c, intended));
      } else {
        turn(c, intended);
      }
    }
  }

  /**
   * Session {@code c} has ended at {@code at}: its turns not sent are counted, and with a duration
   * a new session replaces it ({@code replace}: not when the run's end stopped it).
   */
  private void close(Conversation c, long at, boolean replace) {
    turnsNotSent += spec.turns() - c.turnsSent();
    active--;
    if (replace && duration != null) {
      open(at);
    }
    if (active == 0) {
      end();
    }
  }

  private void end() {
    if (!ended) {
      ended = true;
      whenDone.run();
    }
  }
}
