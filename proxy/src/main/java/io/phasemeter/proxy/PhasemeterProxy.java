package io.phasemeter.proxy;

import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.admin.AdminServer;
import io.phasemeter.proxy.budget.BudgetTracker;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.gateway.KeyStore;
import io.phasemeter.proxy.gateway.RateLimiter;
import io.phasemeter.proxy.pipeline.Pipeline;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import io.phasemeter.proxy.telemetry.ExportPolicy;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.phasemeter.proxy.telemetry.RecordFeed;
import io.phasemeter.proxy.telemetry.RecordStore;
import io.phasemeter.proxy.telemetry.RequestRecord;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The measuring reverse proxy: the public OpenAI-compatible listener in front of the configured
 * pools, and the admin listener with metrics, records and live stats. Everything it needs comes in
 * through {@link #builder}; nothing is global, so tests can run two side by side.
 */
public final class PhasemeterProxy {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(PhasemeterProxy.class);

  /** Rolling quantiles advance in slices of this length. */
  static final Duration STATS_SLICE = Duration.ofSeconds(10);

  /** Records buffered per feed subscriber before they are dropped for it. */
  static final int FEED_BUFFER = 4096;

  private final Vertx vertx;
  private final Pipeline pipeline;
  private final HttpServer server;
  private final AdminServer admin;
  private final ProxyMetrics metrics;
  private final RecordStore records;
  private final LiveStats stats;
  private final long rotateTimer;
  private final long reloadTimer;
  private final EngineSpans engine;
  private final long expireTimer;
  private final ProxyTelemetry ownedTelemetry;
  private final AtomicBoolean ready;
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile Future<DrainResult> draining;

  private PhasemeterProxy(
      Vertx vertx,
      Pipeline pipeline,
      HttpServer server,
      AdminServer admin,
      ProxyMetrics metrics,
      RecordStore records,
      LiveStats stats,
      long rotateTimer,
      ProxyTelemetry ownedTelemetry,
      AtomicBoolean ready,
      long reloadTimer,
      EngineSpans engine,
      long expireTimer) {
    this.reloadTimer = reloadTimer;
    this.engine = engine;
    this.expireTimer = expireTimer;
    this.ownedTelemetry = ownedTelemetry;
    this.ready = ready;
    this.vertx = vertx;
    this.pipeline = pipeline;
    this.server = server;
    this.admin = admin;
    this.metrics = metrics;
    this.records = records;
    this.stats = stats;
    this.rotateTimer = rotateTimer;
  }

  /** Starts building a proxy for {@code config} on {@code vertx}. */
  public static Builder builder(Vertx vertx, ProxyConfig config) {
    return new Builder(vertx, config);
  }

  /** The public listener's bound port. */
  public int port() {
    return server.actualPort();
  }

  /** The admin listener's bound port. */
  public int adminPort() {
    return admin.port();
  }

  /** Requests currently between headers parsed and root end. */
  public int inFlight() {
    return pipeline.inFlight();
  }

  /** The slot pools, by pool name. */
  public Map<String, SlotPool> slotPools() {
    return pipeline.slotPools();
  }

  /** The bounds on request bodies, and what is held against them now. */
  public io.phasemeter.proxy.pipeline.BodyBudget bodyBudget() {
    return pipeline.bodyBudget();
  }

  public ProxyMetrics metrics() {
    return metrics;
  }

  public RecordStore records() {
    return records;
  }

  public LiveStats stats() {
    return stats;
  }

  /** Where records wait for the engine's own spans ({@code telemetry.engine_spans}). */
  public EngineSpans engineSpans() {
    return engine;
  }

  /** What a drain did: requests that finished on their own, and those cancelled at the deadline. */
  public record DrainResult(int inFlightAtStart, int cancelled, Duration took) {}

  /**
   * Drains the proxy (what SIGTERM does): reports not-ready, refuses new requests with 503 {@code
   * shutting_down} and stops accepting connections, lets in-flight requests finish until {@code
   * timeout}, then cancels the rest (outcome {@code cancelled}); completes when every request has
   * ended, its record published and its spans ended. Close the proxy afterwards to flush the span
   * export. Calling it again returns the same drain.
   */
  public synchronized Future<DrainResult> drain(Duration timeout) {
    if (draining != null) {
      return draining;
    }
    long startedAt = System.nanoTime();
    ready.set(false);
    pipeline.startDraining();
    int atStart = pipeline.inFlight();
    io.vertx.core.Promise<DrainResult> done = io.vertx.core.Promise.promise();
    int[] cancelled = {0};
    long deadline =
        vertx.setTimer(Math.max(1, timeout.toMillis()), id -> cancelled[0] = pipeline.cancelAll());
    // Stop accepting now; connections close as their requests end (or at the deadline).
    server.shutdown(timeout.toMillis() + 1_000, java.util.concurrent.TimeUnit.MILLISECONDS);
    long[] poll = new long[1];
    poll[0] =
        vertx.setPeriodic(
            10,
            id -> {
              if (pipeline.inFlight() == 0) {
                vertx.cancelTimer(poll[0]);
                vertx.cancelTimer(deadline);
                done.tryComplete(
                    new DrainResult(
                        atStart, cancelled[0], Duration.ofNanos(System.nanoTime() - startedAt)));
              }
            });
    draining = done.future();
    return draining;
  }

  /** Stops both listeners and closes the upstream clients. */
  public Future<Void> close() {
    if (!closed.compareAndSet(false, true)) {
      return Future.succeededFuture();
    }
    vertx.cancelTimer(rotateTimer);
    if (reloadTimer >= 0) {
      vertx.cancelTimer(reloadTimer);
    }
    if (expireTimer >= 0) {
      vertx.cancelTimer(expireTimer);
    }
    // Records still waiting for their engine span are published (as missing) before the feed ends.
    engine.flush();
    return records
        .feed()
        .close()
        .timeout(5, java.util.concurrent.TimeUnit.SECONDS)
        .otherwiseEmpty()
        .compose(v -> Future.join(server.close(), admin.close()))
        .compose(v -> pipeline.close())
        .onComplete(
            v -> {
              metrics.close();
              if (ownedTelemetry != null) {
                ownedTelemetry.close();
              }
            })
        .mapEmpty();
  }

  /** The version of this build. */
  public static String version() {
    try (InputStream in =
        PhasemeterProxy.class.getResourceAsStream("/phasemeter-proxy-version.properties")) {
      Properties p = new Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "dev");
    } catch (IOException e) {
      return "dev";
    }
  }

  /** Collects the proxy's collaborators; {@link #start()} binds the listeners. */
  public static final class Builder {
    private final Vertx vertx;
    private final ProxyConfig config;
    private OpenTelemetry openTelemetry;
    private SpanDeferral spanDeferral;
    private NanoClock clock = NanoClock.system();
    private ProxyMetrics metrics;
    private Budgets budgets = new Budgets(List.of());
    private final List<RequestObserver> observers = new ArrayList<>();
    private Map<String, String> environment = System.getenv();

    private Builder(Vertx vertx, ProxyConfig config) {
      this.vertx = Objects.requireNonNull(vertx);
      this.config = Objects.requireNonNull(config);
    }

    /**
     * The OpenTelemetry instance spans go to (default: one built from the config's telemetry
     * section and the OTEL_* variables, owned and closed by the proxy). Not used when the config
     * says {@code telemetry.enabled: false}.
     */
    public Builder openTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry);
      this.spanDeferral = null;
      return this;
    }

    /**
     * Keeps phase spans deferred until the root ends, built as SDK spans of the instance given with
     * {@link #openTelemetry} only when {@code deferral} says the request is exported (that SDK must
     * let {@link SpanDeferral#start} choose span ids). Set after {@link #openTelemetry}.
     */
    public Builder spanDeferral(SpanDeferral deferral) {
      this.spanDeferral = Objects.requireNonNull(deferral);
      return this;
    }

    /**
     * The proxy's own telemetry, built by the caller (who closes it): its SDK, with phase spans
     * deferred until the root ends and built as SDK spans only for exported requests, as when the
     * proxy builds it itself. An OpenTelemetry instance given with {@link #openTelemetry} gets
     * every phase span as an SDK span from the start instead.
     */
    public Builder telemetry(ProxyTelemetry telemetry) {
      this.openTelemetry = telemetry.openTelemetry();
      this.spanDeferral = telemetry.spanDeferral();
      return this;
    }

    /** The clock every duration is measured with (default: {@link NanoClock#system()}). */
    public Builder clock(NanoClock clock) {
      this.clock = Objects.requireNonNull(clock);
      return this;
    }

    /** The metrics to record into (default: a fresh registry owned by the proxy). */
    public Builder metrics(ProxyMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics);
      return this;
    }

    /** The budgets judged live ({@code llm_budget_ratio}, {@code /admin/stats}); default none. */
    public Builder budgets(Budgets budgets) {
      this.budgets = Objects.requireNonNull(budgets);
      return this;
    }

    /**
     * Where a pool's {@code api_key_env} is looked up (default: the process environment). The value
     * is only ever sent upstream, never logged.
     */
    public Builder environment(Map<String, String> environment) {
      this.environment = Map.copyOf(environment);
      return this;
    }

    /** Adds an observer told about every finished request. */
    public Builder observer(RequestObserver observer) {
      observers.add(Objects.requireNonNull(observer));
      return this;
    }

    /** Logs a reload that changed something; the same failure (a missing file) only once. */
    private static void logReload(
        KeyStore.ReloadResult r,
        String file,
        java.util.concurrent.atomic.AtomicReference<String> last) {
      String error = r.error().orElse(null);
      if (r.status() != KeyStore.ReloadStatus.FAILED) {
        last.set(null);
      }
      if (r.status() == KeyStore.ReloadStatus.RELOADED) {
        LOG.info("keys file {} reloaded: {} keys", file, r.keys());
      } else if (r.status() == KeyStore.ReloadStatus.FAILED
          && !java.util.Objects.equals(last.getAndSet(error), error)) {
        LOG.warn(
            "keys file {} not reloaded, the previous {} keys stay: {}",
            file,
            r.keys(),
            r.error().orElse("unknown error"));
      }
    }

    /** Binds both listeners and completes with the running proxy. */
    public Future<PhasemeterProxy> start() {
      Map<String, String> providerKeys = new java.util.HashMap<>();
      for (ProxyConfig.Pool p : config.pools()) {
        if (p.apiKeyEnv() != null) {
          String key = environment.get(p.apiKeyEnv());
          if (key == null || key.isBlank()) {
            return Future.failedFuture(
                new io.phasemeter.proxy.config.ConfigException(
                    "pools["
                        + config.pools().indexOf(p)
                        + "].api_key_env: the environment variable "
                        + p.apiKeyEnv()
                        + " is not set (pool '"
                        + p.name()
                        + "' needs it for its upstream)"));
          }
          providerKeys.put(p.name(), key.trim());
        }
      }
      ProxyMetrics m = metrics != null ? metrics : ProxyMetrics.create();
      ProxyTelemetry owned = null;
      OpenTelemetry otel = openTelemetry;
      SpanDeferral deferral = spanDeferral;
      boolean measuring = config.telemetry().enabled();
      if (!measuring) {
        // telemetry.enabled: false exists to measure what measuring costs: nothing per request.
        otel = OpenTelemetry.noop();
        deferral = null;
      } else if (otel == null) {
        // Without an SDK there would be no trace ids: records and the join need them.
        owned = ProxyTelemetry.create(config.telemetry(), System.getenv(), version(), clock);
        owned.bindTo(m);
        otel = owned.openTelemetry();
        deferral = owned.spanDeferral();
      }
      ProxyTelemetry ownedTelemetry = owned;
      ProxyConfig.Telemetry t = config.telemetry();
      ExportPolicy policy = ExportPolicy.of(t.sampling());
      RecordFeed<RequestRecord> feed = RecordFeed.ofRecords(FEED_BUFFER, m::recordDropped);
      Duration longestWindow = BudgetTracker.longestWindow(budgets);
      int slices =
          (int)
              Math.max(
                  6, (longestWindow.toNanos() + STATS_SLICE.toNanos() - 1) / STATS_SLICE.toNanos());
      RollingQuantiles quantiles = new RollingQuantiles(STATS_SLICE, slices, 4096);
      LiveStats stats = new LiveStats(quantiles);
      EngineSpans engine = new EngineSpans(t.engineSpans(), clock::nanoTime, List.of(m, stats));
      m.bindEngineSpans(engine);
      RecordStore records =
          new RecordStore(t.records().max(), t.records().ttl(), feed, policy, engine);
      BudgetTracker tracker = new BudgetTracker(budgets, quantiles);
      tracker.bindTo(m.registry());
      List<RequestObserver> all = new ArrayList<>();
      if (measuring) {
        all.add(m);
        all.add(records);
        all.add(stats);
      }
      all.addAll(observers);
      KeyStore keys = null;
      if (config.auth().enabled()) {
        try {
          keys =
              KeyStore.create(
                  java.nio.file.Path.of(config.auth().keysFile()),
                  clock,
                  config.auth().cacheTtl(),
                  config.auth().cacheMax());
        } catch (RuntimeException e) {
          m.close();
          if (ownedTelemetry != null) {
            ownedTelemetry.close();
          }
          return Future.failedFuture(e);
        }
      }
      KeyStore keyStore = keys;
      java.util.concurrent.atomic.AtomicReference<String> lastReloadError =
          new java.util.concurrent.atomic.AtomicReference<>();
      if (keyStore != null) {
        m.bindKeys(keyStore);
      }
      RateLimiter limiter = new RateLimiter(clock);
      Pipeline pipeline =
          new Pipeline(vertx, config, otel, clock, all, providerKeys, keyStore, limiter, deferral);
      long reloadTimer =
          keyStore == null
              ? -1
              : vertx.setPeriodic(
                  config.auth().reloadInterval().toMillis(),
                  id ->
                      vertx
                          .executeBlocking(keyStore::reloadIfChanged, false)
                          .onSuccess(r -> logReload(r, config.auth().keysFile(), lastReloadError)));
      m.bindPipeline(pipeline.inFlightByPool(), pipeline.slotPools());
      pipeline.bodyBudget().bindTo(m.registry());
      m.bindUpstreams(pipeline.upstreamPools(), t.perUpstreamMetrics());
      m.bindExportedRatio(records::exportedRatio);
      AtomicBoolean listening = new AtomicBoolean();
      long rotate = vertx.setPeriodic(STATS_SLICE.toMillis(), id -> quantiles.rotate());
      long expireTimer =
          engine.enabled()
              ? vertx.setPeriodic(engine.expireIntervalMillis(), id -> engine.expire())
              : -1;
      HttpServerOptions options =
          new HttpServerOptions()
              .setHost(config.listen().host())
              .setPort(config.listen().port())
              .setTcpNoDelay(true)
              .setHandle100ContinueAutomatically(false)
              .setCompressionSupported(false)
              .setMaxInitialLineLength(8192)
              .setMaxHeaderSize(16384)
              // HTTP/1.x only, as OpenAI clients speak it: with cleartext HTTP/2 on, Vert.x holds a
              // new connection in its upgrade check until a whole request head has arrived, out
              // of reach of the head timeout (a slowloris client is never seen).
              .setHttp2ClearTextEnabled(false);
      AdminServer.Sources sources =
          new AdminServer.Sources(
              m.registry(), records, quantiles, tracker::status, listening::get, engine);
      HeadTimeout heads = new HeadTimeout(vertx, config.limits().receiveTimeout());
      Future<HttpServer> publicServer =
          vertx
              .createHttpServer(options)
              .connectionHandler(heads::opened)
              .invalidRequestHandler(pipeline::handleInvalid)
              .requestHandler(
                  req -> {
                    if (heads.requestStarted(req)) {
                      pipeline.handle(req);
                    }
                  })
              .listen();
      Future<AdminServer> adminServer = AdminServer.start(vertx, config.admin(), sources);
      return Future.all(publicServer, adminServer)
          .map(
              v -> {
                listening.set(true);
                return new PhasemeterProxy(
                    vertx,
                    pipeline,
                    publicServer.result(),
                    adminServer.result(),
                    m,
                    records,
                    stats,
                    rotate,
                    ownedTelemetry,
                    listening,
                    reloadTimer,
                    engine,
                    expireTimer);
              })
          .onFailure(
              err -> {
                vertx.cancelTimer(rotate);
                if (expireTimer >= 0) {
                  vertx.cancelTimer(expireTimer);
                }
                if (reloadTimer >= 0) {
                  vertx.cancelTimer(reloadTimer);
                }
                if (publicServer.succeeded()) {
                  publicServer.result().close();
                }
                if (adminServer.succeeded()) {
                  adminServer.result().close();
                }
                pipeline.close();
                m.close();
                if (ownedTelemetry != null) {
                  ownedTelemetry.close();
                }
              });
    }
  }
}
