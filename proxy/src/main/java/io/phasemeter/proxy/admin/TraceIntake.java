package io.phasemeter.proxy.admin;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.opentelemetry.proto.collector.trace.v1.ExportTracePartialSuccess;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.OtlpTraceDecoder;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.ext.web.RoutingContext;
import java.io.ByteArrayInputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipException;

/**
 * {@code POST /v1/traces}: the OTLP/HTTP trace export that vLLM's {@code --otlp-traces-endpoint}
 * sends, protobuf only, identity or gzip. While {@code telemetry.engine_spans.enabled} is false
 * nothing of the body is read (404, connection closed). When on, the body is bounded by {@code
 * max_body_bytes} before and after gzip is undone (413), decoded on a worker thread without
 * building a message per span ({@link OtlpTraceDecoder}), and past {@code max_spans} spans the rest
 * are refused with OTLP's partial success ({@code rejected_spans}), so that the exporter neither
 * retries them nor fails.
 *
 * <p>Registers {@code llm_engine_span_exports_total} by {@code result} and {@code
 * llm_engine_spans_refused_total}.
 */
final class TraceIntake {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(TraceIntake.class);
  private static final String PROTOBUF = "application/x-protobuf";

  /**
   * Exports received and decoded at once; more get 503 with {@code Retry-After}, which OTLP
   * exporters retry with back-off. A place is held from the head until the decode is done, even if
   * the client leaves, and a body is held at most twice while it is decoded (as received and as
   * copied for the worker), so the intake takes at most 8 × {@code max_body_bytes} of heap,
   * whatever the number of connections. One engine sends one batch at a time.
   */
  static final int MAX_RECEIVING = 4;

  /** How an export request ended. */
  enum Result {
    /** Every span was read. */
    ACCEPTED,
    /** Spans past {@code max_spans} were refused (200 with partial success). */
    PARTIAL,
    /** Engine spans are off: nothing was read (404). */
    DISABLED,
    /** Not protobuf, or an encoding other than gzip (415). */
    UNSUPPORTED,
    /** {@link #MAX_RECEIVING} exports were being received already (503, retried by exporters). */
    BUSY,
    /** Over {@code max_body_bytes}, sent or inflated (413). */
    TOO_LARGE,
    /** Not an {@code ExportTraceServiceRequest}, or broken gzip (400). */
    MALFORMED
  }

  private final EngineSpans engine;
  private final ProxyConfig.EngineSpans config;
  private final Map<Result, Counter> exports = new EnumMap<>(Result.class);
  private final Counter refusedSpans;
  private final AtomicBoolean warnedDisabled = new AtomicBoolean();
  private final java.util.concurrent.atomic.AtomicInteger receiving =
      new java.util.concurrent.atomic.AtomicInteger();
  private final Function<Callable<OtlpTraceDecoder.Decoded>, Future<OtlpTraceDecoder.Decoded>>
      decoder;

  /** The routing context's key for the request's place among {@link #MAX_RECEIVING}. */
  private static final String SLOT = "phasemeter.trace-intake-slot";

  /** One request's place among those being received and decoded; given back once. */
  private final class Slot {
    private final AtomicBoolean held = new AtomicBoolean(true);
    // Event loop only: set when the decode is handed to a worker.
    private boolean decoding;

    void release() {
      if (held.compareAndSet(true, false)) {
        receiving.decrementAndGet();
      }
    }
  }

  TraceIntake(
      Vertx vertx, EngineSpans engine, ProxyConfig.EngineSpans config, MeterRegistry registry) {
    this(engine, config, registry, vertx::executeBlocking);
  }

  /** As above, decoding with {@code decoder} (tests hold decodes open with it). */
  TraceIntake(
      EngineSpans engine,
      ProxyConfig.EngineSpans config,
      MeterRegistry registry,
      Function<Callable<OtlpTraceDecoder.Decoded>, Future<OtlpTraceDecoder.Decoded>> decoder) {
    this.decoder = decoder;
    this.engine = engine;
    this.config = config;
    for (Result r : Result.values()) {
      exports.put(
          r,
          Counter.builder("llm.engine.span.exports")
              .tag("result", r.name().toLowerCase(Locale.ROOT))
              .description("OTLP trace export requests received on POST /v1/traces, by outcome")
              .register(registry));
    }
    this.refusedSpans =
        Counter.builder("llm.engine.spans.refused")
            .description(
                "Spans refused past telemetry.engine_spans.max_spans in one export (partial"
                    + " success)")
            .register(registry);
  }

  /** The body bound of the route: requests past it never reach {@link #handle}. */
  int maxBodyBytes() {
    return config.maxBodyBytes();
  }

  /** Whether exports are read at all. */
  boolean enabled() {
    return engine != null && engine.enabled() && config.enabled();
  }

  /**
   * Checks what can be checked before the body is read: that intake is on, and the media type and
   * encoding. Answers and returns false when the request is refused.
   */
  boolean accepts(RoutingContext rc) {
    if (!enabled()) {
      if (warnedDisabled.compareAndSet(false, true)) {
        LOG.warn(
            "Spans arrive on /v1/traces but telemetry.engine_spans.enabled is false: they are"
                + " refused (404) unread");
      }
      refuse(
          rc,
          Result.DISABLED,
          404,
          "Engine spans are off (telemetry.engine_spans.enabled: false): /v1/traces reads"
              + " nothing.");
      return false;
    }
    String type = rc.request().getHeader("content-type");
    String mediaType = type == null ? "" : type.split(";", 2)[0].trim().toLowerCase(Locale.ROOT);
    if (!mediaType.equals(PROTOBUF)) {
      refuse(
          rc,
          Result.UNSUPPORTED,
          415,
          "Trace exports must be OTLP/HTTP protobuf (Content-Type: "
              + PROTOBUF
              + "; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf).");
      return false;
    }
    if (encoding(rc) == null) {
      refuse(
          rc,
          Result.UNSUPPORTED,
          415,
          "Trace exports may be sent as they are or gzip-compressed (Content-Encoding: gzip).");
      return false;
    }
    if (receiving.incrementAndGet() > MAX_RECEIVING) {
      receiving.decrementAndGet();
      rc.response().putHeader("retry-after", "1");
      refuse(
          rc,
          Result.BUSY,
          503,
          "Already receiving " + MAX_RECEIVING + " trace exports; retry shortly.");
      return false;
    }
    Slot slot = new Slot();
    rc.put(SLOT, slot);
    // A request that ends before its decode starts gives its place back then; one being decoded,
    // only when the decode is done, so that a client cannot leave to queue more decodes.
    rc.addEndHandler(
        v -> {
          if (!slot.decoding) {
            slot.release();
          }
        });
    return true;
  }

  /** The body was read whole (within {@code max_body_bytes}): decode it off the event loop. */
  void handle(RoutingContext rc) {
    Slot slot = rc.get(SLOT);
    if (rc.response().ended() || rc.response().closed()) {
      slot.release();
      return;
    }
    // An empty body is an empty export (OTLP allows it): Vert.x Web gives no buffer for it.
    Buffer received = rc.body().buffer();
    byte[] body = received == null ? new byte[0] : received.getBytes();
    slot.decoding = true;
    boolean gzip = "gzip".equals(encoding(rc));
    decoder
        .apply(() -> decode(body, gzip))
        .onComplete(
            ar -> {
              slot.release();
              if (rc.response().ended() || rc.response().closed()) {
                return;
              }
              if (ar.failed()) {
                if (ar.cause() instanceof TooLarge) {
                  tooLarge(rc);
                } else {
                  refuse(
                      rc,
                      Result.MALFORMED,
                      400,
                      gzip
                          ? "The body is not a gzip-compressed OTLP ExportTraceServiceRequest."
                          : "The body is not an OTLP ExportTraceServiceRequest.");
                }
                return;
              }
              OtlpTraceDecoder.Decoded decoded = ar.result();
              for (OtlpTraceDecoder.EngineSpan span : decoded.engineSpans()) {
                engine.onEngineSpan(span.traceId(), span.timings());
              }
              ExportTraceServiceResponse.Builder response = ExportTraceServiceResponse.newBuilder();
              if (decoded.refused() > 0) {
                exports.get(Result.PARTIAL).increment();
                refusedSpans.increment(decoded.refused());
                response.setPartialSuccess(
                    ExportTracePartialSuccess.newBuilder()
                        .setRejectedSpans(decoded.refused())
                        .setErrorMessage(
                            "at most "
                                + config.maxSpans()
                                + " spans are read from one export"
                                + " (telemetry.engine_spans.max_spans)"));
              } else {
                exports.get(Result.ACCEPTED).increment();
              }
              rc.response()
                  .putHeader("content-type", PROTOBUF)
                  .end(Buffer.buffer(response.build().toByteArray()));
            });
  }

  /** A body over {@code max_body_bytes}: 413, connection closed (the rest is never read). */
  void tooLarge(RoutingContext rc) {
    refuse(
        rc,
        Result.TOO_LARGE,
        413,
        "A trace export may hold at most "
            + config.maxBodyBytes()
            + " bytes, gzip undone (telemetry.engine_spans.max_body_bytes).");
  }

  private OtlpTraceDecoder.Decoded decode(byte[] body, boolean gzip) throws IOException {
    if (!gzip) {
      return OtlpTraceDecoder.decode(body, config.maxSpans());
    }
    try (InputStream in =
        new Bounded(new GZIPInputStream(new ByteArrayInputStream(body)), config.maxBodyBytes())) {
      return OtlpTraceDecoder.decode(in, config.maxSpans());
    } catch (ZipException | java.io.EOFException e) {
      throw new com.google.protobuf.InvalidProtocolBufferException(e.getMessage());
    }
  }

  /** The request's content coding: "" (none), "gzip", or null for one not accepted. */
  private static String encoding(RoutingContext rc) {
    String e = rc.request().getHeader("content-encoding");
    if (e == null || e.isBlank() || e.trim().equalsIgnoreCase("identity")) {
      return "";
    }
    return e.trim().equalsIgnoreCase("gzip") ? "gzip" : null;
  }

  private void refuse(RoutingContext rc, Result result, int status, String message) {
    exports.get(result).increment();
    // The body may still be on its way: answer, and close rather than read the rest.
    rc.response().putHeader("connection", "close");
    AdminServer.error(rc.response(), status, message);
  }

  /** Thrown when an inflated body passes its bound. */
  private static final class TooLarge extends IOException {
    TooLarge() {
      super("inflated body over the limit");
    }
  }

  /** Reads at most {@code max} bytes from {@code in}; one more is {@link TooLarge}. */
  private static final class Bounded extends FilterInputStream {
    private long left;

    Bounded(InputStream in, long max) {
      super(in);
      this.left = max;
    }

    @Override
    public int read() throws IOException {
      int b = super.read();
      if (b >= 0 && --left < 0) {
        throw new TooLarge();
      }
      return b;
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
      int n = super.read(buf, off, len);
      if (n > 0) {
        left -= n;
        if (left < 0) {
          throw new TooLarge();
        }
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      // Skipped bytes are inflated too: count them through read().
      byte[] scratch = new byte[(int) Math.min(8192, Math.max(1, n))];
      long skipped = 0;
      while (skipped < n) {
        int r = read(scratch, 0, (int) Math.min(scratch.length, n - skipped));
        if (r < 0) {
          break;
        }
        skipped += r;
      }
      return skipped;
    }
  }
}
