package io.phasemeter.proxy.admin;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.phasemeter.proxy.ListenerGuard;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.pipeline.Connections;
import io.phasemeter.proxy.telemetry.RecordStore;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The admin listener (docs/design.md §5), separate from the public one and by default on loopback:
 * {@code /metrics} (Prometheus text, or OpenMetrics with exemplars when the scraper asks for it),
 * {@code /health/live}, {@code /health/ready}, {@code /admin/records/{traceId}}, {@code
 * /admin/records/stream}, {@code /admin/stats}, and {@code POST /v1/traces} where the engine (vLLM)
 * exports its per-request spans. With a token configured every path but health needs {@code
 * Authorization: Bearer <token>}. Without one it binds beyond loopback only when {@code
 * admin.allow_open} is set ({@link ProxyConfig.Admin}), and then says so in a warning.
 */
public final class AdminServer {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(AdminServer.class);
  private static final Pattern TRACE_ID = Pattern.compile("[0-9a-f]{32}");
  private static final String OPEN_METRICS = "application/openmetrics-text; version=1.0.0";

  /** More feed subscribers than this get 429: each one holds a bounded buffer. */
  static final int MAX_SUBSCRIBERS = 32;

  /** The routing context's key for its deadline timer. */
  private static final String DEADLINE = "phasemeter.deadline";

  private final HttpServer server;

  private AdminServer(HttpServer server) {
    this.server = server;
  }

  /** What the admin endpoints read. */
  public record Sources(
      PrometheusMeterRegistry registry,
      RecordStore records,
      RollingQuantiles quantiles,
      Supplier<JsonArray> budgetStatus,
      Supplier<JsonArray> sloStatus,
      BooleanSupplier ready,
      EngineSpans engine,
      ProxyConfig.EngineSpans engineConfig,
      Supplier<JsonArray> upstreamConnections) {}

  /**
   * Starts the admin listener, its connections and request heads bounded by {@code guard}, and
   * every request but the streaming record feed by {@code admin.receive_timeout} from its head to
   * its answer.
   */
  public static Future<AdminServer> start(
      Vertx vertx, ProxyConfig.Admin config, Sources sources, ListenerGuard guard) {
    return start(vertx, config, sources, guard, null);
  }

  /**
   * As {@link #start(Vertx, ProxyConfig.Admin, Sources, ListenerGuard)}, speaking HTTPS with {@code
   * tls} ({@code admin.tls}; null: plaintext), whose reload starts once the listener listens.
   */
  public static Future<AdminServer> start(
      Vertx vertx,
      ProxyConfig.Admin config,
      Sources sources,
      ListenerGuard guard,
      io.phasemeter.proxy.tls.ListenerTls tls) {
    Router router = Router.router(vertx);
    long deadlineMs = Math.max(1, config.receiveTimeout().toMillis());
    router.route().handler(rc -> guard(vertx, rc, guard, deadlineMs));
    byte[] token = config.token().isEmpty() ? new byte[0] : sha256(config.token());
    ExpositionFormats formats = ExpositionFormats.init();
    router
        .get("/health/live")
        .handler(rc -> json(rc.response(), 200, new JsonObject().put("status", "UP")));
    router
        .get("/health/ready")
        .handler(
            rc -> {
              boolean ready = sources.ready().getAsBoolean();
              json(
                  rc.response(),
                  ready ? 200 : 503,
                  new JsonObject().put("status", ready ? "UP" : "DOWN"));
            });
    router.route().handler(rc -> authorize(rc, token));
    router
        .get("/metrics")
        .handler(
            rc -> {
              // Text or OpenMetrics only: a protobuf writer is on the classpath too, and a
              // scraper that asks for it would get binary squeezed through a String.
              String accept = rc.request().getHeader("accept");
              String wanted =
                  accept != null && accept.contains("application/openmetrics-text")
                      ? OPEN_METRICS
                      : "text/plain; version=0.0.4";
              java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream(64 * 1024);
              try {
                sources.registry().scrape(body, wanted);
              } catch (java.io.IOException e) {
                rc.fail(e);
                return;
              }
              rc.response()
                  .putHeader("content-type", formats.findWriter(wanted).getContentType())
                  .end(io.vertx.core.buffer.Buffer.buffer(body.toByteArray()));
            });
    TraceIntake traces =
        new TraceIntake(vertx, sources.engine(), sources.engineConfig(), sources.registry());
    // Before the body is read (a route of its own: Vert.x Web wants a body handler first).
    router
        .post("/v1/traces")
        .handler(
            rc -> {
              if (traces.accepts(rc)) {
                rc.next();
              }
            });
    router
        .post("/v1/traces")
        .handler(BodyHandler.create(false).setBodyLimit(traces.maxBodyBytes()))
        .handler(traces::handle)
        .failureHandler(
            rc -> {
              if (rc.statusCode() == 413) {
                traces.tooLarge(rc);
              } else {
                rc.next();
              }
            });
    router
        .get("/admin/records/stream")
        .handler(
            rc -> {
              if (sources.records().feed().subscribers() >= MAX_SUBSCRIBERS) {
                error(rc.response(), 429, "Too many record feed subscribers.");
                return;
              }
              // The feed streams for as long as its subscriber reads: no deadline.
              vertx.cancelTimer(rc.<Long>get(DEADLINE));
              HttpServerResponse resp = rc.response();
              resp.setChunked(true)
                  .putHeader("content-type", "text/event-stream")
                  .putHeader("cache-control", "no-cache")
                  .write(": phasemeter record feed, schema v1\n\n");
              sources.records().feed().subscribe(vertx.getOrCreateContext(), resp);
            });
    router
        .get("/admin/records/:traceId")
        .handler(
            rc -> {
              String id = rc.pathParam("traceId");
              if (id == null || !TRACE_ID.matcher(id).matches()) {
                error(rc.response(), 400, "A trace id is 32 lowercase hex digits.");
                return;
              }
              String record = sources.records().get(id);
              if (record == null) {
                error(
                    rc.response(), 404, "No record for trace " + id + " (expired or never seen).");
                return;
              }
              rc.response().putHeader("content-type", "application/json").end(record);
            });
    router
        .get("/admin/stats")
        .handler(
            rc -> {
              Duration window;
              try {
                String w = rc.request().getParam("window");
                window = w == null ? Duration.ofMinutes(1) : io.phasemeter.core.Durations.parse(w);
              } catch (IllegalArgumentException e) {
                error(rc.response(), 400, e.getMessage());
                return;
              }
              json(rc.response(), 200, stats(sources, window));
            });
    router.route().last().handler(rc -> error(rc.response(), 404, "Unknown admin path."));
    HttpServerOptions options =
        new HttpServerOptions()
            .setHost(config.host())
            .setPort(config.port())
            .setTcpNoDelay(true)
            .setMaxInitialLineLength(4096)
            .setMaxHeaderSize(8192)
            // Gzip-compressed exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip) are inflated by
            // TraceIntake under its own bound; Netty's decompressor has none.
            .setDecompressionSupported(false)
            // HTTP/1.x only, as on the public listener: with cleartext HTTP/2 on, Vert.x holds a
            // new connection in its upgrade check until a whole head has arrived, out of reach of
            // the head timeout.
            .setHttp2ClearTextEnabled(false);
    if (tls != null) {
      tls.applyTo(options);
    }
    HttpServer server = vertx.createHttpServer(options);
    return server
        .connectionHandler(guard::opened)
        .requestHandler(
            req -> {
              // The router owns the response's end handler (addEndHandler): guard() forwards.
              if (guard.requestStarted(req, false)) {
                router.handle(req);
              }
            })
        .listen()
        .onSuccess(
            s -> {
              if (tls != null) {
                tls.watch(s);
              }
              if (config.open()) {
                LOG.warn(
                    "admin listener on {}:{} is open: no admin.token and admin.allow_open: true,"
                        + " so anyone who reaches it may read records, stats and metrics and post"
                        + " engine spans to /v1/traces",
                    config.host(),
                    s.actualPort());
              }
            })
        .map(AdminServer::new);
  }

  /**
   * Tells {@code guard} when the response's head is written and when it has ended (so that a {@code
   * Connection: close} answer closes, and an idle kept-alive connection is timed again), and bounds
   * the time from a request's head to its answer: a body that trickles in, or a request that
   * otherwise never completes, is answered 408 (if nothing was written yet) and its connection
   * closed. The record feed cancels the deadline once it streams.
   */
  private static void guard(Vertx vertx, RoutingContext rc, ListenerGuard guard, long ms) {
    HttpServerResponse resp = rc.response();
    long timer =
        vertx.setTimer(
            ms,
            id -> {
              if (resp.ended() || resp.closed()) {
                return;
              }
              if (!resp.headWritten()) {
                resp.putHeader("connection", "close");
                error(resp, 408, "The request was not complete within admin.receive_timeout.");
              }
              Connections.forceClose(rc.request().connection());
            });
    rc.put(DEADLINE, timer);
    rc.addHeadersEndHandler(v -> guard.headersEnded(rc.request()));
    rc.addEndHandler(
        ar -> {
          vertx.cancelTimer(timer);
          if (ar.succeeded()) {
            guard.responseEnded(rc.request());
          }
        });
    rc.next();
  }

  private static JsonObject engineStatus(EngineSpans engine) {
    if (engine == null || !engine.enabled()) {
      return new JsonObject().put("enabled", false);
    }
    EngineSpans.Stats s = engine.stats();
    double coverage = s.coverage();
    return new JsonObject()
        .put("enabled", true)
        .put("received", s.received())
        .put("matched", s.matched())
        .put("missing", s.missing())
        .put("unmatched", s.unmatched())
        .put("coverage", Double.isNaN(coverage) ? null : coverage)
        .put("held_records", s.heldRecords())
        .put("held_timings", s.heldTimings());
  }

  private static JsonObject stats(Sources sources, Duration window) {
    JsonArray series = new JsonArray();
    for (Map.Entry<RollingQuantiles.Key, RollingQuantiles.Summary> e :
        sources.quantiles().summaries(window).entrySet()) {
      RollingQuantiles.Summary s = e.getValue();
      series.add(
          new JsonObject()
              .put("model", e.getKey().model())
              .put("pool", e.getKey().pool())
              .put("phase", e.getKey().phase())
              .put("count", s.count())
              .put("p50_ms", s.p50())
              .put("p95_ms", s.p95())
              .put("p99_ms", s.p99())
              .put("max_ms", s.max()));
    }
    return new JsonObject()
        .put("window_s", window.toSeconds())
        .put("note", "latency quantiles over successful requests; 1% resolution")
        .put("record_schema", io.phasemeter.proxy.telemetry.RequestRecord.VERSION)
        .put("sampling", sources.records().policy().describe())
        .put("version", io.phasemeter.proxy.PhasemeterProxy.version())
        .put("series", series)
        .put("budgets", sources.budgetStatus().get())
        .put("slo", sources.sloStatus().get())
        .put("engine_spans", engineStatus(sources.engine()))
        .put("upstream_connections", sources.upstreamConnections().get());
  }

  private static void authorize(RoutingContext rc, byte[] token) {
    if (token.length == 0) {
      rc.next();
      return;
    }
    String header = rc.request().getHeader("authorization");
    // Digests of equal length are compared in constant time: neither the token's bytes nor its
    // length can be learnt from how long a refusal takes.
    byte[] given =
        sha256(
            header != null && header.regionMatches(true, 0, "Bearer ", 0, 7)
                ? header.substring(7).trim()
                : "");
    if (MessageDigest.isEqual(given, token)) {
      rc.next();
    } else {
      rc.response().putHeader("www-authenticate", "Bearer");
      error(rc.response(), 401, "The admin endpoints need Authorization: Bearer <admin.token>.");
    }
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  private static void json(HttpServerResponse resp, int status, JsonObject body) {
    resp.setStatusCode(status).putHeader("content-type", "application/json").end(body.toBuffer());
  }

  static void error(HttpServerResponse resp, int status, String message) {
    json(
        resp,
        status,
        new JsonObject()
            .put("error", new JsonObject().put("message", message).put("code", status)));
  }

  public int port() {
    return server.actualPort();
  }

  public Future<Void> close() {
    return server.close();
  }
}
