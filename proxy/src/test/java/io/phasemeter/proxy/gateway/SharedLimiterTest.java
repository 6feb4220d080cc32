package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Shared buckets on a real redis-server: two limiters stand for two proxy replicas. */
class SharedLimiterTest {
  @TempDir Path dir;
  private Vertx vertx;
  private RedisServer redis;
  private final List<SharedLimiter> limiters = new ArrayList<>();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  @BeforeEach
  void start() throws Exception {
    redis = RedisServer.start(dir);
    vertx = Vertx.vertx();
  }

  @AfterEach
  void stop() throws Exception {
    limiters.forEach(SharedLimiter::close);
    vertx.close().await(10, TimeUnit.SECONDS);
    redis.close();
  }

  private SharedLimiter limiter(String onFailure, int replicasHint) {
    return limiter(onFailure, replicasHint, Duration.ofMillis(200));
  }

  private SharedLimiter limiter(String onFailure, int replicasHint, Duration timeout) {
    ProxyConfig.SharedLimits config =
        new ProxyConfig.SharedLimits(
            true,
            "standalone",
            List.of(redis.url()),
            null,
            "pm-test:",
            timeout,
            replicasHint,
            onFailure,
            null);
    SharedLimiter l =
        new SharedLimiter(
            vertx, NanoClock.system(), config, new RateLimiter(NanoClock.system()), Map.of());
    l.bindTo(registry);
    limiters.add(l);
    return l;
  }

  private static ApiKey key(String name, long rpm, long tpm) {
    return ApiKey.of(name, "a".repeat(64), rpm, tpm);
  }

  private static Decision await(Future<Decision> f) throws Exception {
    return f.await(10, TimeUnit.SECONDS);
  }

  @Test
  void twoReplicasNeverBothSpendTheLastToken() throws Exception {
    SharedLimiter a = limiter("local", 2);
    SharedLimiter b = limiter("local", 2);
    ApiKey k = key("team-a", 10, 0);
    int allowed = 0;
    for (int i = 0; i < 20; i++) {
      Decision d = await((i % 2 == 0 ? a : b).admitRequest(k));
      assertThat(d.source()).isEqualTo(Decision.SOURCE_SHARED);
      allowed += d.allowed() ? 1 : 0;
    }
    // The bucket starts full (10) and refills 10 a minute: the 20 asks take well under 6 s.
    assertThat(allowed).isEqualTo(10);
    Decision refused = await(a.admitRequest(k));
    assertThat(refused.refusal()).isEqualTo(Decision.Refusal.REQUESTS);
    assertThat(refused.retryAfterSeconds()).isBetween(1L, 6L);
    assertThat(refused.headerMap())
        .containsEntry("x-ratelimit-limit-requests", "10")
        .containsEntry("x-ratelimit-remaining-requests", "0");
  }

  @Test
  void concurrentAsksFromBothReplicasAdmitExactlyTheLimit() throws Exception {
    // Atomicity across replicas, not the fallback: 300 asks at once on a busy machine may take
    // longer than 200 ms, and each one past the timeout is rightly decided by a replica's share.
    SharedLimiter a = limiter("local", 2, Duration.ofSeconds(10));
    SharedLimiter b = limiter("local", 2, Duration.ofSeconds(10));
    ApiKey k = key("burst", 100, 0);
    List<Future<Decision>> all = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      all.add((i % 2 == 0 ? a : b).admitRequest(k));
    }
    Future.all(all).await(20, TimeUnit.SECONDS);
    long allowed = all.stream().filter(f -> f.result().allowed()).count();
    assertThat(allowed).isEqualTo(100);
  }

  @Test
  void settlementGivesBackWhatWasNotUsed() throws Exception {
    SharedLimiter a = limiter("local", 1);
    ApiKey k = key("tokens", 0, 1000);
    assertThat(await(a.admitTokens(k, 600)).allowed()).isTrue();
    assertThat(await(a.admitTokens(k, 600)).refusal()).isEqualTo(Decision.Refusal.TOKENS);
    a.settleTokens(k, 600, 100, Decision.SOURCE_SHARED);
    // The settlement is sent without waiting; the next decision sees it once it landed.
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> await(a.admitTokens(k, 0)).headers().tokens().remaining() >= 899);
    assertThat(await(a.admitTokens(k, 600)).allowed()).isTrue();
    assertThat(await(a.admitTokens(k, 5000)).refusal())
        .as("more than the whole limit never passes")
        .isEqualTo(Decision.Refusal.TOO_LARGE);
  }

  @Test
  void whatRedisTookGoesBackToRedisEvenWhileTheReplicaDecidesAlone() throws Exception {
    SharedLimiter a = limiter("local", 2);
    ApiKey k = key("settle-in-outage", 0, 1000);
    Decision taken = await(a.admitTokens(k, 1000));
    assertThat(taken.source()).isEqualTo(Decision.SOURCE_SHARED);
    // One timeout: for the next second the replica decides alone...
    redis.pause();
    try {
      assertThat(await(a.admitTokens(k, 10)).source()).isEqualTo(Decision.SOURCE_FALLBACK);
    } finally {
      redis.resume();
    }
    // ...but the settlement of what Redis took goes to Redis, not to the replica's share.
    a.settleTokens(k, 1000, 0, Decision.SOURCE_SHARED);
    String tag = SharedLimiter.keyTag("pm-test:", "settle-in-outage");
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () -> {
              redis.command("PING");
              long level = (long) Double.parseDouble(hget(tag + ":t", "b"));
              assertThat(level).as("milli-tokens back in Redis").isGreaterThanOrEqualTo(999_000);
            });
  }

  private String hget(String key, String field) throws Exception {
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", redis.port())) {
      s.getOutputStream()
          .write(
              ("HGET " + key + " " + field + "\r\n")
                  .getBytes(java.nio.charset.StandardCharsets.UTF_8));
      java.io.BufferedReader in =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(
                  s.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
      String head = in.readLine();
      return head.startsWith("$-1") ? "0" : in.readLine();
    }
  }

  @Test
  void redisKeysAreHashedNamesThatExpireWhenIdle() throws Exception {
    SharedLimiter a = limiter("local", 1);
    await(a.admitRequest(key("secret-team-name", 5, 50)));
    await(a.admitTokens(key("secret-team-name", 5, 50), 10));
    List<String> keys = redis.keys();
    assertThat(keys).hasSize(2).allSatisfy(k -> assertThat(k).startsWith("pm-test:{"));
    assertThat(String.join(",", keys)).doesNotContain("secret").doesNotContain("team");
    for (String k : keys) {
      long ttl = Long.parseLong(redis.command("PTTL " + k).substring(1));
      assertThat(ttl).isPositive().isLessThanOrEqualTo(SharedLimiter.IDLE_EXPIRY.toMillis());
    }
  }

  @Test
  void aPausedRedisIsATimeoutThenTheReplicasOwnShareThenSharedAgain() throws Exception {
    SharedLimiter a = limiter("local", 4);
    ApiKey k = key("pausing", 40, 0);
    assertThat(await(a.admitRequest(k)).source()).isEqualTo(Decision.SOURCE_SHARED);
    redis.pause();
    try {
      Decision d = await(a.admitRequest(k));
      assertThat(d.source()).isEqualTo(Decision.SOURCE_FALLBACK);
      assertThat(d.allowed()).isTrue();
      assertThat(a.up()).isFalse();
      assertThat(registry.counter("llm.shared_limits.fallbacks", "reason", "timeout").count())
          .isEqualTo(1);
      // Within the second after, no one waits for Redis: this replica's share, 40 / 4 = 10.
      int allowed = 1;
      for (int i = 0; i < 20; i++) {
        Decision next = await(a.admitRequest(k));
        assertThat(next.source()).isEqualTo(Decision.SOURCE_FALLBACK);
        allowed += next.allowed() ? 1 : 0;
      }
      assertThat(allowed).isEqualTo(10);
      assertThat(registry.counter("llm.shared_limits.fallbacks", "reason", "unavailable").count())
          .isEqualTo(20);
    } finally {
      redis.resume();
    }
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> await(a.admitRequest(k)).source().equals(Decision.SOURCE_SHARED));
    assertThat(a.up()).isTrue();
  }

  @Test
  void failingClosedRefusesWhileRedisIsGone() throws Exception {
    SharedLimiter a = limiter("fail_closed", 1);
    ApiKey k = key("closed", 10, 0);
    assertThat(await(a.admitRequest(k)).allowed()).isTrue();
    redis.kill();
    Future<Decision> f = a.admitRequest(k);
    org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(f::isComplete);
    assertThat(f.failed()).isTrue();
    assertThat(f.cause()).isInstanceOf(SharedLimiter.Unavailable.class);
    redis.restart();
    // Redis restarted empty: the script is sent in full once (NOSCRIPT), the bucket starts full.
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .ignoreExceptions()
        .until(() -> await(a.admitRequest(k)).source().equals(Decision.SOURCE_SHARED));
  }
}
