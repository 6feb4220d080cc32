package io.phasemeter.load.schedule;

import io.phasemeter.load.http.RequestRunner;
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
 *
 * <p>An arrival that follows a long gap ({@link #LEAD_FROM_NANOS}: below 50 req/s) is handed out
 * {@link #LEAD_NANOS} ahead of its time, and the exchange waits for the time itself without
 * blocking the event loop (it checks again from a timer due at once, so the loop polls for I/O in
 * between, and never leaves before its intended start): an event loop that sat idle for a quarter
 * of a second takes a quarter of a millisecond to wake up on a 2-core VM (measured: 0.23-0.30 ms at
 * the median, 0.04 ms after 5 ms idle), which would be schedule lag in every latency of a low-rate
 * run.
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

  /**
   * How far ahead of its time an arrival after a long gap is handed out: the exchange's own
   * tolerance, one value ({@link RequestRunner#HAND_OUT_LEAD_NANOS}, 0.4 ms).
   */
  static final long LEAD_NANOS = RequestRunner.HAND_OUT_LEAD_NANOS;

  /** The shortest gap after which the next arrival is handed out ahead (20 ms: below 50 req/s). */
  static final long LEAD_FROM_NANOS = 20_000_000;

  /**
   * How long before a deadline {@link #PARK} stops sleeping and spins, when the wait is at least
   * {@link #SPIN_FROM_NANOS}: a thread parked for milliseconds wakes up late (0.1-0.25 ms at the
   * median between 200 and 4 req/s on a 2-core VM, measured).
   */
  static final long SPIN_NANOS = 100_000;

  /**
   * The shortest wait that ends in a spin: 2 ms, rates up to 500 req/s, so that the spinning costs
   * at most 5 % of a core; above that the waits are short and the thread hardly sleeps.
   */
  static final long SPIN_FROM_NANOS = 2_000_000;

  /** Sleeps with {@link LockSupport#parkNanos}; a long wait ends in a short spin. */
  static final Sleeper PARK =
      (deadline, now) -> {
        if (deadline - now < SPIN_FROM_NANOS) {
          LockSupport.parkNanos(deadline - now);
          return;
        }
        LockSupport.parkNanos(deadline - now - SPIN_NANOS);
        // Spin only the last SPIN_NANOS: a park that returned early sleeps again instead.
        if (deadline - System.nanoTime() > SPIN_NANOS) {
          return;
        }
        while (System.nanoTime() - deadline < 0) {
          Thread.onSpinWait();
        }
      };

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
    // How far ahead of its time the next arrival is handed out.
    long lead = 0;
    while (next < endNanos) {
      long now = clock.getAsLong();
      if (next - lead > now) {
        launcher.prepare();
        now = clock.getAsLong();
        if (next - lead > now) {
          sleeper.sleepUntil(next - lead, now);
          continue;
        }
      }
      // Everything due by now leaves at once, each with its own intended time.
      while (next - lead <= now && next < endNanos) {
        if (launcher.launch(next)) {
          sent++;
        } else {
          dropped++;
        }
        long gap = arrivals.nextGapNanos();
        next += gap;
        lead = gap >= LEAD_FROM_NANOS ? LEAD_NANOS : 0;
      }
    }
    return new long[] {sent, dropped};
  }
}
