package io.phasemeter.load.search;

import io.phasemeter.core.NanoClock;
import java.time.Duration;

/**
 * The search's time: whether one more probe ends within {@code --max-duration}. A probe is expected
 * to take its warm-up at load and its measured duration, plus the largest overhead seen so far (its
 * start, its drain, the join's grace and fetch: elapsed minus warm-up and duration), at least the
 * join's grace. The first probe's overhead is left out: it alone carries the client's own warm-up
 * and floor, which no later probe repeats.
 */
final class ProbeTime {
  private final NanoClock clock;
  private final Duration max;
  private long start;
  private long overhead;

  ProbeTime(NanoClock clock, Duration max) {
    this.clock = clock;
    this.max = max;
  }

  /** The search starts now. */
  void start() {
    start = clock.nanoTime();
  }

  /** Whether a probe of {@code warmup} + {@code duration} started now ends within the maximum. */
  boolean allows(Duration warmup, Duration duration, Duration joinGrace) {
    long expected = warmup.plus(duration).toNanos() + Math.max(joinGrace.toNanos(), overhead);
    return clock.nanoTime() - start + expected <= max.toNanos();
  }

  /** A probe started at {@code startedAt} (a reading of the clock) ended now. */
  void ended(long startedAt, Duration warmup, Duration duration, boolean first) {
    if (!first) {
      long elapsed = clock.nanoTime() - startedAt;
      overhead = Math.max(overhead, elapsed - warmup.plus(duration).toNanos());
    }
  }

  /** The largest overhead seen, in nanoseconds. */
  long overhead() {
    return overhead;
  }
}
