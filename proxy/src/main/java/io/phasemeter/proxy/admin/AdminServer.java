package io.phasemeter.proxy.admin;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.OtlpTraceDecoder;
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
import java.util.concurrent.atomic.AtomicBoolean;
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

  /** A trace export larger than this gets 413 (vLLM's batches are far smaller). */
  static final int MAX_TRACE_BODY_BYTES = 8 * 1024 * 1024;

  private static final String PROTOBUF = "application/x-protobuf";

  /** More feed subscribers than this get 429: each one holds a bounded buffer. */
  static final int MAX_SUBSCRIBERS = 32;

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
      BooleanSupplier ready,
      EngineSpans engine) {}

  /** Starts the admin listener. */
  public static Future<AdminServer> start(Vertx vertx, ProxyConfig.Admin config, Sources sources) {
    Router router = Router.router(vertx);
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
    AtomicBoolean warnedDisabled = new AtomicBoolean();
    router
        .post("/v1/traces")
        .handler(BodyHandler.create(false).setBodyLimit(MAX_TRACE_BODY_BYTES))
        .handler(rc -> receiveTraces(rc, sources.engine(), warnedDisabled));
    router
        .get("/admin/records/stream")
        .handler(
            rc -> {
              if (sources.records().feed().subscribers() >= MAX_SUBSCRIBERS) {
                error(rc.response(), 429, "Too many record feed subscribers.");
                return;
              }
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
            // OTLP exporters may gzip their exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
            .setDecompressionSupported(true);
    return vertx
        .createHttpServer(options)
        .requestHandler(router)
        .listen()
        .onSuccess(
            s -> {
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
   * OTLP/HTTP trace export (what vLLM's {@code --otlp-traces-endpoint} sends): protobuf only; 200
   * with an empty {@code ExportTraceServiceResponse}, 415 for another content type, 400 for a body
   * that is not an export request. Engine spans go to the matcher; every other span is ignored.
   */
  private static void receiveTraces(
      RoutingContext rc, EngineSpans engine, AtomicBoolean warnedDisabled) {
    String type = rc.request().getHeader("content-type");
    String mediaType =
        type == null ? "" : type.split(";", 2)[0].trim().toLowerCase(java.util.Locale.ROOT);
    if (!mediaType.equals(PROTOBUF)) {
      error(
          rc.response(),
          415,
          "Trace exports must be OTLP/HTTP protobuf (Content-Type: "
              + PROTOBUF
              + "; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf).");
      return;
    }
    OtlpTraceDecoder.Decoded decoded;
    try {
      decoded = OtlpTraceDecoder.decode(rc.body().buffer().getBytes());
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      error(rc.response(), 400, "The body is not an OTLP ExportTraceServiceRequest.");
      return;
    }
    if (engine != null && engine.enabled()) {
      for (OtlpTraceDecoder.EngineSpan span : decoded.engineSpans()) {
        engine.onEngineSpan(span.traceId(), span.timings());
      }
    } else if (!decoded.engineSpans().isEmpty() && warnedDisabled.compareAndSet(false, true)) {
      LOG.warn(
          "Engine spans arrive on /v1/traces but telemetry.engine_spans.enabled is false:"
              + " they are ignored");
    }
    rc.response()
        .putHeader("content-type", PROTOBUF)
        .end(
            io.vertx.core.buffer.Buffer.buffer(
                ExportTraceServiceResponse.getDefaultInstance().toByteArray()));
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
        .put("engine_spans", engineStatus(sources.engine()));
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

  private static void error(HttpServerResponse resp, int status, String message) {
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
