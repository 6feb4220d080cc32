package io.phasemeter.proxy.gateway;

import java.time.Duration;

/**
 * One per-minute token bucket: capacity = the limit, refilled continuously at limit / 60 s. The
 * level is kept in fixed point, {@value #UNITS_PER_TOKEN} units per token, so that a bucket of
 * {@code limit} tokens per minute gains exactly {@code limit} units per microsecond and every
 * refill and wait is exact integer arithmetic. The level may fall below zero (a settled response
 * used more than its estimate) but never below minus one capacity, so a bucket is full again at
 * most {@link #MAX_REFILL_NANOS} after its last use.
 */
final class TokenBucket {
  /** Microseconds per minute. */
  static final long UNITS_PER_TOKEN = 60_000_000L;

  /** The longest refill to full: from minus one capacity, two minutes. */
  static final long MAX_REFILL_NANOS = 120_000_000_000L;

  private long limit;
  private long level;
  private long lastNanos;

  TokenBucket(long limit, long nowNanos) {
    this.limit = limit;
    this.level = capacity();
    this.lastNanos = nowNanos;
  }

  /** Adopts a changed limit (a reloaded keys file); the level is kept, clamped to the new range. */
  synchronized void setLimit(long newLimit, long now) {
    if (newLimit == limit) {
      return;
    }
    refill(now);
    boolean wasUnlimited = limit == 0;
    limit = newLimit;
    level = wasUnlimited ? capacity() : Math.max(-capacity(), Math.min(capacity(), level));
  }

  /**
   * Takes {@code tokens} if the bucket holds them.
   *
   * @return 0 when taken, otherwise the nanoseconds until enough will have refilled
   */
  synchronized long tryTake(long tokens, long now) {
    if (limit == 0) {
      return 0;
    }
    refill(now);
    long units = tokens * UNITS_PER_TOKEN;
    if (level >= units) {
      level -= units;
      return 0;
    }
    return micros(units - level) * 1000 - (now - lastNanos);
  }

  /** Adds {@code tokens} back (negative: charges more), within minus one and one capacity. */
  synchronized void give(long tokens, long now) {
    if (limit == 0) {
      return;
    }
    refill(now);
    long cap = capacity();
    long delta = Math.max(-2 * limit, Math.min(2 * limit, tokens)) * UNITS_PER_TOKEN;
    level = Math.max(-cap, Math.min(cap, level + delta));
  }

  /** The limit, the whole tokens available now (never below 0) and the time until full. */
  synchronized RateLimitHeaders.Window window(long now) {
    if (limit == 0) {
      return RateLimitHeaders.Window.UNLIMITED;
    }
    refill(now);
    long remaining = Math.max(0, level / UNITS_PER_TOKEN);
    long toFull = Math.max(0, micros(capacity() - level) * 1000 - (now - lastNanos));
    return new RateLimitHeaders.Window(limit, remaining, Duration.ofNanos(toFull));
  }

  private long capacity() {
    return limit * UNITS_PER_TOKEN;
  }

  /** Microseconds for {@code units} to refill, rounded up. */
  private long micros(long units) {
    return units <= 0 ? 0 : (units + limit - 1) / limit;
  }

  private void refill(long now) {
    if (limit == 0) {
      lastNanos = now;
      return;
    }
    long elapsedMicros = (now - lastNanos) / 1000;
    if (elapsedMicros <= 0) {
      return;
    }
    // Sub-microsecond remainders stay in lastNanos, so no time is lost between calls.
    lastNanos += elapsedMicros * 1000;
    long missing = capacity() - level;
    level = elapsedMicros >= micros(missing) ? capacity() : level + elapsedMicros * limit;
  }
}
