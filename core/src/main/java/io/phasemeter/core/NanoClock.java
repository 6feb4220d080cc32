package io.phasemeter.core;

/**
 * The proxy's only time source: a monotonic nanosecond reading plus its mapping to epoch time for
 * span timestamps. Latency code reads {@link #nanoTime()} and never the wall clock, so every
 * duration is a difference of two monotonic readings; tests can pass a clock they advance by hand.
 */
public interface NanoClock {

  /** A monotonic reading in nanoseconds (arbitrary origin). */
  long nanoTime();

  /** Converts a {@link #nanoTime()} reading into epoch nanoseconds, for span timestamps. */
  long toEpochNanos(long nanoTime);

  /** The system clock: {@link System#nanoTime()} anchored once to the wall clock. */
  static NanoClock system() {
    return SystemNanoClock.INSTANCE;
  }
}
