package io.phasemeter.proxy.gateway;

import io.phasemeter.core.NanoClock;
import java.time.Duration;

/** A clock the test advances by hand. */
final class ManualClock implements NanoClock {
  private long now = 1_000_000_000L;

  @Override
  public long nanoTime() {
    return now;
  }

  @Override
  public long toEpochNanos(long nanoTime) {
    return 1_700_000_000_000_000_000L + nanoTime;
  }

  void advance(Duration d) {
    now += d.toNanos();
  }
}
