package io.phasemeter.proxy;

import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.admin.AdminServer;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.pipeline.Pipeline;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.phasemeter.proxy.telemetry.RecordStore;
import io.phasemeter.proxy.tls.ListenerTls;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
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
  private final Vertx vertx;
  private final ProxyRuntime runtime;
  private final Pipeline pipeline;
  private final HttpServer server;
  private final AdminServer admin;
  private final AtomicBoolean ready;
  private final DescriptorBudget descriptors;
  private final java.util.List<String> tlsLines;
  private final ListenerTls publicTls;
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile Future<DrainResult> draining;

  private PhasemeterProxy(
      ProxyRuntime runtime,
      Pipeline pipeline,
      HttpServer server,
      AdminServer admin,
      AtomicBoolean ready,
      DescriptorBudget descriptors,
      java.util.List<String> tlsLines,
      ListenerTls publicTls) {
    this.vertx = runtime.vertx();
    this.runtime = runtime;
    this.pipeline = pipeline;
    this.server = server;
    this.admin = admin;
    this.ready = ready;
    this.descriptors = descriptors;
    this.tlsLines = java.util.List.copyOf(tlsLines);
    this.publicTls = publicTls;
  }

  /** One start-up line per listener that speaks TLS: what it serves (none for plaintext). */
  public java.util.List<String> describeTls() {
    return tlsLines;
  }

  /**
   * How the file descriptors are shared between the listeners, the upstream connections and the
   * process, as one start-up line.
   */
  public String connectionBounds() {
    return descriptors.describe();
  }

  /** Starts building a proxy for {@code config} on {@code vertx}. */
  public static Builder builder(Vertx vertx, ProxyConfig config) {
    return new Builder(vertx, config);
  }

  /** What the proxy was built from (tests read its close list). */
  ProxyRuntime runtime() {
    return runtime;
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
    return runtime.slotPools();
  }

  /** The bounds on request bodies, and what is held against them now. */
  public io.phasemeter.proxy.pipeline.BodyBudget bodyBudget() {
    return runtime.bodyBudget();
  }

  public ProxyMetrics metrics() {
    return runtime.metrics();
  }

  public RecordStore records() {
    return runtime.records();
  }

  public LiveStats stats() {
    return runtime.stats();
  }

  /** Where records wait for the engine's own spans ({@code telemetry.engine_spans}). */
  public EngineSpans engineSpans() {
    return runtime.engineSpans();
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
    // Stop accepting now; connections close as their requests end (or at the deadline). The
    // certificate of a listener that takes no new connections is reloaded no more: a hand-over the
    // shutting-down listener fails is no refused certificate.
    if (publicTls != null) {
      publicTls.close();
    }
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

  /**
   * Stops the periodic work, publishes what waits and ends the record feed, stops both listeners,
   * closes the upstream clients, then the telemetry the proxy built and the metrics.
   */
  public Future<Void> close() {
    if (!closed.compareAndSet(false, true)) {
      return Future.succeededFuture();
    }
    return runtime.close();
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
    private final ProxyRuntime.Builder runtime;

    private Builder(Vertx vertx, ProxyConfig config) {
      this.vertx = Objects.requireNonNull(vertx);
      this.config = Objects.requireNonNull(config);
      this.runtime = ProxyRuntime.builder(vertx, config);
    }

    /**
     * The OpenTelemetry instance spans go to (default: one built from the config's telemetry
     * section and the OTEL_* variables, owned and closed by the proxy). Not used when the config
     * says {@code telemetry.enabled: false}.
     */
    public Builder openTelemetry(OpenTelemetry openTelemetry) {
      runtime.openTelemetry(openTelemetry);
      return this;
    }

    /**
     * Keeps phase spans deferred until the root ends, built as SDK spans of the instance given with
     * {@link #openTelemetry} only when {@code deferral} says the request is exported (that SDK must
     * let {@link SpanDeferral#start} choose span ids). Set after {@link #openTelemetry}.
     */
    public Builder spanDeferral(SpanDeferral deferral) {
      runtime.spanDeferral(deferral);
      return this;
    }

    /**
     * The proxy's own telemetry, built by the caller (who closes it): its SDK, with phase spans
     * deferred until the root ends and built as SDK spans only for exported requests, as when the
     * proxy builds it itself, and its export health on the proxy's metrics. An OpenTelemetry
     * instance given with {@link #openTelemetry} gets every phase span as an SDK span from the
     * start instead.
     */
    public Builder telemetry(ProxyTelemetry telemetry) {
      runtime.telemetry(telemetry);
      return this;
    }

    /** The clock every duration is measured with (default: {@link NanoClock#system()}). */
    public Builder clock(NanoClock clock) {
      runtime.clock(clock);
      return this;
    }

    /** The metrics to record into (default: a fresh registry); the proxy closes them. */
    public Builder metrics(ProxyMetrics metrics) {
      runtime.metrics(metrics);
      return this;
    }

    /** The budgets judged live ({@code llm_budget_ratio}, {@code /admin/stats}); default none. */
    public Builder budgets(Budgets budgets) {
      runtime.budgets(budgets);
      return this;
    }

    /**
     * Where a pool's {@code api_key_env} is looked up (default: the process environment). The value
     * is only ever sent upstream, never logged.
     */
    public Builder environment(Map<String, String> environment) {
      runtime.environment(environment);
      return this;
    }

    /** Adds an observer told about every finished request. */
    public Builder observer(RequestObserver observer) {
      runtime.observer(observer);
      return this;
    }

    /**
     * Builds the runtime, binds both listeners and completes with the running proxy; a failure
     * completes once everything built so far is closed again.
     */
    public Future<PhasemeterProxy> start() {
      ListenerTls publicTls;
      ListenerTls adminTls;
      try {
        // Before anything is built or bound: a bad pair stops start-up with nothing listening.
        publicTls =
            tls(
                config.listen().tls(),
                "public",
                "listen.tls",
                ListenerProtocols.alpnVersions(config.listen()));
        adminTls = tls(config.admin().tls(), "admin", "admin.tls", List.of(HttpVersion.HTTP_1_1));
      } catch (RuntimeException e) {
        return Future.failedFuture(e);
      }
      ProxyRuntime rt;
      try {
        rt = runtime.build();
      } catch (RuntimeException e) {
        return Future.failedFuture(e);
      }
      Pipeline pipeline = new Pipeline(rt);
      AtomicBoolean ready = new AtomicBoolean();
      DescriptorBudget descriptors = DescriptorBudget.of(config);
      io.micrometer.core.instrument.MeterRegistry registry = rt.metrics().registry();
      ListenerGuard publicGuard =
          new ListenerGuard(
              vertx, "public", config.limits().receiveTimeout(), descriptors.publicMax(), registry);
      ListenerGuard adminGuard =
          new ListenerGuard(
              vertx, "admin", config.admin().receiveTimeout(), descriptors.adminMax(), registry);
      for (ListenerTls t : new ListenerTls[] {publicTls, adminTls}) {
        if (t != null) {
          t.bindTo(registry);
          rt.onClose("tls reload", t::close);
        }
      }
      Future<HttpServer> server = listen(vertx, config, pipeline, publicGuard, publicTls);
      Future<AdminServer> admin =
          AdminServer.start(
              vertx, config.admin(), rt.adminSources(ready::get), adminGuard, adminTls);
      return Future.join(server, admin)
          .andThen(
              v ->
                  rt.onClose("listeners", () -> closeListening(server, admin, publicTls, adminTls)))
          .compose(
              v -> {
                rt.start();
                ready.set(true);
                return Future.succeededFuture(
                    new PhasemeterProxy(
                        rt,
                        pipeline,
                        server.result(),
                        admin.result(),
                        ready,
                        descriptors,
                        tlsLines(publicTls, adminTls),
                        publicTls));
              },
              err -> rt.close().transform(v -> Future.failedFuture(err)));
    }

    /** The TLS of a listener, its files read and checked now; null when it speaks plaintext. */
    private ListenerTls tls(
        ProxyConfig.ServerTls tls, String listener, String key, List<HttpVersion> alpn) {
      return tls == null ? null : ListenerTls.load(vertx, tls, listener, key, alpn);
    }

    private static java.util.List<String> tlsLines(ListenerTls publicTls, ListenerTls adminTls) {
      java.util.List<String> lines = new java.util.ArrayList<>();
      if (publicTls != null) {
        lines.add("tls: public listener " + publicTls.describe());
      }
      if (adminTls != null) {
        lines.add("tls: admin listener " + adminTls.describe());
      }
      return lines;
    }

    /**
     * Stops the certificate reloads, then closes the listeners that are listening: a hand-over the
     * closing listener fails is no refused certificate.
     */
    private static Future<?> closeListening(
        Future<HttpServer> server, Future<AdminServer> admin, ListenerTls... tls) {
      for (ListenerTls t : tls) {
        if (t != null) {
          t.close();
        }
      }
      return Future.join(
          server.succeeded() ? server.result().close() : Future.succeededFuture(),
          admin.succeeded() ? admin.result().close() : Future.succeededFuture());
    }

    /**
     * The public listener, its connections bounded by {@code guard}, its request heads in time by
     * {@code limits.receive_timeout}, speaking HTTPS when {@code tls} is set.
     */
    private static Future<HttpServer> listen(
        Vertx vertx, ProxyConfig config, Pipeline pipeline, ListenerGuard guard, ListenerTls tls) {
      HttpServerOptions options =
          new HttpServerOptions()
              .setHost(config.listen().host())
              .setPort(config.listen().port())
              .setTcpNoDelay(true)
              .setHandle100ContinueAutomatically(false)
              .setCompressionSupported(false)
              .setMaxInitialLineLength(8192)
              .setMaxHeaderSize(16384);
      // HTTP/1.x, and HTTP/2 when listen.http2 says so (ListenerProtocols: why h2c needs a timer
      // of its own before the guard's).
      ListenerProtocols.apply(options, config.listen(), config.limits().receiveTimeout());
      boolean h2c = ListenerProtocols.h2c(config.listen());
      ListenerProtocols.IdleHandover idle = new ListenerProtocols.IdleHandover("public");
      if (tls != null) {
        tls.applyTo(options);
      }
      return vertx
          .createHttpServer(options)
          .connectionHandler(
              connection -> {
                if (h2c) {
                  idle.accepted(connection);
                }
                if (guard.opened(connection) && !h2c) {
                  // With h2c on, an HTTP/1.x connection reaches this handler only once its first
                  // head is decoded, and the decoder cannot be replaced mid-request; such a
                  // connection keeps Vert.x's (a broken chunked body closes it without the 400;
                  // the guard closes every connection after a chunked body either way). Over TLS
                  // this handler runs when the handshake is done, before a request byte is read;
                  // an HTTP/2 connection has no HTTP/1 decoder and is left as it is.
                  io.phasemeter.proxy.pipeline.BodyFraming.install(connection, options);
                }
              })
          .invalidRequestHandler(pipeline::handleInvalid)
          .requestHandler(
              req -> {
                if (guard.requestStarted(req)) {
                  pipeline.handle(req);
                }
              })
          .listen()
          .onSuccess(
              s -> {
                if (tls != null) {
                  tls.watch(s);
                }
              });
    }
  }
}
