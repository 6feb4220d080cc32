package io.phasemeter.proxy.gateway;

import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * A rate limiter's answer for one request.
 *
 * @param allowed whether the request may proceed
 * @param refusal why not ({@link Refusal#NONE} when allowed)
 * @param retryAfter how long until enough has refilled; zero when allowed or when waiting cannot
 *     help ({@link Refusal#TOO_LARGE})
 * @param headers the key's rate-limit state after this decision
 * @param source who decided: {@link #SOURCE_LOCAL}, {@link #SOURCE_SHARED} or {@link
 *     #SOURCE_FALLBACK} (span attribute {@code llm.rate_limit.source})
 */
public record Decision(
    boolean allowed,
    Refusal refusal,
    Duration retryAfter,
    RateLimitHeaders headers,
    String source) {

  /** Decided by this replica's own buckets ({@code auth.shared_limits} off). */
  public static final String SOURCE_LOCAL = "local";

  /** Decided by the buckets every replica shares in Redis. */
  public static final String SOURCE_SHARED = "shared";

  /** Decided by this replica's share of the limits, Redis being out of reach. */
  public static final String SOURCE_FALLBACK = "fallback";

  /** A decision of this replica's own buckets. */
  public Decision(boolean allowed, Refusal refusal, Duration retryAfter, RateLimitHeaders headers) {
    this(allowed, refusal, retryAfter, headers, SOURCE_LOCAL);
  }

  /** Which limit refused a request. */
  public enum Refusal {
    /** Not refused. */
    NONE,
    /** Requests per minute. */
    REQUESTS,
    /** Tokens per minute; retrying after {@link Decision#retryAfter()} will pass. */
    TOKENS,
    /** The request alone needs more tokens than the per-minute limit: it can never pass. */
    TOO_LARGE
  }

  public Decision {
    Objects.requireNonNull(refusal, "refusal");
    Objects.requireNonNull(retryAfter, "retryAfter");
    Objects.requireNonNull(headers, "headers");
    Objects.requireNonNull(source, "source");
    if (allowed != (refusal == Refusal.NONE)) {
      throw new IllegalArgumentException("refusal: must be NONE exactly when allowed");
    }
  }

  /**
   * Seconds for a {@code Retry-After} header: {@link #retryAfter()} rounded up to whole seconds, at
   * least 1; -1 (send none) when allowed or when retrying cannot help.
   */
  public long retryAfterSeconds() {
    if (refusal != Refusal.REQUESTS && refusal != Refusal.TOKENS) {
      return -1;
    }
    long nanos = retryAfter.toNanos();
    return Math.max(1, nanos / 1_000_000_000L + (nanos % 1_000_000_000L > 0 ? 1 : 0));
  }

  /** The OpenAI rate-limit headers of {@link #headers()}. */
  public Map<String, String> headerMap() {
    return headers.headers();
  }
}
