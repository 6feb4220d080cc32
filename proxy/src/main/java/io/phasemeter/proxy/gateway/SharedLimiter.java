package io.phasemeter.proxy.gateway;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.AsyncResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.redis.client.Command;
import io.vertx.redis.client.Redis;
import io.vertx.redis.client.RedisClientType;
import io.vertx.redis.client.RedisOptions;
import io.vertx.redis.client.RedisRole;
import io.vertx.redis.client.Request;
import io.vertx.redis.client.Response;
import io.vertx.redis.client.ResponseType;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rate limits that hold across replicas ({@code auth.shared_limits}): each key's rpm and tpm
 * buckets live in Redis and every decision is one atomic script, one round trip ({@code
 * shared-buckets.lua}: refill from Redis's own clock, take, answer the remaining counts and the
 * resets), so two replicas can never both spend the last token. Redis keys are the prefix and the
 * SHA-256 of the key's name, never the key, and expire when idle.
 *
 * <p>Redis down or slow is a decision, not a hang: an answer that does not come within {@code
 * timeout} (or an error) is replaced by this replica's own buckets, sized as the limit ÷ {@code
 * replicas_hint}, or by a refusal ({@code fail_closed}); for the next second every decision is made
 * that way without asking, then Redis is tried again. Each such decision is counted ({@code
 * llm_shared_limits_fallbacks_total}); the outage is logged once when it starts and once when it
 * ends. Every round trip is timed ({@code llm_shared_limits_duration_seconds}). What a replica
 * admitted alone is taken from Redis's buckets when Redis next answers for the key, so Redis's
 * bucket counts every admission and a Redis that comes and goes cannot give a key its limit twice
 * (Redis's refill through the outage and the shares').
 *
 * <p>What Redis answers is not believed blindly (redis:// is cleartext, and whoever answers on the
 * endpoint is "Redis"): each connection reads replies through a {@link RedisReplyLimit}, which
 * refuses one larger than {@value RedisReplyLimit#MAX_REPLY_BYTES} bytes or malformed before it is
 * held, and an answer that is not the script's six integers in their ranges is refused here; either
 * is decided locally like an error and counted as {@code bad_reply}.
 */
public final class SharedLimiter implements Limiter, MeterBinder, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(SharedLimiter.class);

  /** How long decisions stay local after Redis failed to answer, before it is asked again. */
  static final Duration RETRY_AFTER_FAILURE = Duration.ofSeconds(1);

  /** Idle buckets expire after this: the longest refill to full, plus a minute (as locally). */
  static final Duration IDLE_EXPIRY = RateLimiter.DEFAULT_IDLE_EXPIRY;

  static final String SCRIPT = script();
  static final String SCRIPT_SHA = sha1Hex(SCRIPT);

  /** What a round trip was for: the metric's {@code operation}. */
  enum Operation {
    ADMIT_REQUESTS("admit_requests"),
    ADMIT_TOKENS("admit_tokens"),
    SETTLE("settle");

    final String label;

    Operation(String label) {
      this.label = label;
    }
  }

  /** Thrown (failed future) when Redis cannot answer and the limits fail closed. */
  public static final class Unavailable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unavailable(String message) {
      super(message, null, false, false);
    }
  }

  private final Vertx vertx;
  private final NanoClock clock;
  private final ProxyConfig.SharedLimits config;
  private final Redis redis;
  private final RateLimiter fallback;
  private final long timeoutMs;
  private final String where;
  private final AtomicBoolean up = new AtomicBoolean(true);
  private volatile long askAgainAt;
  private final Map<Operation, Timer[]> timers = new EnumMap<>(Operation.class);

  /**
   * By key name, what this replica admitted alone and Redis has not been told yet. Forgotten after
   * the buckets' idle expiry: by then Redis's buckets have expired too.
   */
  private final Cache<String, Owed> owed;

  /** Requests and tokens owed to Redis for one key; changed only inside the map's compute. */
  private static final class Owed {
    long requests;
    long tokens;
  }

  private Counter fallbackTimeout;
  private Counter fallbackError;
  private Counter fallbackUnavailable;
  private Counter fallbackBadReply;

  /** A limiter on the Redis of {@code config}, with {@code fallback} for when it cannot answer. */
  public SharedLimiter(
      Vertx vertx, NanoClock clock, ProxyConfig.SharedLimits config, RateLimiter fallback) {
    this(vertx, clock, config, fallback, System.getenv());
  }

  SharedLimiter(
      Vertx vertx,
      NanoClock clock,
      ProxyConfig.SharedLimits config,
      RateLimiter fallback,
      Map<String, String> env) {
    this(vertx, clock, config, fallback, client(vertx, config, env));
  }

  /** A limiter on {@code redis} (a test's own), which it closes. */
  SharedLimiter(
      Vertx vertx,
      NanoClock clock,
      ProxyConfig.SharedLimits config,
      RateLimiter fallback,
      Redis redis) {
    this.vertx = vertx;
    this.clock = clock;
    this.config = config;
    this.fallback = fallback;
    this.timeoutMs = Math.max(1, config.timeout().toMillis());
    this.where = config.type() + " " + String.join(", ", config.endpoints());
    this.redis = redis;
    this.owed =
        Caffeine.newBuilder()
            .expireAfterWrite(IDLE_EXPIRY)
            .maximumSize(RateLimiter.DEFAULT_MAX_BUCKETS)
            .ticker(clock::nanoTime)
            .build();
  }

  private static Redis client(
      Vertx vertx, ProxyConfig.SharedLimits config, Map<String, String> env) {
    RedisOptions options =
        new RedisOptions()
            .setType(RedisClientType.valueOf(config.type().toUpperCase(Locale.ROOT)))
            .setEndpoints(config.endpoints())
            // A decision is one short script: a few connections carry thousands a second, and
            // waiters beyond them fail fast (then fall back) instead of queueing without end.
            .setMaxPoolSize(16)
            .setMaxPoolWaiting(4096);
    // rediss://: Redis's certificate must name the endpoint's host, as HTTPS checks it (Vert.x 5
    // refuses TLS without a choice here); it is trusted by the JVM's trust store.
    options.getNetClientOptions().setHostnameVerificationAlgorithm("HTTPS");
    if (config.masterName() != null) {
      options.setMasterName(config.masterName()).setRole(RedisRole.MASTER);
    }
    if (config.passwordEnv() != null) {
      String password = env.get(config.passwordEnv());
      if (password == null || password.isEmpty()) {
        throw new IllegalArgumentException(
            "auth.shared_limits.password_env: the variable "
                + config.passwordEnv()
                + " is not set");
      }
      options.setPassword(password);
    }
    // Every connection reads Redis's replies through a RedisReplyLimit: the client itself would
    // hold a reply of any size whole.
    return Redis.createClient(ReplyLimitedVertx.of(vertx), options);
  }

  /**
   * Connects and loads the script, so that the first decision does not pay for the connection, the
   * handshake and the script's first sending inside its timeout. Does not wait for it: a Redis that
   * is down at start is an outage like any other (logged, decided locally, retried).
   */
  public Future<Void> warmUp() {
    long start = clock.nanoTime();
    return redis
        .send(Request.cmd(Command.SCRIPT).arg("LOAD").arg(SCRIPT))
        .onSuccess(r -> answered(Operation.SETTLE, start, false))
        .onFailure(t -> failed(null, start, 2, String.valueOf(t.getMessage())))
        .mapEmpty();
  }

  @Override
  public Future<Decision> admitRequest(ApiKey key) {
    return decide(key, Operation.ADMIT_REQUESTS, "r", 1);
  }

  @Override
  public Future<Decision> admitTokens(ApiKey key, long estimatedTokens) {
    if (estimatedTokens < 0) {
      throw new IllegalArgumentException("estimatedTokens: must be >= 0, got " + estimatedTokens);
    }
    if (key.limitsTokens() && estimatedTokens > key.tpm()) {
      // No wait would let it pass: no need to ask Redis, and no bucket's state to report.
      return Future.succeededFuture(
          new Decision(
              false,
              Decision.Refusal.TOO_LARGE,
              Duration.ZERO,
              new RateLimitHeaders(
                  RateLimitHeaders.Window.UNLIMITED, RateLimitHeaders.Window.UNLIMITED),
              Decision.SOURCE_SHARED));
    }
    return decide(key, Operation.ADMIT_TOKENS, "t", estimatedTokens);
  }

  @Override
  public void settleTokens(ApiKey key, long estimated, long actual, String source) {
    if (estimated < 0 || actual < 0) {
      throw new IllegalArgumentException(
          "estimated and actual: must be >= 0, got " + estimated + " and " + actual);
    }
    give(key, "T", estimated - actual, source);
  }

  @Override
  public void refundRequest(ApiKey key, String source) {
    give(key, "R", 1, source);
  }

  /** One admission: the script's answer within the timeout, or this replica's own decision. */
  private Future<Decision> decide(ApiKey key, Operation op, String what, long n) {
    long start = clock.nanoTime();
    if (start < askAgainAt) {
      return local(key, what, n, fallbackUnavailable);
    }
    Promise<Decision> decided = Promise.promise();
    long timer =
        vertx.setTimer(
            timeoutMs,
            id -> {
              if (!decided.future().isComplete()) {
                failed(op, start, 1, "did not answer within " + timeoutMs + " ms");
                completeLocal(decided, key, what, n, fallbackTimeout);
              }
            });
    send(key, what, n)
        .onComplete(
            ar -> {
              vertx.cancelTimer(timer);
              if (decided.future().isComplete()) {
                lateAnswer(key, what, n, decided.future(), ar);
                return;
              }
              Decision d = ar.succeeded() ? parse(key, what, ar.result()) : null;
              if (d != null) {
                answered(op, start);
                payBack(key);
                decided.tryComplete(d);
              } else if (ar.succeeded()) {
                failed(op, start, 2, "answered in a shape the script never returns");
                completeLocal(decided, key, what, n, fallbackBadReply);
              } else if (ar.cause() instanceof RedisReplyLimit.Refused) {
                failed(op, start, 2, ar.cause().getMessage());
                completeLocal(decided, key, what, n, fallbackBadReply);
              } else {
                failed(op, start, 2, ar.cause().getMessage());
                completeLocal(decided, key, what, n, fallbackError);
              }
            });
    return decided.future();
  }

  /**
   * Redis answered after the timeout, when this replica had decided alone: the script ran all the
   * same. What it took for an admission this replica also made is already in Redis's bucket (no
   * longer owed); what it took for a request this replica refused goes back to Redis.
   */
  private void lateAnswer(
      ApiKey key, String what, long n, Future<Decision> local, AsyncResult<Response> ar) {
    Decision redisSaid = ar.succeeded() ? parse(key, what, ar.result()) : null;
    if (redisSaid == null || !redisSaid.allowed()) {
      return;
    }
    boolean request = what.equals("r");
    if (local.succeeded() && local.result().allowed()) {
      owe(key, request ? -1 : 0, request ? 0 : -n);
    } else {
      toRedis(key, request ? "R" : "T", request ? 1 : n);
    }
  }

  private void completeLocal(
      Promise<Decision> decided, ApiKey key, String what, long n, Counter reason) {
    local(key, what, n, reason).onComplete(decided);
  }

  /** This replica's decision while Redis cannot answer: its own share of the limit, or 503. */
  private Future<Decision> local(ApiKey key, String what, long n, Counter reason) {
    if (reason != null) {
      reason.increment();
    }
    if (config.failClosed()) {
      return Future.failedFuture(
          new Unavailable(
              "The shared rate limiter is unavailable; the request was refused. Please retry"
                  + " shortly."));
    }
    ApiKey share = share(key);
    Decision d = what.equals("r") ? fallback.admitRequest(share) : fallback.admitTokens(share, n);
    if (d.allowed()) {
      owe(key, what.equals("r") ? 1 : 0, what.equals("r") ? 0 : n);
    }
    return Future.succeededFuture(withSource(d, Decision.SOURCE_FALLBACK));
  }

  /**
   * A give (refund or settlement) to the store that took the request: what Redis took goes back to
   * Redis, sent without waiting, whatever the state now (it is dropped if Redis cannot take it: the
   * key loses it, never gains it); what this replica's share took goes back to the share, and is no
   * longer owed to Redis.
   */
  private void give(ApiKey key, String what, long n, String source) {
    if (!Decision.SOURCE_SHARED.equals(source)) {
      if (Decision.SOURCE_FALLBACK.equals(source)) {
        giveLocally(key, what, n);
      }
      return;
    }
    toRedis(key, what, n);
  }

  /** Sends a give (negative: a charge) to Redis without waiting; timed as a settlement. */
  private void toRedis(ApiKey key, String what, long n) {
    long start = clock.nanoTime();
    send(key, what, n)
        .onComplete(
            ar -> {
              if (ar.succeeded()) {
                answered(Operation.SETTLE, start);
              } else {
                failed(Operation.SETTLE, start, 2, ar.cause().getMessage());
              }
            });
  }

  private void giveLocally(ApiKey key, String what, long n) {
    ApiKey share = share(key);
    if (what.equals("R")) {
      fallback.refundRequest(share);
      owe(key, -1, 0);
    } else {
      if (n >= 0) {
        fallback.settleTokens(share, n, 0);
      } else {
        fallback.settleTokens(share, 0, -n);
      }
      owe(key, 0, -n);
    }
  }

  /** Adds to what this replica admitted alone for {@code key} and has not yet told Redis. */
  private void owe(ApiKey key, long requests, long tokens) {
    owed.asMap()
        .compute(
            key.name(),
            (name, o) -> {
              Owed v = o == null ? new Owed() : o;
              v.requests += requests;
              v.tokens += tokens;
              return v;
            });
  }

  /**
   * Once Redis answers for {@code key} again, what this replica admitted alone meanwhile is taken
   * from Redis's buckets (sent without waiting; the script stops at minus one limit), so that every
   * admission, wherever it was decided, is in the one bucket: Redis's bucket refills through an
   * outage as the shares do, and without it a Redis that comes and goes would give the key both.
   */
  private void payBack(ApiKey key) {
    Owed o = owed.asMap().remove(key.name());
    if (o == null) {
      return;
    }
    if (o.requests != 0) {
      toRedis(key, "R", -o.requests);
    }
    if (o.tokens != 0) {
      toRedis(key, "T", -o.tokens);
    }
  }

  private Future<Response> send(ApiKey key, String what, long n) {
    String tag = keyTag(config.keyPrefix(), key.name());
    return redis
        .send(evalsha(tag, key, what, n))
        .recover(
            err ->
                err.getMessage() != null && err.getMessage().startsWith("NOSCRIPT")
                    // Redis restarted (or a new node): the script goes once in full, then cached.
                    ? redis.send(eval(tag, key, what, n))
                    : Future.failedFuture(err));
  }

  private Request evalsha(String tag, ApiKey key, String what, long n) {
    return args(Request.cmd(Command.EVALSHA).arg(SCRIPT_SHA), tag, key, what, n);
  }

  private Request eval(String tag, ApiKey key, String what, long n) {
    return args(Request.cmd(Command.EVAL).arg(SCRIPT), tag, key, what, n);
  }

  private static Request args(Request r, String tag, ApiKey key, String what, long n) {
    return r.arg(2)
        .arg(tag + ":r")
        .arg(tag + ":t")
        .arg(key.rpm())
        .arg(key.tpm())
        .arg(what)
        .arg(n)
        .arg(IDLE_EXPIRY.toMillis());
  }

  /**
   * The Redis key of a key's buckets, less the {@code :r} / {@code :t} suffix: the prefix and the
   * SHA-256 of the key's name in braces (Redis Cluster puts both buckets in the braces' slot). The
   * API key itself is never known here, and its name does not show.
   */
  static String keyTag(String prefix, String keyName) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      sha.update(prefix.getBytes(StandardCharsets.UTF_8));
      sha.update((byte) 0);
      byte[] h = sha.digest(keyName.getBytes(StandardCharsets.UTF_8));
      return prefix + "{" + HexFormat.of().formatHex(h, 0, 16) + "}";
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The script's answer as a decision, or null when it is not what the script returns: an array of
   * six integers, allowed 0 or 1, the wait and the resets within the buckets' idle expiry (the
   * longest refill, from minus one capacity to full, is two minutes; the expiry adds a minute,
   * which covers the script's rounding), each remaining count -1 (unlimited) or within its limit.
   * Redis answering anything else is not believed: the decision is made locally.
   */
  private static Decision parse(ApiKey key, String what, Response r) {
    if (r == null || r.type() != ResponseType.MULTI || r.size() != 6) {
      return null;
    }
    long[] v = new long[6];
    for (int i = 0; i < 6; i++) {
      Response e = r.get(i);
      if (e == null || e.type() != ResponseType.NUMBER) {
        return null;
      }
      try {
        v[i] = e.toLong();
      } catch (RuntimeException notALong) {
        return null;
      }
    }
    if ((v[0] != 0 && v[0] != 1)
        || !withinRefill(v[1])
        || !remainingWithin(v[2], key.rpm())
        || !withinRefill(v[3])
        || !remainingWithin(v[4], key.tpm())
        || !withinRefill(v[5])) {
      return null;
    }
    return decision(key, what, v);
  }

  private static boolean withinRefill(long micros) {
    return micros >= -1 && micros <= IDLE_EXPIRY.toNanos() / 1000;
  }

  private static boolean remainingWithin(long remaining, long limit) {
    return remaining >= -1 && remaining <= Math.max(0, limit);
  }

  private static Decision decision(ApiKey key, String what, long[] v) {
    boolean allowed = v[0] == 1;
    long waitMicros = Math.max(0, v[1]);
    RateLimitHeaders headers =
        new RateLimitHeaders(window(key.rpm(), v[2], v[3]), window(key.tpm(), v[4], v[5]));
    Decision.Refusal refusal =
        allowed
            ? Decision.Refusal.NONE
            : what.equals("r") ? Decision.Refusal.REQUESTS : Decision.Refusal.TOKENS;
    return new Decision(
        allowed,
        refusal,
        Duration.ofNanos(allowed ? 0 : TimeUnit.MICROSECONDS.toNanos(waitMicros)),
        headers,
        Decision.SOURCE_SHARED);
  }

  private static RateLimitHeaders.Window window(long limit, long remaining, long resetMicros) {
    if (limit <= 0 || remaining < 0) {
      return RateLimitHeaders.Window.UNLIMITED;
    }
    return new RateLimitHeaders.Window(
        limit,
        remaining,
        Duration.ofNanos(TimeUnit.MICROSECONDS.toNanos(Math.max(0, resetMicros))));
  }

  /** {@code key} with this replica's share of its limits: the limit ÷ replicas_hint, rounded up. */
  private ApiKey share(ApiKey key) {
    int n = config.replicasHint();
    if (n == 1) {
      return key;
    }
    return new ApiKey(
        key.name(),
        key.sha256(),
        (key.rpm() + n - 1) / n,
        (key.tpm() + n - 1) / n,
        key.priority(),
        key.allowPriorityHeader(),
        key.admin(),
        key.tenantMetrics(),
        key.sloOverride());
  }

  private static Decision withSource(Decision d, String source) {
    return new Decision(d.allowed(), d.refusal(), d.retryAfter(), d.headers(), source);
  }

  private void answered(Operation op, long start) {
    answered(op, start, true);
  }

  private void answered(Operation op, long start, boolean timed) {
    if (timed) {
      record(op, 0, start);
    }
    // Back up only once decisions are asked of Redis again: an answer that comes in time while
    // the replica still decides alone (another request just timed out) changes nothing yet.
    if (clock.nanoTime() >= askAgainAt && up.compareAndSet(false, true)) {
      LOG.info("shared limits: Redis ({}) answers again; limits are shared again", where);
    }
  }

  /** A round trip that failed ({@code result} 1: timeout, 2: error): local for the next second. */
  private void failed(Operation op, long start, int result, String why) {
    if (op != null) {
      record(op, result, start);
    }
    askAgainAt = clock.nanoTime() + RETRY_AFTER_FAILURE.toNanos();
    if (up.compareAndSet(true, false)) {
      LOG.warn(
          "shared limits: Redis ({}) {}; deciding with {} until it answers again",
          where,
          // An error's text is Redis's (or whoever answers there): a line of it is enough.
          why == null || why.length() <= 200 ? why : why.substring(0, 200) + "...",
          config.failClosed()
              ? "refusals (fail_closed)"
              : "this replica's own buckets (the limits ÷ " + config.replicasHint() + ")");
    }
  }

  private void record(Operation op, int result, long start) {
    Timer[] t = timers.get(op);
    if (t != null) {
      t[result].record(clock.nanoTime() - start, TimeUnit.NANOSECONDS);
    }
  }

  /** Whether Redis answered the last round trip. */
  public boolean up() {
    return up.get();
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    String[] results = {"ok", "timeout", "error"};
    for (Operation op : Operation.values()) {
      Timer[] t = new Timer[results.length];
      for (int i = 0; i < results.length; i++) {
        t[i] =
            Timer.builder("llm.shared_limits.duration")
                .description("Round trips to the shared limits' Redis, by what they were for")
                .tags("operation", op.label, "result", results[i])
                .serviceLevelObjectives(
                    Duration.ofNanos(100_000),
                    Duration.ofNanos(250_000),
                    Duration.ofNanos(500_000),
                    Duration.ofMillis(1),
                    Duration.ofNanos(2_500_000),
                    Duration.ofMillis(5),
                    Duration.ofMillis(10),
                    Duration.ofMillis(25),
                    Duration.ofMillis(50),
                    Duration.ofMillis(100),
                    Duration.ofMillis(250))
                .register(registry);
      }
      timers.put(op, t);
    }
    fallbackTimeout = fallbacks(registry, "timeout");
    fallbackError = fallbacks(registry, "error");
    fallbackUnavailable = fallbacks(registry, "unavailable");
    fallbackBadReply = fallbacks(registry, "bad_reply");
    Gauge.builder("llm.shared_limits.up", up, u -> u.get() ? 1 : 0)
        .description("1 when the shared limits' Redis answered the last round trip, else 0")
        .register(registry);
  }

  private static Counter fallbacks(MeterRegistry registry, String reason) {
    return Counter.builder("llm.shared_limits.fallbacks")
        .description(
            "Decisions made without the shared limits' Redis (timeout: it did not answer in"
                + " time; error: it failed; bad_reply: its reply was refused, too large or not"
                + " the script's six integers; unavailable: within a second of any of these)")
        .tag("reason", reason)
        .register(registry);
  }

  @Override
  public void close() {
    redis.close();
  }

  private static String script() {
    try (InputStream in = SharedLimiter.class.getResourceAsStream("shared-buckets.lua")) {
      if (in == null) {
        throw new IllegalStateException("shared-buckets.lua is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String sha1Hex(String s) {
    try {
      return HexFormat.of()
          .formatHex(MessageDigest.getInstance("SHA-1").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
