package io.phasemeter.proxy.telemetry;

import java.time.Instant;

/** {@link System#nanoTime()}, anchored to the wall clock once, when the class loads. */
final class SystemNanoClock implements NanoClock {
  static final SystemNanoClock INSTANCE = new SystemNanoClock();

  private final long anchorNano;
  private final long anchorEpochNanos;

  private SystemNanoClock() {
    Instant now = Instant.now();
    anchorNano = System.nanoTime();
    anchorEpochNanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
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
