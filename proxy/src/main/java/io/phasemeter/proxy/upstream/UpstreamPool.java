package io.phasemeter.proxy.upstream;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The upstreams of one pool, their HTTP client, and the choice among them: the available upstream
 * (healthy, not ejected) with the fewest requests in flight, ties broken in turn. Active health
 * checks run on a timer; connection failures eject an upstream for a backoff. Connections are kept
 * alive and pooled ({@code pools[].connections}): by default slots + 8 per upstream for requests
 * that hold a slot, so a full pool never waits on the client, and a bounded number with a bounded
 * wait queue for those that hold none.
 */
public final class UpstreamPool implements MeterBinder {
  private static final Logger LOG = LoggerFactory.getLogger(UpstreamPool.class);

  private final ProxyConfig.Pool config;
  private final NanoClock clock;
  private final Vertx vertx;
  private final List<UpstreamHost> hosts = new ArrayList<>();
  private final HttpClientAgent client;
  // Requests that hold no slot (pass-throughs such as /tokenize or any path the route table does
  // not know) get connections of their own, so that however many of them wait, the slots' requests
  // always find a connection.
  private final HttpClientAgent unslottedClient;
  private final HttpClientAgent healthClient;
  private final String apiKey;
  private final AtomicInteger next = new AtomicInteger();
  private final AtomicLong ejections = new AtomicLong();
  private final AtomicLong retries = new AtomicLong();
  private final AtomicLong staleRetries = new AtomicLong();
  // Pooled connections that have carried a request, so a second request on one is known to reuse
  // it. Held weakly: a connection the client's pool has let go of leaves the set with it.
  private final java.util.Set<io.vertx.core.http.HttpConnection> used =
      java.util.Collections.newSetFromMap(
          com.github.benmanes.caffeine.cache.Caffeine.newBuilder()
              .weakKeys()
              .<io.vertx.core.http.HttpConnection, Boolean>build()
              .asMap());
  private long healthTimer = -1;
  private volatile boolean closed;

  /**
   * Creates the pool's client; {@code apiKey} is the provider credential sent upstream as a bearer
   * token (null: none).
   */
  public UpstreamPool(Vertx vertx, ProxyConfig.Pool config, NanoClock clock, String apiKey) {
    this.vertx = vertx;
    this.config = config;
    this.clock = clock;
    this.apiKey = apiKey;
    for (ProxyConfig.Upstream u : config.upstreamAddresses()) {
      hosts.add(new UpstreamHost(u, config.ejection()));
    }
    HttpClientOptions options =
        new HttpClientOptions()
            .setKeepAlive(true)
            .setTcpNoDelay(true)
            .setConnectTimeout(
                (int) Math.min(Integer.MAX_VALUE, config.timeouts().connect().toMillis()))
            .setDecompressionSupported(false)
            // Hosted providers behind a shared address need the server name (SNI) to pick a cert.
            .setForceSni(true)
            .setMaxInitialLineLength(8192)
            .setMaxHeaderSize(32768);
    ProxyConfig.Connections connections = config.connections();
    options.setKeepAliveTimeout(
        (int) Math.min(Integer.MAX_VALUE, connections.keepAlive().toSeconds()));
    // Slotted requests are at most `slots` at once, so their wait for a connection is bounded by
    // the slots; unslotted ones are bounded by wait_queue (past it: upstream_busy, at once).
    this.client =
        vertx
            .httpClientBuilder()
            .with(options)
            .with(new PoolOptions().setHttp1MaxSize(config.slottedConnections()))
            .withConnectHandler(slottedConnections::opened)
            .build();
    this.unslottedClient =
        vertx
            .httpClientBuilder()
            .with(new HttpClientOptions(options))
            .with(
                new PoolOptions()
                    .setHttp1MaxSize(connections.unslotted())
                    .setMaxWaitQueueSize(connections.waitQueue()))
            .withConnectHandler(unslottedConnections::opened)
            .build();
    this.healthClient =
        vertx.createHttpClient(
            new HttpClientOptions(options).setKeepAlive(true),
            new PoolOptions().setHttp1MaxSize(2));
  }

  /** Starts the active health checks (if the pool has them), every {@code health.interval}. */
  public void startHealthChecks() {
    if (!config.activeHealthChecks() || healthTimer >= 0) {
      return;
    }
    healthTimer = vertx.setPeriodic(config.health().interval().toMillis(), id -> checkAll());
  }

  private void checkAll() {
    if (closed) {
      return;
    }
    for (UpstreamHost h : hosts) {
      check(h)
          .onComplete(
              ar -> {
                if (closed) {
                  return;
                }
                boolean ok = ar.succeeded() && ar.result() == null;
                if (h.checked(ok, config.health().failures())) {
                  LOG.warn(
                      "pool {}: upstream {} is now {} (active health check {}{})",
                      config.name(),
                      h,
                      ok ? "up" : "down",
                      config.health().path(),
                      ok ? "" : ": " + (ar.failed() ? ar.cause().toString() : ar.result()));
                }
              });
    }
  }

  /** One health check: completes with null for a 2xx within the timeout, else what was wrong. */
  Future<String> check(UpstreamHost h) {
    try {
      return doCheck(h);
    } catch (IllegalStateException e) {
      return Future.failedFuture(e); // The client closed under a tick that was already queued.
    }
  }

  private Future<String> doCheck(UpstreamHost h) {
    ProxyConfig.Upstream u = h.address();
    RequestOptions options =
        new RequestOptions()
            .setMethod(HttpMethod.GET)
            .setHost(u.host())
            .setPort(u.port())
            .setSsl(u.tls())
            .setURI(u.basePath() + config.health().path())
            .setConnectTimeout(config.health().timeout().toMillis())
            .setIdleTimeout(config.health().timeout().toMillis());
    return healthClient
        .request(options)
        .compose(HttpClientRequest::send)
        .compose(
            resp ->
                resp.body()
                    .map(b -> resp.statusCode() / 100 == 2 ? null : "status " + resp.statusCode()));
  }

  /**
   * Picks the available upstream with the fewest requests in flight, skipping {@code tried};
   * returns null when none is available.
   */
  public UpstreamHost choose(Collection<UpstreamHost> tried) {
    long now = clock.nanoTime();
    int n = hosts.size();
    int start = Math.floorMod(next.getAndIncrement(), n);
    UpstreamHost best = null;
    int bestLoad = Integer.MAX_VALUE;
    for (int i = 0; i < n; i++) {
      UpstreamHost h = hosts.get((start + i) % n);
      if (tried.contains(h) || !h.available(now)) {
        continue;
      }
      int load = h.inFlight();
      if (load < bestLoad) {
        best = h;
        bestLoad = load;
      }
    }
    return best;
  }

  /**
   * Opens a POST to {@code path} on {@code host} (connecting if needed) and counts it in flight.
   *
   * <p>{@code timeouts.connect} bounds the TCP connect only (the client's option: Netty fails it
   * with a {@code ConnectTimeoutException}, which counts towards ejection). The wait for a pooled
   * connection has no bound of its own: a request's {@code first_token} timer covers it. Vert.x's
   * per-request connect timeout would also time that wait, and a proxy whose event loop is starved
   * of CPU then reported an upstream that answers as failing, and ejected it.
   */
  public Future<HttpClientRequest> open(UpstreamHost host, String path) {
    return open(host, HttpMethod.POST, path);
  }

  /** As {@link #open(UpstreamHost, String)}, for a request of {@code method}. */
  public Future<HttpClientRequest> open(UpstreamHost host, HttpMethod method, String path) {
    return open(host, method, path, true);
  }

  /**
   * As {@link #open(UpstreamHost, String)}, for a request of {@code method}; {@code slotted}: the
   * request holds one of the pool's slots (else it goes out on the connections kept apart for
   * requests that hold none, {@code connections.unslotted} per upstream, with at most {@code
   * connections.wait_queue} waiting for one).
   */
  public Future<HttpClientRequest> open(
      UpstreamHost host, HttpMethod method, String path, boolean slotted) {
    RequestOptions options = options(host.address(), method, path);
    Connections c = slotted ? slottedConnections : unslottedConnections;
    host.started(); // ended() follows whatever happens, failure included (GeneratePhase)
    Future<HttpClientRequest> request;
    try {
      request = (slotted ? client : unslottedClient).request(options);
    } catch (IllegalStateException e) {
      // The client closed (the proxy is stopping) under a request already on its way.
      return Future.failedFuture(e);
    }
    c.waiting.incrementAndGet();
    return request.andThen(ar -> c.waiting.decrementAndGet());
  }

  /**
   * One client's connections (the slotted or the unslotted one), counted for {@code
   * llm_upstream_connections*}: open now, opened since start, requests waiting for one now.
   */
  private static final class Connections {
    final String kind;
    final AtomicInteger open = new AtomicInteger();
    final AtomicLong opened = new AtomicLong();
    final AtomicInteger waiting = new AtomicInteger();

    Connections(String kind) {
      this.kind = kind;
    }

    void opened(io.vertx.core.http.HttpConnection connection) {
      open.incrementAndGet();
      opened.incrementAndGet();
      connection.closeHandler(v -> open.decrementAndGet());
    }
  }

  private final Connections slottedConnections = new Connections("slotted");
  private final Connections unslottedConnections = new Connections("unslotted");

  private static RequestOptions options(
      ProxyConfig.Upstream upstream, HttpMethod method, String path) {
    return new RequestOptions()
        .setMethod(method)
        .setHost(upstream.host())
        .setPort(upstream.port())
        .setSsl(upstream.tls())
        .setURI(upstream.basePath() + path);
  }

  /**
   * Opens a POST on a connection of its own, never a pooled one, and asks the upstream to close it
   * after the response: for the one retry of a request whose pooled connection the upstream had
   * closed (see {@link #reused}).
   */
  public Future<HttpClientRequest> openFresh(UpstreamHost host, String path) {
    return openFresh(host, HttpMethod.POST, path);
  }

  /** As {@link #openFresh(UpstreamHost, String)}, for a request of {@code method}. */
  public Future<HttpClientRequest> openFresh(UpstreamHost host, HttpMethod method, String path) {
    ProxyConfig.Upstream upstream = host.address();
    RequestOptions options = options(upstream, method, path).putHeader("connection", "close");
    host.started();
    return client
        .connect(
            new io.vertx.core.http.HttpConnectOptions()
                .setHost(upstream.host())
                .setPort(upstream.port())
                .setSsl(upstream.tls()))
        .compose(c -> c.request(options));
  }

  /**
   * Whether {@code request} goes out on a pooled connection that already carried a request. Some
   * engines (llama.cpp's server, after a stream) close a kept-alive connection without saying so; a
   * request sent on it before the close is seen fails with nothing received.
   */
  public boolean reused(HttpClientRequest request) {
    io.vertx.core.http.HttpConnection c = request.connection();
    if (c == null) {
      return false;
    }
    return !used.add(c);
  }

  /** Counts a retry on a fresh connection after a reused one turned out closed. */
  public void staleRetried() {
    staleRetries.incrementAndGet();
  }

  /** Retries on a fresh connection of the same upstream since start. */
  public long staleRetries() {
    return staleRetries.get();
  }

  /** Ends what {@link #open} started, whatever happened. */
  public void ended(UpstreamHost host) {
    host.ended();
  }

  /** The upstream answered (headers arrived). */
  public void reachable(UpstreamHost host) {
    host.reachable();
  }

  /** Connecting to the upstream failed; may eject it. */
  public void connectFailed(UpstreamHost host) {
    if (host.connectFailed(clock.nanoTime())) {
      ejections.incrementAndGet();
      LOG.warn(
          "pool {}: upstream {} ejected after {} connection failures in a row",
          config.name(),
          host,
          config.ejection().after());
    }
  }

  /** Counts a retry on another upstream. */
  public void retried() {
    retries.incrementAndGet();
  }

  /** The provider credential for the upstream's {@code Authorization}, or null. */
  public String apiKey() {
    return apiKey;
  }

  /** The pool's upstreams, in configured order. */
  public List<UpstreamHost> hosts() {
    return List.copyOf(hosts);
  }

  /** Upstreams available now. */
  public int availableCount() {
    long now = clock.nanoTime();
    int c = 0;
    for (UpstreamHost h : hosts) {
      if (h.available(now)) {
        c++;
      }
    }
    return c;
  }

  /** Whether {@code host} may take a request now. */
  public boolean isAvailable(UpstreamHost host) {
    return host.available(clock.nanoTime());
  }

  /** Ejections since start. */
  public long ejections() {
    return ejections.get();
  }

  /** Retries on another upstream since start. */
  public long retries() {
    return retries.get();
  }

  public ProxyConfig.Pool config() {
    return config;
  }

  /**
   * Registers the pool's upstream health, labelled by the pool: {@code llm_upstreams_available},
   * {@code llm_upstreams_configured}, {@code llm_upstream_ejections_total}, {@code
   * llm_upstream_retries_total} and {@code llm_upstream_stale_retries_total}.
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    Tags pool = Tags.of("llm.pool", config.name());
    Gauge.builder("llm.upstreams.available", this, UpstreamPool::availableCount)
        .tags(pool)
        .strongReference(true)
        .description("Upstreams healthy and not ejected")
        .register(registry);
    Gauge.builder("llm.upstreams.configured", this, x -> x.hosts().size())
        .tags(pool)
        .strongReference(true)
        .description("Configured upstreams")
        .register(registry);
    FunctionCounter.builder("llm.upstream.ejections", this, UpstreamPool::ejections)
        .tags(pool)
        .description("Upstreams ejected after connection failures in a row")
        .register(registry);
    FunctionCounter.builder("llm.upstream.retries", this, UpstreamPool::retries)
        .tags(pool)
        .description("Requests retried on another upstream before any byte reached the client")
        .register(registry);
    ProxyConfig.Connections limits = config.connections();
    for (Connections c : List.of(slottedConnections, unslottedConnections)) {
      Tags tags = pool.and("kind", c.kind);
      int max = c == slottedConnections ? config.slottedConnections() : limits.unslotted();
      Gauge.builder("llm.upstream.connections", c, x -> x.open.get())
          .tags(tags)
          .strongReference(true)
          .description("Pooled connections open to the pool's upstreams")
          .register(registry);
      Gauge.builder("llm.upstream.connections.max", () -> max)
          .tags(tags)
          .strongReference(true)
          .description("Pooled connections allowed per upstream (connections.max / unslotted)")
          .register(registry);
      FunctionCounter.builder("llm.upstream.connections.opened", c, x -> x.opened.get())
          .tags(tags)
          .description("Connections opened to the pool's upstreams since start")
          .register(registry);
      Gauge.builder("llm.upstream.connections.waiting", c, x -> x.waiting.get())
          .tags(tags)
          .strongReference(true)
          .description("Requests waiting for a pooled connection (or for it to connect)")
          .register(registry);
    }
    Gauge.builder("llm.upstream.connections.wait_queue.max", () -> limits.waitQueue())
        .tags(pool)
        .strongReference(true)
        .description(
            "Requests that may wait for an unslotted connection per upstream"
                + " (connections.wait_queue); more get 503 upstream_busy")
        .register(registry);
    Gauge.builder("llm.upstream.connections.keep_alive", () -> limits.keepAlive().toSeconds())
        .tags(pool)
        .strongReference(true)
        .baseUnit("seconds")
        .description("How long an idle pooled connection is kept (connections.keep_alive)")
        .register(registry);
    FunctionCounter.builder("llm.upstream.stale.retries", this, UpstreamPool::staleRetries)
        .tags(pool)
        .description(
            "Requests sent again on a fresh connection after the upstream had closed the pooled"
                + " one they went out on, before answering")
        .register(registry);
  }

  /**
   * Registers one series per configured upstream ({@code telemetry.per_upstream_metrics}, off by
   * default): {@code llm_upstream_available} and {@code llm_upstream_in_flight}, labelled by the
   * pool and the {@code upstream}.
   */
  public void bindUpstreamsTo(MeterRegistry registry) {
    Tags pool = Tags.of("llm.pool", config.name());
    for (UpstreamHost h : hosts) {
      Tags tags = pool.and("upstream", h.address().authority());
      Gauge.builder("llm.upstream.available", h, x -> isAvailable(x) ? 1 : 0)
          .tags(tags)
          .strongReference(true)
          .description("1 when the upstream is healthy and not ejected")
          .register(registry);
      Gauge.builder("llm.upstream.in_flight", h, UpstreamHost::inFlight)
          .tags(tags)
          .strongReference(true)
          .description("Requests running on the upstream")
          .register(registry);
    }
  }

  public Future<Void> close() {
    closed = true;
    if (healthTimer >= 0) {
      vertx.cancelTimer(healthTimer);
    }
    return Future.join(client.close(), unslottedClient.close(), healthClient.close()).mapEmpty();
  }
}
