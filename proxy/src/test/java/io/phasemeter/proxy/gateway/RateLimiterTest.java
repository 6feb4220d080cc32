package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class RateLimiterTest {
  static final String HASH = "a".repeat(64);

  final ManualClock clock = new ManualClock();
  final RateLimiter limiter =
      new RateLimiter(clock, RateLimiter.DEFAULT_IDLE_EXPIRY, 1000, Runnable::run);

  @Test
  void threeRpmAdmitsThreeThenRefusesForTwentySeconds() {
    ApiKey key = ApiKey.of("team-a", HASH, 3, 0);
    for (int i = 0; i < 3; i++) {
      assertThat(limiter.admitRequest(key).allowed()).isTrue();
    }

    Decision fourth = limiter.admitRequest(key);

    assertThat(fourth.allowed()).isFalse();
    assertThat(fourth.refusal()).isEqualTo(Decision.Refusal.REQUESTS);
    // One request refills every 60 s / 3 = 20 s.
    assertThat(fourth.retryAfter()).isEqualTo(Duration.ofSeconds(20));
    assertThat(fourth.retryAfterSeconds()).isEqualTo(20);

    clock.advance(Duration.ofMillis(19_999));
    Decision early = limiter.admitRequest(key);
    assertThat(early.allowed()).isFalse();
    assertThat(early.retryAfter()).isEqualTo(Duration.ofMillis(1));
    assertThat(early.retryAfterSeconds()).isEqualTo(1);

    clock.advance(Duration.ofMillis(1));
    assertThat(limiter.admitRequest(key).allowed()).isTrue();
    assertThat(limiter.admitRequest(key).allowed()).isFalse();
  }

  @Test
  void retryAfterSecondsRoundsUp() {
    ApiKey key = ApiKey.of("team-a", HASH, 7, 0);
    for (int i = 0; i < 7; i++) {
      limiter.admitRequest(key);
    }

    Decision refused = limiter.admitRequest(key);

    // 60 s / 7 = 8.571428…s, rounded up to the microsecond, then to whole seconds.
    assertThat(refused.retryAfter()).isEqualTo(Duration.ofNanos(8_571_429_000L));
    assertThat(refused.retryAfterSeconds()).isEqualTo(9);
  }

  @Test
  void aSettledRefundLetsALaterRequestPass() {
    ApiKey key = ApiKey.of("team-a", HASH, 0, 1000);
    assertThat(limiter.admitTokens(key, 600).allowed()).isTrue();

    Decision refused = limiter.admitTokens(key, 600);
    assertThat(refused.refusal()).isEqualTo(Decision.Refusal.TOKENS);
    // 200 tokens short at 1000 per 60 s: 12 s.
    assertThat(refused.retryAfter()).isEqualTo(Duration.ofSeconds(12));

    limiter.settleTokens(key, 600, 100);

    Decision admitted = limiter.admitTokens(key, 600);
    assertThat(admitted.allowed()).isTrue();
    assertThat(admitted.headers().tokens().remaining()).isEqualTo(300);
  }

  @Test
  void aSettledOverrunMakesTheNextRequestWait() {
    ApiKey key = ApiKey.of("team-a", HASH, 0, 1000);
    assertThat(limiter.admitTokens(key, 500).allowed()).isTrue();

    limiter.settleTokens(key, 500, 1500);

    Decision refused = limiter.admitTokens(key, 100);
    assertThat(refused.refusal()).isEqualTo(Decision.Refusal.TOKENS);
    // The bucket is at -500; 600 tokens at 1000 per 60 s take 36 s.
    assertThat(refused.retryAfter()).isEqualTo(Duration.ofSeconds(36));
    assertThat(refused.headers().tokens().remaining()).isZero();
    assertThat(refused.headers().tokens().reset()).isEqualTo(Duration.ofSeconds(90));

    clock.advance(Duration.ofSeconds(36));
    assertThat(limiter.admitTokens(key, 100).allowed()).isTrue();
  }

  @Test
  void debtIsCappedAtOneMinuteOfTokens() {
    ApiKey key = ApiKey.of("team-a", HASH, 0, 1000);

    limiter.settleTokens(key, 0, 50_000);

    assertThat(limiter.snapshot(key).tokens().reset()).isEqualTo(Duration.ofMinutes(2));
    assertThat(limiter.snapshot(key).headers()).containsEntry("x-ratelimit-reset-tokens", "2m0s");
  }

  @Test
  void anEstimateAboveTheLimitIsRefusedAsTooLargeWithNoRetry() {
    ApiKey key = ApiKey.of("team-a", HASH, 0, 1000);

    Decision d = limiter.admitTokens(key, 1001);

    assertThat(d.allowed()).isFalse();
    assertThat(d.refusal()).isEqualTo(Decision.Refusal.TOO_LARGE);
    assertThat(d.retryAfter()).isZero();
    assertThat(d.retryAfterSeconds()).isEqualTo(-1);
    assertThat(d.headers().tokens().remaining()).isEqualTo(1000);
    assertThat(limiter.admitTokens(key, 1000).allowed()).isTrue();
  }

  @Test
  void aRefundedRequestCanBeUsedAgain() {
    ApiKey key = ApiKey.of("team-a", HASH, 1, 10);
    assertThat(limiter.admitRequest(key).allowed()).isTrue();
    assertThat(limiter.admitTokens(key, 11).refusal()).isEqualTo(Decision.Refusal.TOO_LARGE);

    limiter.refundRequest(key);

    assertThat(limiter.admitRequest(key).allowed()).isTrue();
  }

  @Test
  void headersCarryLimitRemainingAndResetAsOpenAiWritesThem() {
    ApiKey key = ApiKey.of("team-a", HASH, 3, 1000);

    Decision first = limiter.admitRequest(key);
    assertThat(first.headerMap())
        .containsExactly(
            entry("x-ratelimit-limit-requests", "3"),
            entry("x-ratelimit-limit-tokens", "1000"),
            entry("x-ratelimit-remaining-requests", "2"),
            entry("x-ratelimit-remaining-tokens", "1000"),
            entry("x-ratelimit-reset-requests", "20s"),
            entry("x-ratelimit-reset-tokens", "0s"));

    // 250 tokens refill in 250 × 60 s / 1000 = 15 s.
    assertThat(limiter.admitTokens(key, 250).headerMap())
        .containsEntry("x-ratelimit-remaining-tokens", "750")
        .containsEntry("x-ratelimit-reset-tokens", "15s");

    clock.advance(Duration.ofMillis(1500));
    // Requests: 2 + 1.5 × 3 / 60 = 2.075 left, full in 18.5 s; tokens: 775, full in 13.5 s.
    assertThat(limiter.snapshot(key).headers())
        .containsEntry("x-ratelimit-remaining-requests", "2")
        .containsEntry("x-ratelimit-reset-requests", "18.5s")
        .containsEntry("x-ratelimit-remaining-tokens", "775")
        .containsEntry("x-ratelimit-reset-tokens", "13.5s");
  }

  @Test
  void openAiDocumentedSamplesComeOutTheSame() {
    ApiKey key = ApiKey.of("team-a", HASH, 60, 150_000);

    limiter.admitRequest(key);
    Decision d = limiter.admitTokens(key, 16);

    // OpenAI's sample: 60 rpm, 59 left, "1s"; 16 of 150000 tokens refill in 6.4 ms, shown as 7ms.
    assertThat(d.headerMap())
        .containsEntry("x-ratelimit-remaining-requests", "59")
        .containsEntry("x-ratelimit-reset-requests", "1s")
        .containsEntry("x-ratelimit-remaining-tokens", "149984")
        .containsEntry("x-ratelimit-reset-tokens", "7ms");
  }

  @Test
  void resetsAreFormattedAsGoDurations() {
    assertThat(RateLimitHeaders.goDuration(Duration.ZERO)).isEqualTo("0s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofNanos(1))).isEqualTo("1ms");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMillis(20))).isEqualTo("20ms");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMillis(999))).isEqualTo("999ms");
    assertThat(RateLimitHeaders.goDuration(Duration.ofSeconds(1))).isEqualTo("1s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMillis(1500))).isEqualTo("1.5s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMinutes(6))).isEqualTo("6m0s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMillis(90_500))).isEqualTo("1m30.5s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofMillis(61_250))).isEqualTo("1m1.25s");
    assertThat(RateLimitHeaders.goDuration(Duration.ofHours(1))).isEqualTo("1h0m0s");
  }

  @Test
  void zeroLimitsAreUnlimitedAndSendNoHeaders() {
    ApiKey tokensOnly = ApiKey.of("tokens-only", HASH, 0, 1000);
    ApiKey free = ApiKey.of("free", HASH, 0, 0);

    for (int i = 0; i < 1000; i++) {
      assertThat(limiter.admitRequest(free).allowed()).isTrue();
      assertThat(limiter.admitTokens(free, 1_000_000).allowed()).isTrue();
    }
    assertThat(limiter.admitRequest(free).headerMap()).isEmpty();
    assertThat(limiter.admitRequest(tokensOnly).headerMap())
        .containsOnlyKeys(
            "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens");
  }

  @Test
  void aReloadedLimitTakesEffectOnTheSameBucket() {
    limiter.admitRequest(ApiKey.of("team-a", HASH, 3, 0));
    limiter.admitRequest(ApiKey.of("team-a", HASH, 3, 0));
    limiter.admitRequest(ApiKey.of("team-a", HASH, 3, 0));

    RateLimitHeaders raised = limiter.snapshot(ApiKey.of("team-a", HASH, 6, 0));

    assertThat(raised.requests().limit()).isEqualTo(6);
    assertThat(raised.requests().remaining()).isZero();
    assertThat(limiter.admitRequest(ApiKey.of("team-a", HASH, 0, 0)).allowed()).isTrue();
  }

  @Test
  void anIdleBucketExpiresAndComesBackFull() {
    ApiKey key = ApiKey.of("team-a", HASH, 3, 0);
    for (int i = 0; i < 3; i++) {
      limiter.admitRequest(key);
    }

    clock.advance(RateLimiter.DEFAULT_IDLE_EXPIRY.minusNanos(1));
    limiter.cleanUp();
    assertThat(limiter.bucketCount()).isEqualTo(1);

    clock.advance(Duration.ofNanos(1));
    limiter.cleanUp();
    assertThat(limiter.bucketCount()).isZero();

    assertThat(limiter.admitRequest(key).headers().requests().remaining()).isEqualTo(2);
  }

  @Test
  void bucketsStayBoundedWithManyKeys() {
    RateLimiter small = new RateLimiter(clock, Duration.ofMinutes(3), 10, Runnable::run);

    for (int i = 0; i < 100; i++) {
      small.admitRequest(ApiKey.of("key-" + i, HASH, 5, 0));
    }
    small.cleanUp();

    assertThat(small.bucketCount()).isLessThanOrEqualTo(10);
  }

  @Test
  void anIdleExpiryShorterThanTheLongestRefillIsRefused() {
    assertThatThrownBy(() -> new RateLimiter(clock, Duration.ofSeconds(119), 10, Runnable::run))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("idleExpiry: must be at least 2m");
  }
}
