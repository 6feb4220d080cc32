package io.phasemeter.proxy.upstream;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.PoolOptions;
import io.vertx.ext.web.client.HttpResponse;
import io.vertx.ext.web.client.WebClient;
import io.vertx.ext.web.client.WebClientOptions;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads each upstream's {@code /metrics} every {@code scrape_interval} for {@code routing:
 * engine_load} and keeps the last reading per upstream, for {@link #score} to read without waiting:
 * a choice never waits on a scrape. At most one scrape per upstream is in flight; one that has not
 * finished within {@code scrape_timeout} counts as {@code timeout} and leaves that upstream without
 * a reading (scored as {@code least_loaded} would) until a later one succeeds. A body past {@link
 * #MAX_BODY_BYTES} is {@code too_large}; anything else that is not a 200 with vLLM's gauges is
 * {@code failed}. The pool's provider key is never sent: vLLM's {@code --api-key} guards {@code
 * /v1} only, and a metrics endpoint needs no secret of a tenant's.
 */
final class EngineScraper {
  private static final Logger LOG = LoggerFactory.getLogger(EngineScraper.class);

  /** The largest {@code /metrics} body read (vLLM's is tens of kilobytes); more is too_large. */
  static final int MAX_BODY_BYTES = 1 << 20;

  /** How a scrape ended: the {@code result} label of {@code llm_upstream_scrapes_total}. */
  enum Result {
    OK,
    FAILED,
    TIMEOUT,
    TOO_LARGE;

    final String word = name().toLowerCase(Locale.ROOT);
  }

  /**
   * An upstream's last reading: what its engine said, when it was read ({@code atNanos}) and how
   * many of this proxy's requests were in flight to it then ({@code inFlightThen}).
   */
  record Sample(EngineMetricsText.Reading reading, long atNanos, int inFlightThen) {
    Sample {
      java.util.Objects.requireNonNull(reading, "reading");
    }
  }

  /**
   * One upstream's scrape state. {@code attempt} is confined to the scraper's context (the periodic
   * timer's, on which its deadlines and the client's callbacks run too); {@code last} is read by
   * every event loop.
   */
  private static final class Target {
    final UpstreamHost host;
    final AtomicBoolean inFlight = new AtomicBoolean();
    // The attempt the deadline and the response race for; the first to end it counts it.
    long attempt;
    volatile Sample last;

    Target(UpstreamHost host) {
      this.host = host;
    }
  }

  private final Vertx vertx;
  private final ProxyConfig.Pool config;
  private final NanoClock clock;
  private final Target[] targets;
  private final WebClient client;
  private final long timeoutMs;
  private final long staleNanos;
  private final LongAdder[] results = new LongAdder[Result.values().length];
  private long timer = -1;
  private volatile boolean closed;

  EngineScraper(
      Vertx vertx,
      ProxyConfig.Pool config,
      List<UpstreamHost> hosts,
      NanoClock clock,
      io.phasemeter.proxy.tls.UpstreamTls tls) {
    this.vertx = vertx;
    this.config = config;
    this.clock = clock;
    this.targets = new Target[hosts.size()];
    for (int i = 0; i < targets.length; i++) {
      targets[i] = new Target(hosts.get(i));
    }
    for (int i = 0; i < results.length; i++) {
      results[i] = new LongAdder();
    }
    this.timeoutMs = Math.max(1, config.scrapeTimeout().toMillis());
    this.staleNanos = config.scrapeInterval().toNanos() * ProxyConfig.Pool.STALE_AFTER_INTERVALS;
    // One kept-alive connection per upstream (scrapes never overlap on one); its own client, so a
    // hanging metrics endpoint never holds a connection that requests could use.
    this.client =
        WebClient.create(
            vertx,
            tls.applyTo(new WebClientOptions())
                .setKeepAlive(true)
                .setTcpNoDelay(true)
                .setConnectTimeout((int) Math.min(Integer.MAX_VALUE, timeoutMs))
                .setForceSni(true)
                .setUserAgent("phasemeter-proxy"),
            new PoolOptions().setHttp1MaxSize(1));
  }

  /** Scrapes every upstream now, then every {@code scrape_interval}. */
  void start() {
    if (timer >= 0 || closed) {
      return;
    }
    long every = Math.max(1, config.scrapeInterval().toMillis());
    timer = vertx.setPeriodic(1, every, id -> scrapeAll());
  }

  private void scrapeAll() {
    for (Target t : targets) {
      if (closed) {
        return;
      }
      if (t.inFlight.compareAndSet(false, true)) {
        scrape(t);
      }
    }
  }

  private void scrape(Target t) {
    long attempt = ++t.attempt;
    ProxyConfig.Upstream u = t.host.address();
    long deadline =
        vertx.setTimer(
            timeoutMs,
            id -> {
              // Ended here, not when the client gives up: an endpoint that trickles bytes keeps
              // the client's idle timeout away. The request keeps its one connection until it
              // ends, so a hanging endpoint never gets a second.
              if (t.attempt == attempt) {
                t.attempt++;
                ended(t, Result.TIMEOUT, null);
              }
            });
    Future<HttpResponse<Buffer>> sent;
    try {
      sent =
          client
              .get(u.port(), u.host(), u.basePath() + "/metrics")
              .ssl(u.tls())
              .timeout(timeoutMs)
              .putHeader("accept", "text/plain;version=0.0.4")
              .as(BoundedBody.codec(MAX_BODY_BYTES))
              .send();
    } catch (IllegalStateException e) {
      sent = Future.failedFuture(e); // the client closed under a tick already queued
    }
    sent.onComplete(
        ar -> {
          vertx.cancelTimer(deadline);
          boolean mine = t.attempt == attempt;
          if (mine) {
            t.attempt++;
          }
          t.inFlight.set(false);
          if (!mine || closed) {
            return;
          }
          if (ar.failed()) {
            Throwable cause = ar.cause();
            ended(
                t,
                cause instanceof BoundedBody.TooLarge
                    ? Result.TOO_LARGE
                    : cause instanceof TimeoutException
                            || cause instanceof io.netty.channel.ConnectTimeoutException
                        ? Result.TIMEOUT
                        : Result.FAILED,
                null);
            return;
          }
          HttpResponse<Buffer> resp = ar.result();
          if (resp.statusCode() != 200 || resp.body() == null) {
            ended(t, Result.FAILED, null);
            return;
          }
          try {
            ended(t, Result.OK, EngineMetricsText.parse(resp.body().getBytes()));
          } catch (IllegalArgumentException e) {
            ended(t, Result.FAILED, null);
          }
        });
  }

  private void ended(Target t, Result result, EngineMetricsText.Reading reading) {
    results[result.ordinal()].increment();
    Sample before = t.last;
    t.last = reading == null ? null : new Sample(reading, clock.nanoTime(), t.host.inFlight());
    if (before != null && reading == null) {
      // Once per run of failures, not per scrape: four lines a second would bury the log.
      LOG.warn(
          "pool {}: scraping {}/metrics: {}; routing it as least_loaded until a scrape succeeds",
          config.name(),
          t.host,
          result.word);
    }
  }

  /** The upstream's reading if one is fresh at {@code now}, else null. */
  Sample fresh(int index, long now) {
    Sample s = targets[index].last;
    return s != null && now - s.atNanos() <= staleNanos ? s : null;
  }

  /**
   * The score of {@code host} (lower wins): from its fresh reading {@code s} ({@link #fresh}),
   * {@link #engineScore}; without one (null), {@link #fallbackScore}, from this proxy's own
   * requests to it.
   */
  static double score(Sample s, UpstreamHost host, int slots) {
    int inFlight = host.inFlight();
    return s == null
        ? fallbackScore(inFlight, slots)
        : engineScore(s.reading(), inFlight - s.inFlightThen(), slots);
  }

  /**
   * {@code 2 × waiting + max(0, running + Δ) ÷ slots + kv_cache_usage}, lower wins. A request
   * waiting in the engine weighs more than a full batch and a full cache together at ordinary
   * loads, so the engine with fewer waiting wins first; then the fuller batch (relative to the
   * upstream's slots) and the fuller cache lose. {@code Δ} is the change in this proxy's own
   * requests in flight to it since the reading: sent since (the engine could not show them yet) or
   * ended since, so requests do not all follow one stale reading.
   */
  static double engineScore(EngineMetricsText.Reading r, int delta, int slots) {
    double kv = Double.isNaN(r.kvCacheUsage()) ? 0 : r.kvCacheUsage();
    return 2 * r.waiting() + Math.max(0, r.running() + delta) / Math.max(1, slots) + kv;
  }

  /**
   * The {@link #engineScore} of an engine that had only this proxy's requests: {@code 2 × max(0, in
   * flight − slots) + min(in flight, slots) ÷ slots} (the cache unknown, counted as 0). On the same
   * scale as a reading's score, so this proxy's requests past an unseen engine's slots weigh as
   * requests waiting do: an engine whose {@code /metrics} fails or is too slow (as an overloaded
   * one's may be) is not sent more than its slots while the others show a smaller queue. Within
   * their slots it orders upstreams as {@code least_loaded} does.
   */
  static double fallbackScore(int inFlight, int slots) {
    int s = Math.max(1, slots);
    return 2.0 * Math.max(0, inFlight - s) + (double) Math.min(inFlight, s) / s;
  }

  /** Scrapes that ended with {@code result}, since start. */
  long count(Result result) {
    return results[result.ordinal()].sum();
  }

  /** Registers {@code llm_upstream_scrapes_total{llm_pool, result}}. */
  void bindTo(MeterRegistry registry, Tags pool) {
    for (Result r : Result.values()) {
      FunctionCounter.builder("llm.upstream.scrapes", this, x -> x.count(r))
          .tags(pool.and("result", r.word))
          .description(
              "Scrapes of the upstreams' /metrics for routing: engine_load, by how they ended"
                  + " (ok, failed, timeout, too_large)")
          .register(registry);
    }
  }

  /**
   * Registers the engine's own gauges per upstream, NaN while it has no fresh reading: {@code
   * llm_upstream_engine_waiting}, {@code llm_upstream_engine_running} and {@code
   * llm_upstream_engine_kv_cache_usage}, labelled by the pool and the {@code upstream}.
   */
  void bindUpstreamsTo(MeterRegistry registry, Tags pool) {
    for (int i = 0; i < targets.length; i++) {
      int index = i;
      Tags tags = pool.and("upstream", targets[i].host.address().authority());
      gauge(registry, "llm.upstream.engine.waiting", tags, index, r -> r.waiting());
      gauge(registry, "llm.upstream.engine.running", tags, index, r -> r.running());
      gauge(registry, "llm.upstream.engine.kv_cache_usage", tags, index, r -> r.kvCacheUsage());
    }
  }

  private static final java.util.Map<String, String> DESCRIPTIONS =
      java.util.Map.of(
          "llm.upstream.engine.waiting",
          "Requests waiting in the upstream engine (vllm:num_requests_waiting), last fresh scrape",
          "llm.upstream.engine.running",
          "Requests running in the upstream engine (vllm:num_requests_running), last fresh scrape",
          "llm.upstream.engine.kv_cache_usage",
          "KV-cache use of the upstream engine, 0..1 (vllm:kv_cache_usage_perc), last fresh"
              + " scrape");

  private void gauge(
      MeterRegistry registry,
      String name,
      Tags tags,
      int index,
      java.util.function.ToDoubleFunction<EngineMetricsText.Reading> value) {
    Gauge.builder(
            name,
            this,
            x -> {
              Sample s = x.fresh(index, x.clock.nanoTime());
              return s == null ? Double.NaN : value.applyAsDouble(s.reading());
            })
        .tags(tags)
        .strongReference(true)
        .description(DESCRIPTIONS.get(name))
        .register(registry);
  }

  /** Stops scraping; a scrape in flight ends with the client. */
  Future<Void> close() {
    closed = true;
    if (timer >= 0) {
      vertx.cancelTimer(timer);
    }
    client.close();
    return Future.succeededFuture();
  }
}
