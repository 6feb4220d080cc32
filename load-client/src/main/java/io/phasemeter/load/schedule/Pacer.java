package io.phasemeter.load.schedule;

import io.phasemeter.load.workload.Arrivals;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * Drives the open model from the calling thread: sleeps until the next intended start and hands
 * every arrival that is due to the launcher, in order, with its intended time. The schedule comes
 * from the clock and the arrival process only, never from responses.
 *
 * <p>Why a thread of its own rather than event-loop timers: a Vert.x timer has millisecond
 * resolution and fires on the loop that also reads every response, so at a few thousand requests a
 * second requests left in bursts up to a millisecond or more late. Here the wait is a {@code
 * parkNanos} (tens of microseconds of slack on Linux) and the event loop only sends. Whatever delay
 * remains (a late wake-up, a busy loop, a GC pause) is still measured: the launcher stamps the
 * actual start when the request leaves, and latencies run from the intended start.
 */
final class Pacer {
  /** Waits until a deadline on the clock's scale; may return early (the pacer checks again). */
  interface Sleeper {
    void sleepUntil(long deadlineNanos, long nowNanos);
  }

  /** Starts the requests the pacer hands out. */
  interface Launcher {
    /**
     * One arrival is due.
     *
     * @return false when it was dropped (the in-flight cap was reached)
     */
    boolean launch(long intendedNanos);

    /**
     * Called before each sleep: the time to prepare the next request, so that building it does not
     * delay it.
     */
    default void prepare() {}
  }

  /** Sleeps with {@link LockSupport#parkNanos}. */
  static final Sleeper PARK = (deadline, now) -> LockSupport.parkNanos(deadline - now);

  private final LongSupplier clock;
  private final Sleeper sleeper;

  /**
   * @param clock nanoseconds on a monotonic scale ({@code System::nanoTime} in a run)
   * @param sleeper how to wait for the next arrival ({@link #PARK} in a run)
   */
  Pacer(LongSupplier clock, Sleeper sleeper) {
    this.clock = clock;
    this.sleeper = sleeper;
  }

  /**
   * Runs one step: arrivals from {@code startNanos} on, every {@link Arrivals#nextGapNanos()}, the
   * last one before {@code endNanos}.
   *
   * @return {sent, dropped}
   */
  long[] run(Arrivals arrivals, long startNanos, long endNanos, Launcher launcher) {
    long sent = 0;
    long dropped = 0;
    long next = startNanos;
    while (next < endNanos) {
      long now = clock.getAsLong();
      if (next > now) {
        launcher.prepare();
        now = clock.getAsLong();
        if (next > now) {
          sleeper.sleepUntil(next, now);
          continue;
        }
      }
      // Everything due by now leaves at once, each with its own intended time.
      while (next <= now && next < endNanos) {
        if (launcher.launch(next)) {
          sent++;
        } else {
          dropped++;
        }
        next += arrivals.nextGapNanos();
      }
    }
    return new long[] {sent, dropped};
  }
}
