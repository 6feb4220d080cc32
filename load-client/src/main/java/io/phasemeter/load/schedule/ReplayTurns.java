package io.phasemeter.load.schedule;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.replay.Replayed;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * A replayed trace's one step (docs/design.md §7, "Replaying a trace"): the rows outside sessions
 * and every session's first turn are paced from the clock ({@link Pacer}, {@link #arrivals}); a
 * session's later turns are closed-loop, as the sessions and AIPerf's fixed schedule: turn
 * k + 1 waits for turn k's last byte, then leaves at its own time or at once when that has passed,
 * or (a Mooncake turn without a time) its delay after it ({@link Rows#due}). That moment is its
 * <em>intended</em> start, so the wait for the previous answer is not schedule lag; how late it
 * then leaves is. A turn that fails, or is dropped at the in-flight cap, cuts its session: the
 * later turns are not sent ({@code cut}); with {@code --duration}, a turn due at or after the end
 * is not sent either ({@code ended_by_duration}); both counted in {@link #counts}, as {@link
 * Sessions} counts its own. The step ends once the clock has paced every row and every session has
 * ended.
 *
 * <p>Thread-safe: paced rows come from the pacer's thread, results on the runner's context, timers
 * on theirs; every change of state holds this object's lock (a few per turn).
 */
public final class ReplayTurns {
  /** The rows of a replayed trace as the schedule needs them ({@link Replayed} gives them). */
  public interface Rows {
    /** How many rows the clock paces. */
    int paced();

    /** The row of the {@code j}-th arrival the clock paces. */
    int pacedRow(int j);

    /** Row {@code row}'s turn in its session (1 for the first), 0 outside any session. */
    int turn(int row);

    /** The row of the same session's next turn, or -1 after its last. */
    int next(int row);

    /**
     * When later turn {@code row} is due (client clock), its previous turn having ended at {@code
     * previousEndNanos}, the clock having started at {@code startNanos}.
     */
    long due(int row, long startNanos, long previousEndNanos);
  }

  /** Builds and starts the requests of later turns. */
  public interface Launcher {
    /** Row {@code row} may be sent soon: its request can be built now (off the event loop). */
    void prepare(int row);

    /** Row {@code row} will not be sent: what {@link #prepare} built can go. */
    void forget(int row);

    /**
     * Sends row {@code row} now, intended at {@code intendedNanos}.
     *
     * @param done told its result
     * @param notSent told instead when its request could not be built after all
     * @return false when it was dropped at the in-flight cap (neither is told)
     */
    boolean launch(int row, long intendedNanos, Consumer<ClientResult> done, Runnable notSent);
  }

  private final Rows rows;
  private final double rate;
  private final Arrivals arrivals;
  private final Duration pacedLength;
  private final Duration cut;
  private final boolean sessions;

  private Launcher launcher;
  private Sessions.Timers timers;
  private LongSupplier clock;
  private Runnable whenDone;
  private long startNanos;
  private long endNanos;

  private boolean pacerDone;
  private boolean ended;
  private int active;
  private long lastDue = Long.MIN_VALUE;
  private long droppedLater;
  private long started;
  private long completed;
  private long cutSessions;
  private long endedByDuration;
  private long turnsNotSent;

  /**
   * @param rows the trace's rows
   * @param rate the rate the step offers (its rows over its planned length)
   * @param arrivals the paced rows' intended starts after the clock
   * @param pacedLength how long the clock paces rows: its last row is due before the end
   * @param cut {@code --duration}: no turn starts at or after it; null for none
   * @param sessions whether the trace has sessions (else {@link #counts} is null)
   */
  public ReplayTurns(
      Rows rows,
      double rate,
      Arrivals arrivals,
      Duration pacedLength,
      Duration cut,
      boolean sessions) {
    this.rows = Objects.requireNonNull(rows, "rows");
    this.rate = rate;
    this.arrivals = Objects.requireNonNull(arrivals, "arrivals");
    this.pacedLength = Objects.requireNonNull(pacedLength, "pacedLength");
    this.cut = cut;
    this.sessions = sessions;
  }

  /** The step of {@code replayed} cut at {@code cut} ({@code --duration}, or null). */
  public static ReplayTurns of(Replayed replayed, Duration cut) {
    return new ReplayTurns(
        new Rows() {
          @Override
          public int paced() {
            return replayed.pacedRows();
          }

          @Override
          public int pacedRow(int j) {
            return replayed.pacedRow(j);
          }

          @Override
          public int turn(int row) {
            return replayed.trace().turn(row);
          }

          @Override
          public int next(int row) {
            return replayed.trace().nextTurn(row);
          }

          @Override
          public long due(int row, long startNanos, long previousEndNanos) {
            return replayed.due(row, startNanos, previousEndNanos);
          }
        },
        replayed.meanRate(cut),
        replayed.arrivals(cut),
        replayed.pacedDuration(cut),
        cut,
        replayed.trace().sessions() > 0);
  }

  /** The rate the step offers. */
  public double rate() {
    return rate;
  }

  /** The paced rows' arrivals, for one run of the {@link Pacer}. */
  Arrivals arrivals() {
    return arrivals;
  }

  /** How long the clock paces rows. */
  Duration pacedLength() {
    return pacedLength;
  }

  /** The row of the {@code j}-th paced arrival. */
  int pacedRow(int j) {
    return rows.pacedRow(j);
  }

  /** How many rows the clock paces. */
  int pacedCount() {
    return rows.paced();
  }

  /** {@code --duration}, or null. */
  Duration cut() {
    return cut;
  }

  /**
   * The step starts at {@code startNanos} (client clock); {@code whenDone} runs once, when {@link
   * #pacerDone} has been called and every session started has ended.
   */
  public synchronized void start(
      Launcher launcher,
      Sessions.Timers timers,
      LongSupplier clock,
      long startNanos,
      Runnable whenDone) {
    if (this.launcher != null) {
      throw new IllegalStateException("replay already started");
    }
    this.launcher = Objects.requireNonNull(launcher, "launcher");
    this.timers = Objects.requireNonNull(timers, "timers");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.whenDone = Objects.requireNonNull(whenDone, "whenDone");
    this.startNanos = startNanos;
    this.endNanos = cut == null ? Long.MAX_VALUE : startNanos + cut.toNanos();
  }

  /**
   * Paced row {@code row} is about to be sent.
   *
   * @return what to tell its result to (a session's first turn), or null (a row outside sessions)
   */
  public synchronized Consumer<ClientResult> paced(int row) {
    if (rows.turn(row) == 0) {
      return null;
    }
    started++;
    active++;
    int next = rows.next(row);
    if (next >= 0) {
      launcher.prepare(next);
    }
    return r -> ended(row, r);
  }

  /** Paced row {@code row} was dropped at the in-flight cap: its session is cut, if it has one. */
  public synchronized void pacedDropped(int row) {
    if (rows.turn(row) != 0) {
      started++;
      cutSessions++;
      turnsNotSent += turnsFrom(row);
    }
  }

  /** The clock has paced every row. */
  public synchronized void pacerDone() {
    pacerDone = true;
    maybeEnd();
  }

  /** What the sessions did, for summary.json's {@code sessions}; null for a trace without any. */
  public synchronized Sessions.Counts counts() {
    return sessions
        ? new Sessions.Counts(
            started, completed, cutSessions, 0, endedByDuration, 0, turnsNotSent, 0, 0)
        : null;
  }

  /** Later turns dropped at the in-flight cap. */
  public synchronized long droppedLater() {
    return droppedLater;
  }

  /** The latest intended start of a later turn sent (client clock), or {@link Long#MIN_VALUE}. */
  public synchronized long lastDueNanos() {
    return lastDue;
  }

  /** Turn {@code row} has ended with {@code r}: its session's next turn, or the session's end. */
  private synchronized void ended(int row, ClientResult r) {
    int next = rows.next(row);
    boolean closed = false;
    try {
      long end = r.endNanos() >= 0 ? r.endNanos() : clock.getAsLong();
      if (!r.ok()) {
        closed = close(next, true);
        return;
      }
      if (next < 0) {
        completed++;
        closed = close(-1, false);
        return;
      }
      long due = rows.due(next, startNanos, end);
      if (due >= endNanos) {
        endedByDuration++;
        closed = close(next, false);
        return;
      }
      long early = due - clock.getAsLong() - RequestRunner.HAND_OUT_LEAD_NANOS;
      if (early > 0) {
        timers.after(early, () -> send(next, due));
      } else {
        send(next, due);
      }
    } catch (RuntimeException e) {
      // Whatever failed here (a timer refused while Vert.x closes), the session ends: a run never
      // waits for a turn that cannot come.
      if (!closed) {
        close(next, true);
      }
    }
  }

  /** Sends later turn {@code row}, due at {@code due}. */
  private synchronized void send(int row, long due) {
    int after = rows.next(row);
    try {
      lastDue = Math.max(lastDue, due);
      if (after >= 0) {
        launcher.prepare(after);
      }
      if (!launcher.launch(row, due, r -> ended(row, r), () -> notSent(row))) {
        droppedLater++;
        close(row, true);
      }
    } catch (RuntimeException e) {
      close(row, true);
    }
  }

  /** Later turn {@code row} could not be built: its session is cut there. */
  private synchronized void notSent(int row) {
    close(row, true);
  }

  /**
   * A session ends before row {@code unsent} (-1: after its last turn), whose turns from there on
   * are not sent; {@code cutHere}: a failed or dropped turn cut it.
   *
   * @return true
   */
  private boolean close(int unsent, boolean cutHere) {
    if (cutHere) {
      cutSessions++;
    }
    if (unsent >= 0) {
      int after = rows.next(unsent);
      if (after >= 0) {
        launcher.forget(after);
      }
      launcher.forget(unsent);
      turnsNotSent += turnsFrom(unsent);
    }
    active--;
    maybeEnd();
    return true;
  }

  /** Turns from row {@code row} to its session's last, or 0 for -1. */
  private int turnsFrom(int row) {
    int n = 0;
    for (int r = row; r >= 0; r = rows.next(r)) {
      n++;
    }
    return n;
  }

  private void maybeEnd() {
    if (pacerDone && active == 0 && !ended) {
      ended = true;
      whenDone.run();
    }
  }
}
