package io.phasemeter.proxy.upstream;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.NanoClock;
import io.phasemeter.core.net.TlsVersions;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.tls.TlsFailures;
import io.phasemeter.proxy.tls.UpstreamTls;
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
 * The upstreams of one pool, their HTTP client, and the choice among them ({@code
 * pools[].routing}): among the available upstreams (healthy, not ejected), the one with the fewest
 * requests in flight for its slots ({@code least_loaded}) or the lowest score from the engines' own
 * {@code /metrics} ({@code engine_load}, {@link EngineScraper}), ties broken in turn. Active health
 * checks run on a timer; connection failures eject an upstream for a backoff. The pool's capacity
 * is the slots of its available upstreams: every change (an ejection, its backoff running out, a
 * health verdict, an answer that lifts an ejection) is told at once to the listener of {@link
 * #onCapacityChange}, the pool's slot queue. Connections are kept alive and pooled ({@code
 * pools[].connections}): by default slots + 8 per upstream for requests that hold a slot, so a full
 * pool never waits on the client, and a bounded number with a bounded wait queue for those that
 * hold none.
 *
 * <p>Some upstreams close a connection after each response (llama.cpp's server after a stream,
 * without saying so). With {@code connections.reuse: auto} the pool watches what follows its
 * responses and, once an upstream is seen doing so, sends its slotted requests on connections of
 * their own, with spare connections opened ahead of demand ({@link SpareConnections}) so that a
 * request does not connect on its way; {@code reuse: off} does so from the start, every request
 * carrying {@code Connection: close}.
 */
public final class UpstreamPool implements MeterBinder {
  private static final Logger LOG = LoggerFactory.getLogger(UpstreamPool.class);

  private final ProxyConfig.Pool config;
  private final UpstreamTls tls;
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
  // Connections of their own (spares, single-use requests, stale retries): not pooled, so the
  // client has no connect handler of its own; they are counted as slotted ones (track()).
  private final HttpClientAgent freshClient;
  private final java.util.Map<UpstreamHost, SpareConnections> spares =
      new java.util.IdentityHashMap<>();
  private final AtomicLong sparesTaken = new AtomicLong();
  // How each request's attempt connected, until UpstreamAttempts takes it (connect()); weakly held,
  // so a request abandoned before that leaves nothing behind.
  private final java.util.Map<HttpClientRequest, Connect> connects = weakMap();
  // The last TLS failure logged per upstream (at most one entry each).
  private final java.util.Map<UpstreamHost, String> tlsFailures =
      new java.util.concurrent.ConcurrentHashMap<>();
  // llm_upstream_connect_seconds{tls="true"|"false"}; null until bound to a registry.
  private volatile io.micrometer.core.instrument.Timer connectTls;
  private volatile io.micrometer.core.instrument.Timer connectPlain;
  private final AtomicLong preconnected = new AtomicLong();

  // How soon after a response's end the upstream's close counts as closing after the response.
  /**
   * A close this soon after a response (or a reuse this soon that found it closed) is the
   * upstream's way.
   */
  static final long CLOSE_WINDOW_NANOS = 250_000_000L;

  private final long closeWindowNanos;
  // Pooled connections whose last response ended, with when, until they carry another request or
  // close; and those that went on to carry one, until it is answered. Held weakly, as used is.
  private final java.util.Map<io.vertx.core.http.HttpConnection, Responded> responded = weakMap();
  private final java.util.Map<io.vertx.core.http.HttpConnection, Responded> reusedAfter = weakMap();
  // Spares handed to a request: they waited idle, so the upstream may have closed one meanwhile.
  private final java.util.Set<io.vertx.core.http.HttpConnection> takenSpares =
      java.util.Collections.newSetFromMap(weakMap());
  private final java.util.Set<io.vertx.core.http.HttpConnection> ownConnections =
      java.util.Collections.newSetFromMap(weakMap());
  // Requests that were the first on their connection (reused()), held weakly.
  private final java.util.Set<HttpClientRequest> firstRequests =
      java.util.Collections.newSetFromMap(weakMap());

  // at: when the response ended; reusedAt: when the connection was given the next request (0: not
  // yet).
  private record Responded(UpstreamHost host, long at, long reusedAt) {}

  private static <K, V> java.util.Map<K, V> weakMap() {
    return com.github.benmanes.caffeine.cache.Caffeine.newBuilder()
        .weakKeys()
        .<K, V>build()
        .asMap();
  }

  // Pooled connections that have carried a request, so a second request on one is known to reuse
  // it. Held weakly: a connection the client's pool has let go of leaves the set with it.
  // The request each pooled connection was last given (reused()): a response whose connection has
  // since carried another request is not recorded as the last one on it.
  private final java.util.Map<
          io.vertx.core.http.HttpConnection, java.lang.ref.WeakReference<HttpClientRequest>>
      carrying = weakMap();
  private final java.util.Set<io.vertx.core.http.HttpConnection> used =
      java.util.Collections.newSetFromMap(
          com.github.benmanes.caffeine.cache.Caffeine.newBuilder()
              .weakKeys()
              .<io.vertx.core.http.HttpConnection, Boolean>build()
              .asMap());
  private long healthTimer = -1;
  private volatile boolean closed;
  private final PoolCapacity capacity;
  // routing: engine_load only (null: least_loaded).
  private final EngineScraper scraper;
  // Every (upstream, reason) answer made once: a choice allocates nothing.
  private final Choice[][] choices;
  private final java.util.concurrent.atomic.LongAdder[] decisions =
      new java.util.concurrent.atomic.LongAdder[RouteReason.all().length];

  /**
   * Creates the pool's client; {@code apiKey} is the provider credential sent upstream as a bearer
   * token (null: none).
   */
  public UpstreamPool(Vertx vertx, ProxyConfig.Pool config, NanoClock clock, String apiKey) {
    this(vertx, config, clock, apiKey, UpstreamTls.of(vertx, config, java.time.Instant.now()));
  }

  /**
   * Creates the pool's client, its {@code https://} upstreams reached with {@code tls} (read and
   * checked beforehand: {@link UpstreamTls#of}).
   */
  public UpstreamPool(
      Vertx vertx, ProxyConfig.Pool config, NanoClock clock, String apiKey, UpstreamTls tls) {
    this.vertx = vertx;
    this.tls = tls;
    this.config = config;
    this.clock = clock;
    this.apiKey = apiKey;
    List<ProxyConfig.Upstream> addresses = config.upstreamAddresses();
    List<Integer> slots = config.upstreamSlots();
    for (int i = 0; i < addresses.size(); i++) {
      hosts.add(
          new UpstreamHost(
              addresses.get(i), slots.get(i), config.ejection(), config.connections().reuse()));
    }
    this.capacity = new PoolCapacity(List.copyOf(hosts), clock, vertx);
    this.choices = new Choice[hosts.size()][];
    for (int i = 0; i < hosts.size(); i++) {
      choices[i] = new Choice[RouteReason.all().length];
      for (RouteReason r : RouteReason.all()) {
        choices[i][r.ordinal()] = new Choice(hosts.get(i), r);
      }
    }
    for (int i = 0; i < decisions.length; i++) {
      decisions[i] = new java.util.concurrent.atomic.LongAdder();
    }
    this.scraper =
        config.routing() == ProxyConfig.Routing.ENGINE_LOAD
            ? new EngineScraper(vertx, config, hosts, clock, tls)
            : null;
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
    // Every client below is a copy of these options: one TLS for all of the pool's connections.
    tls.applyTo(options);
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
    this.freshClient = vertx.httpClientBuilder().with(new HttpClientOptions(options)).build();
    long keepAlive = connections.keepAlive().toNanos();
    // An engine that closes after its responses does so at once (llama.cpp's server: FIN 0.03-0.08
    // ms after the last byte); a wider window would also count an engine that stops or restarts
    // with connections that carried a response a moment before (seen in the demo with a second).
    this.closeWindowNanos =
        keepAlive > 0 ? Math.min(CLOSE_WINDOW_NANOS, keepAlive / 2) : CLOSE_WINDOW_NANOS;
    for (UpstreamHost h : hosts) {
      spares.put(
          h,
          new SpareConnections(
              vertx,
              freshClient,
              h,
              clock,
              config,
              () -> config.slottedConnections() - h.inFlight() - spares.get(h).ready(),
              preconnected,
              this::track));
    }
  }

  /**
   * Starts the active health checks (if the pool has them), every {@code health.interval}, the
   * spare connections of upstreams whose connections carry one request each ({@code reuse: off}),
   * and with {@code routing: engine_load} the scrapes of the upstreams' {@code /metrics}.
   */
  public void startHealthChecks() {
    if (scraper != null) {
      scraper.start();
    }
    for (UpstreamHost h : hosts) {
      if (h.singleUse()) {
        spares.get(h).target(config.connections().spares());
      }
    }
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
                boolean wasAvailable = h.available(clock.nanoTime());
                boolean changed = h.checked(ok, config.health().failures());
                if (ok && !wasAvailable && h.available(clock.nanoTime())) {
                  // Up again after down or ejected (checked() marked it so): spares at once, not
                  // after the backoff their last failure started.
                  spares.get(h).upAgain();
                }
                capacity.changed();
                if (changed) {
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
   * Picks an available upstream, skipping {@code tried}, and says why; returns null when none is
   * available. {@code least_loaded}: the fewest requests in flight for its slots (in flight ÷
   * slots); {@code engine_load}: the lowest {@link EngineScraper#score} from the last scrapes
   * (never waiting for one). Ties go in turn. Every choice counts in {@code
   * llm_route_decisions_total}.
   */
  public Choice choose(Collection<UpstreamHost> tried) {
    long now = clock.nanoTime();
    int n = hosts.size();
    int start = Math.floorMod(next.getAndIncrement(), n);
    UpstreamHost best = null;
    int bestIndex = -1;
    int bestLoad = Integer.MAX_VALUE;
    double bestScore = Double.POSITIVE_INFINITY;
    // Whether the chosen upstream was scored from a fresh reading: asked once, with its score, so
    // the reason says what the score was made of even if a reading lands meanwhile.
    boolean bestFresh = false;
    int candidates = 0;
    for (int i = 0; i < n; i++) {
      int k = (start + i) % n;
      UpstreamHost h = hosts.get(k);
      if (tried.contains(h) || !h.available(now)) {
        continue;
      }
      candidates++;
      if (scraper != null) {
        EngineScraper.Sample reading = scraper.fresh(k, now);
        double score = EngineScraper.score(reading, h, h.slots());
        if (score < bestScore) {
          best = h;
          bestIndex = k;
          bestScore = score;
          bestFresh = reading != null;
        }
        continue;
      }
      int load = h.inFlight();
      // load / slots < bestLoad / best.slots, multiplied out: exact, and no division per request.
      if (best == null || (long) load * best.slots() < (long) bestLoad * h.slots()) {
        best = h;
        bestIndex = k;
        bestLoad = load;
      }
    }
    if (best == null) {
      return null;
    }
    RouteReason reason =
        candidates == 1
            ? RouteReason.ONLY_AVAILABLE
            : scraper == null
                ? RouteReason.LEAST_LOADED
                : bestFresh ? RouteReason.ENGINE_LOAD : RouteReason.ENGINE_LOAD_FALLBACK;
    decisions[reason.ordinal()].increment();
    return choices[bestIndex][reason.ordinal()];
  }

  /** Decisions since start with {@code reason}. */
  public long decisions(RouteReason reason) {
    return decisions[reason.ordinal()].sum();
  }

  /** The upstream a request goes to, and why it was chosen. */
  public record Choice(UpstreamHost host, RouteReason reason) {
    public Choice {
      java.util.Objects.requireNonNull(host, "host");
      java.util.Objects.requireNonNull(reason, "reason");
    }
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
    if (slotted && host.singleUse()) {
      return openOwn(host, method, path, true);
    }
    RequestOptions options = options(host.address(), method, path);
    if (config.connections().reuse() == ProxyConfig.Reuse.OFF) {
      // The pool closes a connection whose request said close once its response has ended.
      options.putHeader("connection", "close");
    }
    Connections c = slotted ? slottedConnections : unslottedConnections;
    host.started(); // ended() follows whatever happens, failure included (UpstreamAttempts)
    AtomicInteger hostWaiting = c.waiting(host);
    // Vert.x hands connections to the requests waiting for one in the order they asked: with none
    // ahead, a connect this ask started is this request's, and it waits for nothing else. Counted
    // in before the ask, in one step: of two event loops asking at once, only one is first.
    boolean first = hostWaiting.getAndIncrement() == 0;
    c.waiting.incrementAndGet();
    long closes = c.closed.get();
    long asked = clock.nanoTime();
    Future<HttpClientRequest> request;
    try {
      request = (slotted ? client : unslottedClient).request(options);
    } catch (IllegalStateException e) {
      // The client closed (the proxy is stopping) under a request already on its way.
      c.waiting.decrementAndGet();
      hostWaiting.decrementAndGet();
      return Future.failedFuture(e);
    }
    return request.andThen(
        ar -> {
          c.waiting.decrementAndGet();
          hostWaiting.decrementAndGet();
          if (ar.succeeded()) {
            io.vertx.core.http.HttpConnection conn = ar.result().connection();
            Long openedAt = conn == null ? null : c.unused.remove(conn);
            // Timed only when this request waited for that connect and nothing else: it asked
            // with no other request queued for the upstream, and no connection closed meanwhile
            // (a slot freed then may start a connect for a request that had been queued at the
            // pool's connections.max); the connection became ready after it asked (one ready
            // before was idle, not set up for it). From the ask to the connection being ready.
            if (openedAt != null && first && openedAt >= asked && c.closed.get() == closes) {
              connected(host, ar.result(), conn, openedAt - asked);
            }
          } else {
            tlsFailed(host, ar.cause());
          }
        });
  }

  /**
   * How a request's attempt connected: {@code nanos} the set-up of the new connection it waited
   * for, DNS, TCP connect and, for {@code https://}, the TLS handshake (from asking for it to its
   * being ready; never time spent queued behind other requests for a connection); {@code
   * tlsVersion} {@code 1.2} or {@code 1.3}, null over plain HTTP.
   */
  public record Connect(long nanos, String tlsVersion) {}

  private void connected(
      UpstreamHost host,
      HttpClientRequest request,
      io.vertx.core.http.HttpConnection conn,
      long nanos) {
    nanos = Math.max(0, nanos);
    String version = null;
    if (conn.isSsl() && conn.sslSession() != null) {
      version = TlsVersions.otel(conn.sslSession().getProtocol());
    }
    connects.put(request, new Connect(nanos, version));
    io.micrometer.core.instrument.Timer t = conn.isSsl() ? connectTls : connectPlain;
    if (t != null) {
      t.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
    }
  }

  /**
   * How {@code request}'s attempt connected, once: null when it went out on a connection that was
   * already open (pooled, or a spare opened ahead of demand), or on a pooled one whose set-up could
   * not be told from a wait for a connection (see {@link #open}).
   */
  public Connect connect(HttpClientRequest request) {
    return connects.remove(request);
  }

  /**
   * A connection to {@code host} failed: if the TLS handshake did, one warning per upstream and
   * distinct reason (not one per request), until a handshake with it succeeds again.
   */
  public void tlsFailed(UpstreamHost host, Throwable cause) {
    String reason = TlsFailures.describe(cause);
    if (reason == null) {
      return;
    }
    if (!reason.equals(tlsFailures.put(host, reason))) {
      LOG.warn(
          "pool {}: TLS to upstream {} failed: {} ({}); requests to it fail with 502"
              + " upstream_unavailable while this lasts",
          config.name(),
          host,
          reason,
          TlsFailures.detail(cause));
    }
  }

  /**
   * One client's connections (the slotted or the unslotted one), counted for {@code
   * llm_upstream_connections*}: open now, opened since start, requests waiting for one now.
   */
  private static final class Connections {
    final String kind;
    private final java.util.function.LongSupplier nanoTime;
    // Connections opened and not yet given a request, with when they became ready (weakly held:
    // the pool's own).
    final java.util.Map<io.vertx.core.http.HttpConnection, Long> unused = weakMap();
    final AtomicInteger open = new AtomicInteger();
    final AtomicLong opened = new AtomicLong();
    // Pooled connections closed since start.
    final AtomicLong closed = new AtomicLong();
    final AtomicInteger waiting = new AtomicInteger();
    // Requests waiting for a connection, per upstream (Vert.x keeps a pool, and its queue, per
    // upstream).
    private final java.util.Map<UpstreamHost, AtomicInteger> waitingByHost =
        new java.util.concurrent.ConcurrentHashMap<>();

    Connections(String kind, java.util.function.LongSupplier nanoTime) {
      this.kind = kind;
      this.nanoTime = nanoTime;
    }

    AtomicInteger waiting(UpstreamHost host) {
      return waitingByHost.computeIfAbsent(host, h -> new AtomicInteger());
    }

    io.vertx.core.Handler<io.vertx.core.http.HttpConnection> onClose;

    void opened(io.vertx.core.http.HttpConnection connection) {
      unused.put(connection, nanoTime.getAsLong());
      open.incrementAndGet();
      opened.incrementAndGet();
      connection.closeHandler(
          v -> {
            closed.incrementAndGet();
            open.decrementAndGet();
            if (onClose != null) {
              onClose.handle(connection);
            }
          });
    }
  }

  private final Connections slottedConnections = new Connections("slotted", this::nanoTime);
  private final Connections unslottedConnections = new Connections("unslotted", this::nanoTime);

  {
    slottedConnections.onClose = this::pooledClosed;
  }

  /**
   * Counts a connection of the pool's own making (a spare, or one for a single request) as a
   * slotted one, and runs {@code onClose} when it closes.
   */
  private void track(io.vertx.core.http.HttpClientConnection connection, Runnable onClose) {
    ownConnections.add(connection);
    slottedConnections.open.incrementAndGet();
    slottedConnections.opened.incrementAndGet();
    java.util.concurrent.atomic.AtomicBoolean gone =
        new java.util.concurrent.atomic.AtomicBoolean();
    io.vertx.core.Handler<Void> closed =
        v -> {
          if (!gone.compareAndSet(false, true)) {
            return;
          }
          slottedConnections.open.decrementAndGet();
          if (onClose != null) {
            onClose.run();
          }
        };
    connection.closeHandler(closed);
    // The upstream's close may have come before this handler was set (an upstream that accepts and
    // hangs up at once): Vert.x never calls a handler set after the close, so it runs here.
    if (!OpenConnections.open(connection)) {
      closed.handle(null);
    }
  }

  /**
   * A request on a connection of its own, carrying {@code Connection: close}: a spare if one is
   * open, else one opened now. Counted as waiting while it connects.
   */
  private Future<HttpClientRequest> openOwn(
      UpstreamHost host, HttpMethod method, String path, boolean spareOk) {
    RequestOptions options = options(host.address(), method, path).putHeader("connection", "close");
    host.started(); // ended() follows whatever happens, failure included (UpstreamAttempts)
    io.vertx.core.http.HttpClientConnection spare = spareOk ? spares.get(host).take() : null;
    if (spare != null) {
      sparesTaken.incrementAndGet();
      takenSpares.add(spare);
      return spare
          .request(options)
          .recover(
              t -> {
                // The spare closed under it (the upstream's idle timeout, or its close not seen
                // yet): stale, as a reused connection found closed. Sent on a connection of its
                // own,
                // counted as a stale retry and never towards ejection (a failed preconnect ejects
                // nothing); a failure of that connect is the request's own and does count.
                spare.close();
                staleRetries.incrementAndGet();
                return connectOwn(host, options);
              });
    }
    return connectOwn(host, options);
  }

  /** Connects a connection of its own for {@code options}' request (counted as waiting). */
  private Future<HttpClientRequest> connectOwn(UpstreamHost host, RequestOptions options) {
    long asked = clock.nanoTime();
    Future<io.vertx.core.http.HttpClientConnection> connecting;
    try {
      connecting = freshClient.connect(spares.get(host).connectOptions());
    } catch (IllegalStateException e) {
      return Future.failedFuture(e); // The client closed (the proxy is stopping).
    }
    slottedConnections.waiting.incrementAndGet();
    return connecting
        .andThen(
            ar -> {
              slottedConnections.waiting.decrementAndGet();
              if (ar.failed()) {
                tlsFailed(host, ar.cause());
              }
            })
        .compose(
            c -> {
              track(c, null);
              long nanos = clock.nanoTime() - asked;
              return closeOnFailure(c, c.request(options))
                  .andThen(
                      ar -> {
                        if (ar.succeeded()) {
                          connected(host, ar.result(), c, nanos);
                        }
                      });
            });
  }

  /** A connection of the pool's own making that could not carry its request is closed. */
  private static Future<HttpClientRequest> closeOnFailure(
      io.vertx.core.http.HttpClientConnection c, Future<HttpClientRequest> request) {
    return request.onFailure(t -> c.close());
  }

  /**
   * Gives up {@code request} before or while it is sent: resets it, and closes its connection when
   * the connection is one of the pool's own making (a spare or one for a single request). Vert.x's
   * HTTP/1.1 reset of a request whose head was never written only takes the stream off its
   * connection; a pooled connection goes back to its pool, but one of the pool's own has no pool
   * and no idle timeout, and stayed open (and counted) until the upstream closed it.
   */
  public void abandon(HttpClientRequest request) {
    request.reset();
    io.vertx.core.http.HttpConnection c = request.connection();
    if (c != null && ownConnections.contains(c)) {
      c.close();
    }
  }

  /** A pooled slotted connection closed: right after its response, the upstream closed it so. */
  private void pooledClosed(io.vertx.core.http.HttpConnection connection) {
    if (closed) {
      return; // The proxy closes its connections as it stops.
    }
    Responded r = responded.remove(connection);
    if (r != null && clock.nanoTime() - r.at() <= closeWindowNanos) {
      closedAfterResponse(r.host());
    }
  }

  private void closedAfterResponse(UpstreamHost host) {
    if (host.afterResponse(true)) {
      boolean switching = config.connections().reuse() == ProxyConfig.Reuse.AUTO;
      LOG.warn(
          "pool {}: upstream {} closes its connection after its responses ({} of the last {})"
              + " although it keeps it alive by HTTP's rules; {}",
          config.name(),
          host,
          UpstreamHost.CLOSED_OF_RECENT,
          UpstreamHost.RECENT,
          switching
              ? "its requests now go on connections of their own, "
                  + config.connections().spares()
                  + " opened ahead of demand (connections.reuse: auto, connections.preconnect)"
              : "connections.reuse: on keeps reusing them, a request that finds one closed is sent"
                  + " again on a fresh one");
      if (switching) {
        spares.get(host).target(config.connections().spares());
      }
    }
  }

  /**
   * The response to {@code request} ended, whole: if the upstream closes its connection soon after,
   * it is one that closes after its responses ({@code connections.reuse: auto}).
   */
  public void responded(UpstreamHost host, HttpClientRequest request) {
    io.vertx.core.http.HttpConnection c = request.connection();
    if (c == null || ownConnections.contains(c)) {
      return;
    }
    java.lang.ref.WeakReference<HttpClientRequest> last = carrying.get(c);
    if (last != null && last.get() != request) {
      // Vert.x gave the connection back to its pool once the response was in, before the paused
      // client had read its end: another request took it, and a close now (that request's reset by
      // the proxy, when its client leaves) says nothing about this response.
      return;
    }
    responded.put(c, new Responded(host, clock.nanoTime(), 0));
  }

  /**
   * The upstream answered {@code request}: if it went on a connection that had carried a response,
   * the upstream kept that connection open.
   */
  public void answered(UpstreamHost host, HttpClientRequest request) {
    io.vertx.core.http.HttpConnection c = request.connection();
    if (c != null && reusedAfter.remove(c) != null) {
      host.afterResponse(false);
    }
  }

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
    // Never a spare: spares opened together meet the upstream's idle timeout together, so one may
    // be as stale as the connection this request just failed on.
    return openOwn(host, method, path, false);
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
    if (takenSpares.remove(c)) {
      firstRequests.add(request);
      return true; // A spare waited idle: the upstream may have closed it meanwhile.
    }
    carrying.put(c, new java.lang.ref.WeakReference<>(request));
    Responded r = responded.remove(c);
    if (r != null) {
      reusedAfter.put(c, new Responded(r.host(), r.at(), clock.nanoTime()));
    }
    if (used.add(c)) {
      firstRequests.add(request);
      return false;
    }
    return true;
  }

  /**
   * Whether {@code request}, told to {@link #reused} before, is the first its connection carries (a
   * spare's first included): only then can a failure of it be the connection's TLS handshake.
   */
  public boolean firstOnConnection(HttpClientRequest request) {
    return firstRequests.contains(request);
  }

  /**
   * Counts a retry on a fresh connection after {@code request}'s reused connection turned out
   * closed. Only when that connection was reused soon after its last response ({@code
   * closeWindowNanos}, as a close seen after a response) is this an upstream closing after its
   * responses: one that closes idle connections after a timeout (uvicorn's 5 s) meets a request
   * sent as it closes now and then under sparse traffic, and a spare may have waited any time.
   */
  public void staleRetried(UpstreamHost host, HttpClientRequest request) {
    staleRetries.incrementAndGet();
    io.vertx.core.http.HttpConnection c = request == null ? null : request.connection();
    Responded r = c == null ? null : reusedAfter.remove(c);
    if (r != null && r.reusedAt() - r.at() <= closeWindowNanos) {
      closedAfterResponse(host);
    }
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
    // Answered over TLS: a TLS failure logged before is logged again if it comes back. (Not at the
    // handshake: a TLS 1.3 server refuses a client certificate after the client's side of it.)
    tlsFailures.remove(host);
    if (host.reachable(clock.nanoTime())) {
      capacity.changed();
    }
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
      capacity.ejected(host);
    }
  }

  /**
   * Tells {@code listener} the pool's capacity now, and again at every change: the slots of its
   * available upstreams ({@link #availableSlots}). One listener; a second replaces the first.
   */
  public void onCapacityChange(java.util.function.IntConsumer listener) {
    capacity.listen(listener);
  }

  /** The slots of the upstreams available now: the pool's capacity. */
  public int availableSlots() {
    return capacity.available();
  }

  /** The slots of all the pool's upstreams, available or not. */
  public int configuredSlots() {
    return capacity.configured();
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
   * llm_upstream_retries_total}, {@code llm_upstream_stale_retries_total}, {@code
   * llm_route_decisions_total}, {@code llm_upstream_connect_seconds}, with {@code routing:
   * engine_load} {@code llm_upstream_scrapes_total}, and with a client certificate ({@code
   * pools[].tls.cert_file}) its {@code llm_tls_certificate_expiry_timestamp_seconds}.
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
    for (RouteReason r : RouteReason.all()) {
      FunctionCounter.builder("llm.route.decisions", this, x -> x.decisions(r))
          .tags(pool.and("reason", r.word()))
          .description(
              "Upstreams chosen for a request (retries included), by why: least_loaded,"
                  + " engine_load, engine_load_fallback (no fresh scrape), only_available")
          .register(registry);
    }
    if (scraper != null) {
      scraper.bindTo(registry, pool);
    }
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
          .description(
              "Connections open to the pool's upstreams: pooled ones, and with connections.reuse off or auto (once switched) spares and one-per-request connections")
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
    FunctionCounter.builder(
            "llm.upstream.connections.closed_after_response",
            this,
            UpstreamPool::closedAfterResponse)
        .tags(pool)
        .description(
            "Responses on pooled connections that the upstream followed by closing the connection"
                + " (connections.reuse: auto stops reusing an upstream's connections on seeing it)")
        .register(registry);
    Gauge.builder("llm.upstreams.single_use", this, UpstreamPool::singleUseCount)
        .tags(pool)
        .strongReference(true)
        .description(
            "Upstreams whose slotted requests go on connections of their own now"
                + " (connections.reuse: off, or auto once they were seen closing them)")
        .register(registry);
    Gauge.builder("llm.upstream.connections.spare", this, UpstreamPool::sparesReady)
        .tags(pool)
        .strongReference(true)
        .description("Connections opened ahead of demand, open and waiting for a request")
        .register(registry);
    FunctionCounter.builder(
            "llm.upstream.connections.preconnected", this, UpstreamPool::preconnected)
        .tags(pool)
        .description("Spare connections opened ahead of demand since start")
        .register(registry);
    FunctionCounter.builder("llm.upstream.connections.spare_taken", this, UpstreamPool::sparesTaken)
        .tags(pool)
        .description("Requests that found a spare connection open since start")
        .register(registry);
    tls.bindTo(registry, config.name());
    connectTls = connectTimer(registry, pool, true);
    connectPlain = connectTimer(registry, pool, false);
    FunctionCounter.builder("llm.upstream.stale.retries", this, UpstreamPool::staleRetries)
        .tags(pool)
        .description(
            "Requests sent again on a fresh connection after the upstream had closed the pooled"
                + " one they went out on, before answering")
        .register(registry);
  }

  /** Bounds of {@code llm_upstream_connect_seconds}: a LAN connect to a WAN TLS handshake. */
  private static final java.time.Duration[] CONNECT_BUCKETS = {
    java.time.Duration.ofMillis(1),
    java.time.Duration.ofMillis(2),
    java.time.Duration.ofMillis(5),
    java.time.Duration.ofMillis(10),
    java.time.Duration.ofMillis(25),
    java.time.Duration.ofMillis(50),
    java.time.Duration.ofMillis(100),
    java.time.Duration.ofMillis(250),
    java.time.Duration.ofMillis(500),
    java.time.Duration.ofSeconds(1),
    java.time.Duration.ofMillis(2500),
    java.time.Duration.ofSeconds(5)
  };

  private static io.micrometer.core.instrument.Timer connectTimer(
      MeterRegistry registry, Tags pool, boolean tls) {
    return io.micrometer.core.instrument.Timer.builder("llm.upstream.connect")
        .tags(pool.and("tls", Boolean.toString(tls)))
        .serviceLevelObjectives(CONNECT_BUCKETS)
        .description(
            "Set-up of a new connection a request waited for, from asking for it to its being"
                + " ready: DNS, TCP connect and, for https:// upstreams, the TLS handshake; never"
                + " time queued behind other requests for a connection (pooled and spare"
                + " connections, and a pooled one that a queued request may have waited for, are"
                + " not counted)")
        .register(registry);
  }

  /**
   * Registers one series per configured upstream ({@code telemetry.per_upstream_metrics}, off by
   * default): {@code llm_upstream_available}, {@code llm_upstream_in_flight} and {@code
   * llm_upstream_slots}, labelled by the pool and the {@code upstream}; with {@code routing:
   * engine_load} also the engine's own gauges ({@code llm_upstream_engine_waiting}, {@code
   * _running}, {@code _kv_cache_usage}).
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
      Gauge.builder("llm.upstream.slots", h, UpstreamHost::slots)
          .tags(tags)
          .strongReference(true)
          .description(
              "The upstream's configured slots, counted in the pool's capacity while it is"
                  + " available")
          .register(registry);
    }
    if (scraper != null) {
      scraper.bindUpstreamsTo(registry, pool);
    }
  }

  public Future<Void> close() {
    closed = true;
    if (healthTimer >= 0) {
      vertx.cancelTimer(healthTimer);
    }
    capacity.close();
    for (SpareConnections s : spares.values()) {
      s.close();
    }
    if (scraper != null) {
      scraper.close();
    }
    return Future.join(
            client.close(), unslottedClient.close(), healthClient.close(), freshClient.close())
        .mapEmpty();
  }

  private long nanoTime() {
    return clock.nanoTime();
  }

  /** Spare connections open now, over the pool's upstreams. */
  public int sparesReady() {
    int n = 0;
    for (SpareConnections s : spares.values()) {
      n += s.ready();
    }
    return n;
  }

  /** The longest run of failed preconnects (or spares hung up on at once) over the upstreams. */
  int spareFailuresInRow() {
    int n = 0;
    for (SpareConnections s : spares.values()) {
      n = Math.max(n, s.failuresInRow());
    }
    return n;
  }

  /** Slotted connections open now (pooled ones, spares and one-per-request ones). */
  int slottedOpen() {
    return slottedConnections.open.get();
  }

  /** Spare connections being connected now, over the pool's upstreams. */
  int sparesConnecting() {
    int n = 0;
    for (SpareConnections s : spares.values()) {
      n += s.connecting();
    }
    return n;
  }

  /** Requests that found a spare connection open, since start. */
  public long sparesTaken() {
    return sparesTaken.get();
  }

  /** Spare connections opened ahead of demand, since start. */
  public long preconnected() {
    return preconnected.get();
  }

  /** Responses the upstreams followed by closing their connection, since start. */
  public long closedAfterResponse() {
    long n = 0;
    for (UpstreamHost h : hosts) {
      n += h.closedAfterResponse();
    }
    return n;
  }

  /** Upstreams whose slotted requests go on connections of their own now. */
  public int singleUseCount() {
    int n = 0;
    for (UpstreamHost h : hosts) {
      if (h.singleUse()) {
        n++;
      }
    }
    return n;
  }

  /** How each upstream's connections are used now, for {@code /admin/stats}. */
  public List<ReuseState> reuseStates() {
    List<ReuseState> out = new ArrayList<>(hosts.size());
    for (UpstreamHost h : hosts) {
      out.add(
          new ReuseState(
              config.name(),
              h.address().authority(),
              config.connections().reuse().word(),
              h.closesAfterResponses(),
              h.singleUse(),
              h.closedAfterResponse(),
              spares.get(h).ready()));
    }
    return out;
  }

  /**
   * One upstream's connection reuse: the configured mode, whether it was seen closing its
   * connections after its responses (and how many times), whether its slotted requests go on
   * connections of their own now, and the spares open for them.
   */
  public record ReuseState(
      String pool,
      String upstream,
      String reuse,
      boolean closesAfterResponses,
      boolean singleUse,
      long closedAfterResponse,
      int spares) {}
}
