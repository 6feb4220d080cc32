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
 */
public record Decision(
    boolean allowed, Refusal refusal, Duration retryAfter, RateLimitHeaders headers) {

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
