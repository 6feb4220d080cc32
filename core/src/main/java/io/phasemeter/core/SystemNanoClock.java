package io.phasemeter.core;

import java.time.Instant;

/**
 * {@link System#nanoTime()}, anchored to the wall clock once, when the class loads. The system
 * property {@code phasemeter.clock.skew-ms} shifts that anchor (span timestamps only): the accuracy
 * suite uses it to show that pairing never depends on absolute time.
 */
final class SystemNanoClock implements NanoClock {
  static final SystemNanoClock INSTANCE = new SystemNanoClock();

  private final long anchorNano;
  private final long anchorEpochNanos;

  private SystemNanoClock() {
    Instant now = Instant.now();
    anchorNano = System.nanoTime();
    long skewNanos = Long.getLong("phasemeter.clock.skew-ms", 0L) * 1_000_000L;
    anchorEpochNanos = now.getEpochSecond() * 1_000_000_000L + now.getNano() + skewNanos;
  }

  @Override
  public long nanoTime() {
    return System.nanoTime();
  }

  @Override
  public long toEpochNanos(long nanoTime) {
    return anchorEpochNanos + (nanoTime - anchorNano);
  }
}
