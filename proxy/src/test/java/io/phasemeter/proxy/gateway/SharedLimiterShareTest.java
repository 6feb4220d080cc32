package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.redis.client.Redis;
import io.vertx.redis.client.RedisConnection;
import io.vertx.redis.client.Request;
import io.vertx.redis.client.Response;
import io.vertx.redis.client.impl.RequestImpl;
import io.vertx.redis.client.impl.types.MultiType;
import io.vertx.redis.client.impl.types.NumberType;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A replica's share while Redis comes and goes, on a clock the test turns: Redis is a {@link
 * ClockedRedis} (the script's buckets on the same clock) that answers or fails as the test says, so
 * a minute of flapping takes no time and every count is exact.
 */
class SharedLimiterShareTest {
  private final Vertx vertx = Vertx.vertx();
  private final ManualClock clock = new ManualClock();
  private final ClockedRedis redis = new ClockedRedis(clock);
  private final List<SharedLimiter> limiters = new ArrayList<>();

  @AfterEach
  void stop() throws Exception {
    limiters.forEach(SharedLimiter::close);
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  /** One replica of {@code replicasHint}; all of them share {@link #redis}. */
  private SharedLimiter replica(int replicasHint) {
    return replica(replicasHint, Duration.ofSeconds(30));
  }

  private SharedLimiter replica(int replicasHint, Duration timeout) {
    ProxyConfig.SharedLimits config =
        new ProxyConfig.SharedLimits(
            true,
            "standalone",
            List.of("redis://127.0.0.1:6379"),
            null,
            "pm-test:",
            timeout,
            replicasHint,
            "local",
            null);
    SharedLimiter l = new SharedLimiter(vertx, clock, config, new RateLimiter(clock), redis);
    limiters.add(l);
    return l;
  }

  /** Decided at once: Redis here answers or fails at once, and the timeout (30 s) never fires. */
  private static Decision now(Future<Decision> f) {
    assertThat(f.isComplete()).isTrue();
    return f.result();
  }

  @Test
  void whatTheShareAdmittedAloneIsTakenFromRedisWhenItAnswersAgain() {
    SharedLimiter a = replica(1);
    ApiKey k = ApiKey.of("outage", "a".repeat(64), 20, 0);
    redis.up = false;
    int alone = 0;
    for (int i = 0; i < 30; i++) {
      Decision d = now(a.admitRequest(k));
      assertThat(d.source()).isEqualTo(Decision.SOURCE_FALLBACK);
      alone += d.allowed() ? 1 : 0;
    }
    assertThat(alone).as("the share's full bucket").isEqualTo(20);
    // A second on, Redis is asked again, and answers: its bucket is full, it never saw the 20.
    redis.up = true;
    clock.advance(Duration.ofSeconds(1));
    assertThat(now(a.admitRequest(k)).allowed()).isTrue();
    // Then the 20 are taken from it: 20 - 1 - 20 = -1, two requests short of the next, 6 s.
    Decision next = now(a.admitRequest(k));
    assertThat(next.source()).isEqualTo(Decision.SOURCE_SHARED);
    assertThat(next.allowed()).isFalse();
    assertThat(next.retryAfter()).isEqualTo(Duration.ofSeconds(6));
  }

  /**
   * Redis ran the script but answered after the timeout, when the replica had admitted the request
   * alone: the admission is in Redis's bucket already and is not taken a second time when Redis
   * answers again (before, the key lost it twice).
   */
  @Test
  void anAdmissionRedisAnsweredLateIsNotTakenFromItTwice() throws Exception {
    SharedLimiter a = replica(1, Duration.ofMillis(50));
    ApiKey k = ApiKey.of("late", "a".repeat(64), 20, 0);
    redis.holdAnswers = true;
    Decision alone = a.admitRequest(k).await(10, TimeUnit.SECONDS);
    assertThat(alone.source()).isEqualTo(Decision.SOURCE_FALLBACK);
    assertThat(alone.allowed()).isTrue();
    redis.holdAnswers = false;
    redis.releaseHeld();
    // Redis's bucket: 20 less the held one, a second of refill (a third of a request), less one.
    clock.advance(Duration.ofSeconds(1));
    Decision shared = now(a.admitRequest(k));
    assertThat(shared.source()).isEqualTo(Decision.SOURCE_SHARED);
    assertThat(shared.headerMap()).containsEntry("x-ratelimit-remaining-requests", "18");
    assertThat(now(a.admitRequest(k)).headerMap())
        .as("the held admission is not taken again")
        .containsEntry("x-ratelimit-remaining-requests", "17");
  }

  @Test
  void whatASettlementGaveBackToTheShareIsNotOwed() {
    SharedLimiter a = replica(1);
    ApiKey k = ApiKey.of("settled", "a".repeat(64), 0, 1000);
    redis.up = false;
    Decision taken = now(a.admitTokens(k, 600));
    assertThat(taken.source()).isEqualTo(Decision.SOURCE_FALLBACK);
    a.settleTokens(k, 600, 100, taken.source());
    redis.up = true;
    clock.advance(Duration.ofSeconds(1));
    assertThat(now(a.admitTokens(k, 0)).source()).isEqualTo(Decision.SOURCE_SHARED);
    // 1,000 less the 100 used.
    assertThat(now(a.admitTokens(k, 901)).allowed()).isFalse();
    assertThat(now(a.admitTokens(k, 900)).allowed()).isTrue();
  }

  /**
   * The issue's case: Redis alternating, 1.2 s failing and 1.2 s answering, for ten minutes, and a
   * 20 rpm key asked ten times a second through two replicas in turn. Redis's bucket refills
   * through the outages, and before, so did each replica's share while Redis answered: each outage
   * found the shares refilled, and the key got its limit twice, Redis's and the shares' (about 400
   * of them). Now the shares pay for what Redis admitted, and the key gets its limit, plus at most
   * the two full buckets it started with.
   */
  @Test
  void aFlappingRedisCannotGiveTheKeyItsLimitTwice() {
    List<SharedLimiter> replicas = List.of(replica(2), replica(2));
    ApiKey k = ApiKey.of("flapping", "a".repeat(64), 20, 0);
    long rpm = 20;
    int minutes = 10;
    Duration step = Duration.ofMillis(100);
    int steps = (int) (Duration.ofMinutes(minutes).toMillis() / step.toMillis());
    int admitted = 0;
    int fallback = 0;
    for (int i = 0; i < steps; i++) {
      // 12 steps failing, 12 answering: 1.2 s each.
      redis.up = (i / 12) % 2 == 1;
      Decision d = now(replicas.get(i % 2).admitRequest(k));
      if (d.allowed()) {
        admitted++;
        fallback += d.source().equals(Decision.SOURCE_FALLBACK) ? 1 : 0;
      }
      clock.advance(step);
    }
    System.out.printf(
        "flapping redis (1.2 s down, 1.2 s up, %d min): %d admitted of a %d rpm key, %d by the"
            + " replicas' shares%n",
        minutes, admitted, rpm, fallback);
    // The limit for the window, Redis's full bucket at the start and the shares' (one limit).
    assertThat(admitted).isLessThanOrEqualTo((int) (rpm * minutes + 2 * rpm));
    assertThat(admitted)
        .as("and the limit is still given")
        .isGreaterThanOrEqualTo((int) (rpm * minutes));
  }

  /**
   * The script's buckets, in Java, on the test's clock: one requests and one tokens bucket a Redis
   * key tag, as {@code shared-buckets.lua} keeps them; while {@link #up} is false every command
   * fails at once, as a Redis that answers with an error.
   */
  static final class ClockedRedis implements Redis {
    private final ManualClock clock;
    private final Map<String, TokenBucket> buckets = new java.util.HashMap<>();
    volatile boolean up = true;
    // When set, the script runs at once but its answer waits for releaseHeld(): a Redis that
    // answers after the limiter's timeout.
    volatile boolean holdAnswers;
    private final List<io.vertx.core.Promise<Response>> held =
        new java.util.concurrent.CopyOnWriteArrayList<>();

    void releaseHeld() {
      held.forEach(p -> p.tryComplete(lastAnswer));
      held.clear();
    }

    private volatile Response lastAnswer;

    ClockedRedis(ManualClock clock) {
      this.clock = clock;
    }

    @Override
    public Future<Response> send(Request command) {
      if (!up) {
        return Future.failedFuture("ERR down");
      }
      List<byte[]> args = ((RequestImpl) command).getArgs();
      // EVALSHA sha 2 key:r key:t rpm tpm what n ttl
      String what = arg(args, 6);
      long n = Long.parseLong(arg(args, 7));
      long rpm = Long.parseLong(arg(args, 4));
      long tpm = Long.parseLong(arg(args, 5));
      long now = clock.nanoTime();
      TokenBucket r = buckets.computeIfAbsent(arg(args, 2), x -> new TokenBucket(rpm, now));
      TokenBucket t = buckets.computeIfAbsent(arg(args, 3), x -> new TokenBucket(tpm, now));
      long wait = 0;
      switch (what) {
        case "r" -> wait = r.tryTake(n, now);
        case "t" -> wait = t.tryTake(n, now);
        case "R" -> r.give(n, now);
        case "T" -> t.give(n, now);
        default -> throw new IllegalArgumentException(what);
      }
      RateLimitHeaders.Window rw = r.window(now);
      RateLimitHeaders.Window tw = t.window(now);
      MultiType m = MultiType.create(6, false);
      m.add(NumberType.create(wait == 0 ? 1 : 0));
      m.add(NumberType.create(wait / 1000));
      m.add(NumberType.create(rw.limit() == 0 ? -1 : rw.remaining()));
      m.add(NumberType.create(rw.limit() == 0 ? -1 : rw.reset().toNanos() / 1000));
      m.add(NumberType.create(tw.limit() == 0 ? -1 : tw.remaining()));
      m.add(NumberType.create(tw.limit() == 0 ? -1 : tw.reset().toNanos() / 1000));
      if (holdAnswers) {
        lastAnswer = m;
        io.vertx.core.Promise<Response> p = io.vertx.core.Promise.promise();
        held.add(p);
        return p.future();
      }
      return Future.succeededFuture(m);
    }

    private static String arg(List<byte[]> args, int i) {
      return new String(args.get(i), StandardCharsets.UTF_8);
    }

    @Override
    public Future<List<Response>> batch(List<Request> commands) {
      throw new UnsupportedOperationException();
    }

    @Override
    public Future<RedisConnection> connect() {
      throw new UnsupportedOperationException();
    }

    @Override
    public Future<Void> close() {
      return Future.succeededFuture();
    }
  }
}
