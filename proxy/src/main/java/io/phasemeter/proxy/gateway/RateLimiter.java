package io.phasemeter.proxy.gateway;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.phasemeter.core.NanoClock;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;

/**
 * Per-key requests-per-minute and tokens-per-minute limits, each a token bucket whose capacity is
 * the limit and which refills continuously at limit / 60 s. A limit of 0 leaves that dimension
 * unlimited. Thread-safe: each bucket synchronises on itself, so keys never contend.
 *
 * <p>A request is admitted on requests first ({@link #admitRequest}), then on its token estimate
 * ({@link #admitTokens}: input estimate plus {@code max_tokens}, as OpenAI counts); when the tokens
 * refuse, {@link #refundRequest} gives the request back. When the response ends, {@link
 * #settleTokens} replaces the estimate with the actual usage; an overrun may take the bucket below
 * zero (at most one minute's worth), so the key's next requests wait for it.
 *
 * <p>Buckets of idle keys are forgotten after {@code idleExpiry}, which must be at least the
 * longest refill to full (two minutes, from the deepest debt): a bucket idle that long is full, so
 * forgetting it and starting a full one later changes nothing. {@code maxBuckets} bounds memory;
 * keep it above the number of configured keys, since an evicted active bucket comes back full.
 */
public final class RateLimiter {

  /** The default idle expiry: the longest refill to full (2 min) plus a minute of margin. */
  public static final Duration DEFAULT_IDLE_EXPIRY = Duration.ofMinutes(3);

  /** The default bound on buckets held. */
  public static final long DEFAULT_MAX_BUCKETS = 100_000;

  /** The two buckets of one key. */
  private record KeyBuckets(TokenBucket requests, TokenBucket tokens) {}

  private final NanoClock clock;
  private final Cache<String, KeyBuckets> buckets;

  /** A limiter with {@link #DEFAULT_IDLE_EXPIRY} and {@link #DEFAULT_MAX_BUCKETS}. */
  public RateLimiter(NanoClock clock) {
    this(clock, DEFAULT_IDLE_EXPIRY, DEFAULT_MAX_BUCKETS, ForkJoinPool.commonPool());
  }

  /**
   * A limiter whose idle buckets expire after {@code idleExpiry}, holding at most {@code
   * maxBuckets} keys, with cache maintenance run by {@code maintenance} ({@code Runnable::run}
   * makes it deterministic in tests).
   *
   * @throws IllegalArgumentException when {@code idleExpiry} is shorter than the longest refill
   */
  public RateLimiter(NanoClock clock, Duration idleExpiry, long maxBuckets, Executor maintenance) {
    this.clock = Objects.requireNonNull(clock, "clock");
    if (idleExpiry == null || idleExpiry.toNanos() < TokenBucket.MAX_REFILL_NANOS) {
      throw new IllegalArgumentException(
          "idleExpiry: must be at least 2m (the longest refill to full), got " + idleExpiry);
    }
    if (maxBuckets < 1) {
      throw new IllegalArgumentException("maxBuckets: must be at least 1, got " + maxBuckets);
    }
    this.buckets =
        Caffeine.newBuilder()
            .expireAfterAccess(idleExpiry)
            .maximumSize(maxBuckets)
            .ticker(clock::nanoTime)
            .executor(Objects.requireNonNull(maintenance, "maintenance"))
            .build();
  }

  /** Takes one request from {@code key}'s requests-per-minute bucket, or refuses. */
  public Decision admitRequest(ApiKey key) {
    long now = clock.nanoTime();
    KeyBuckets b = bucketsFor(key, now);
    long wait = b.requests().tryTake(1, now);
    return decision(wait == 0 ? Decision.Refusal.NONE : Decision.Refusal.REQUESTS, wait, b, now);
  }

  /**
   * Takes {@code estimatedTokens} from {@code key}'s tokens-per-minute bucket, or refuses. An
   * estimate above the limit itself is refused as {@link Decision.Refusal#TOO_LARGE}: no wait would
   * let it pass.
   */
  public Decision admitTokens(ApiKey key, long estimatedTokens) {
    if (estimatedTokens < 0) {
      throw new IllegalArgumentException("estimatedTokens: must be >= 0, got " + estimatedTokens);
    }
    long now = clock.nanoTime();
    KeyBuckets b = bucketsFor(key, now);
    if (key.limitsTokens() && estimatedTokens > key.tpm()) {
      return decision(Decision.Refusal.TOO_LARGE, 0, b, now);
    }
    long wait = b.tokens().tryTake(estimatedTokens, now);
    return decision(wait == 0 ? Decision.Refusal.NONE : Decision.Refusal.TOKENS, wait, b, now);
  }

  /**
   * Replaces an admitted estimate with the actual usage: refunds {@code estimated - actual} when
   * positive, charges the overrun when negative (the bucket may go below zero).
   */
  public void settleTokens(ApiKey key, long estimated, long actual) {
    if (estimated < 0 || actual < 0) {
      throw new IllegalArgumentException(
          "estimated and actual: must be >= 0, got " + estimated + " and " + actual);
    }
    long now = clock.nanoTime();
    bucketsFor(key, now).tokens().give(estimated - actual, now);
  }

  /** Gives back a request admitted by {@link #admitRequest} and then refused on tokens. */
  public void refundRequest(ApiKey key) {
    long now = clock.nanoTime();
    bucketsFor(key, now).requests().give(1, now);
  }

  /** {@code key}'s rate-limit state now, for the headers of a response. */
  public RateLimitHeaders snapshot(ApiKey key) {
    long now = clock.nanoTime();
    KeyBuckets b = bucketsFor(key, now);
    return new RateLimitHeaders(b.requests().window(now), b.tokens().window(now));
  }

  /** Keys whose buckets are held now (an estimate), for tests. */
  long bucketCount() {
    return buckets.estimatedSize();
  }

  /** Runs pending expiry and eviction now; for tests. */
  void cleanUp() {
    buckets.cleanUp();
  }

  private KeyBuckets bucketsFor(ApiKey key, long now) {
    KeyBuckets b =
        buckets.get(
            key.name(),
            n -> new KeyBuckets(new TokenBucket(key.rpm(), now), new TokenBucket(key.tpm(), now)));
    // A reload may have changed the key's limits since its buckets were made.
    b.requests().setLimit(key.rpm(), now);
    b.tokens().setLimit(key.tpm(), now);
    return b;
  }

  private static Decision decision(
      Decision.Refusal refusal, long waitNanos, KeyBuckets b, long now) {
    RateLimitHeaders headers =
        new RateLimitHeaders(b.requests().window(now), b.tokens().window(now));
    boolean allowed = refusal == Decision.Refusal.NONE;
    return new Decision(allowed, refusal, Duration.ofNanos(allowed ? 0 : waitNanos), headers);
  }
}
