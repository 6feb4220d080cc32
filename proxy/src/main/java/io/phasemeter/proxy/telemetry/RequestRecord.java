package io.phasemeter.proxy.telemetry;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.opentelemetry.api.trace.SpanId;
import io.opentelemetry.api.trace.TraceId;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.SloJudgement;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * The per-request record of docs/design.md §5 (schema {@code v} 1). It carries durations and counts
 * only: no prompt, completion, key or user id. Beyond the schema's fields it says whether the trace
 * was exported ({@code sampled}) and, on failure, the {@code error_type}.
 *
 * <p>Taken as numbers when the request ends and rendered as JSON only when someone reads it ({@code
 * GET /admin/records/{traceId}}, a feed subscriber): most records are never read. A short-lived
 * value: {@link RecordStore} keeps its fields in columns, not the object (docs/performance.md). The
 * strings it holds come from configuration, enums and the upstream's finish reason, which {@code
 * StreamChunk} maps to constants when it is one of OpenAI's.
 */
public final class RequestRecord {
  /** The record schema version. */
  public static final int VERSION = 1;

  private static final JsonFactory JSON = new JsonFactory();
  private static final Phase[] PHASES = Phase.all();

  // Ids as numbers. Package-private: the record store copies these into its columns and builds a
  // record back from them when one is read.
  final long traceHi;
  final long traceLo;
  final long spanId;
  final String model;
  final String pool;
  final String route;
  final String operation;
  final boolean stream;
  final int status;
  final String outcome;
  final String errorType;
  final long rootNanos;
  final long ttftNanos;
  final long[] phaseNanos;
  final long gatewayNanos;
  final long unattributedNanos;
  final long tpotNanos;
  final long inputTokens;
  final long outputTokens;
  final String finishReason;
  final String priority;
  final int upstreamAttempts;
  // Why the upstream was chosen (RouteReason's word), null when none was.
  final String routeReason;
  // The last attempt's new connection's set-up (connect and TLS), -1 when it reused one.
  final long upstreamConnectNanos;
  // The client's HTTP version ("1.0", "1.1", "2") and TLS version ("1.2", "1.3", null over
  // plaintext): constants, as RequestContext maps them.
  final String networkProtocolVersion;
  final String tlsProtocolVersion;
  final boolean external;
  final String keyName;
  // An allowlisted tenant or "other" (docs/design.md, "Tenants"): configuration's strings only.
  final String tenant;
  final boolean sampled;
  // The engine's split (issue 11): engineStatus null = not asked; "matched" with timings;
  // "missing".
  final String engineStatus;
  final EngineTimings engine;
  // The proxy's verdict on its objectives (issue 37), null when not counted.
  final SloJudgement slo;

  // Every field, in declaration order: of, withEngine, and the record store rebuilding a record
  // from its columns.
  RequestRecord(
      long traceHi,
      long traceLo,
      long spanId,
      String model,
      String pool,
      String route,
      String operation,
      boolean stream,
      int status,
      String outcome,
      String errorType,
      long rootNanos,
      long ttftNanos,
      long[] phaseNanos,
      long gatewayNanos,
      long unattributedNanos,
      long tpotNanos,
      long inputTokens,
      long outputTokens,
      String finishReason,
      String priority,
      int upstreamAttempts,
      String routeReason,
      long upstreamConnectNanos,
      String networkProtocolVersion,
      String tlsProtocolVersion,
      boolean external,
      String keyName,
      String tenant,
      boolean sampled,
      String engineStatus,
      EngineTimings engine,
      SloJudgement slo) {
    this.traceHi = traceHi;
    this.traceLo = traceLo;
    this.spanId = spanId;
    this.model = model;
    this.pool = pool;
    this.route = route;
    this.operation = operation;
    this.stream = stream;
    this.status = status;
    this.outcome = outcome;
    this.errorType = errorType;
    this.rootNanos = rootNanos;
    this.ttftNanos = ttftNanos;
    this.phaseNanos = phaseNanos;
    this.gatewayNanos = gatewayNanos;
    this.unattributedNanos = unattributedNanos;
    this.tpotNanos = tpotNanos;
    this.inputTokens = inputTokens;
    this.outputTokens = outputTokens;
    this.finishReason = finishReason;
    this.priority = priority;
    this.upstreamAttempts = upstreamAttempts;
    this.routeReason = routeReason;
    this.upstreamConnectNanos = upstreamConnectNanos;
    this.networkProtocolVersion = networkProtocolVersion;
    this.tlsProtocolVersion = tlsProtocolVersion;
    this.external = external;
    this.keyName = keyName;
    this.tenant = tenant;
    this.sampled = sampled;
    this.engineStatus = engineStatus;
    this.engine = engine;
    this.slo = slo;
  }

  /** The record of a finished request; {@code sampled} says whether its trace was exported. */
  public static RequestRecord of(RequestContext ctx, boolean sampled) {
    String trace = ctx.traceId();
    long[] phases = new long[PHASES.length];
    for (int i = 0; i < PHASES.length; i++) {
      phases[i] = ctx.phaseNanos(PHASES[i]);
    }
    return new RequestRecord(
        Long.parseUnsignedLong(trace, 0, 16, 16),
        Long.parseUnsignedLong(trace, 16, 32, 16),
        Long.parseUnsignedLong(ctx.spanId(), 0, 16, 16),
        ctx.modelLabel(),
        ctx.poolName() == null ? ProxyMetrics.NO_POOL : ctx.poolName(),
        ctx.route().path(),
        ctx.route().operation(),
        ctx.streaming(),
        ctx.status(),
        ctx.outcome().label(),
        ctx.errorType(),
        ctx.rootNanos(),
        ctx.serverTtftNanos(),
        phases,
        ProxyMetrics.gatewayNanos(ctx),
        ctx.unattributedNanos(),
        ctx.tpotNanos(),
        ctx.inputTokens(),
        ctx.outputTokens(),
        ctx.finishReason(),
        ctx.priority().label(),
        ctx.upstreamAttempts(),
        ctx.routeReason() == null ? null : ctx.routeReason().word(),
        ctx.upstreamConnectNanos(),
        ctx.protocolVersion(),
        ctx.tlsVersion(),
        ctx.external(),
        ctx.keyName(),
        ctx.tenant(),
        sampled,
        null,
        null,
        ctx.slo());
  }

  /**
   * The record with what the engine said about it: with {@code timings}, {@code engine_queue},
   * {@code prefill} and {@code decode} in {@code phases_ms} (those the engine reported), {@code
   * "engine_status":"matched"} and {@code engine} with the engine's {@code ttft_ms} and {@code
   * e2e_ms}; without (null), {@code "engine_status":"missing"} and {@code "engine":null}. Every
   * other field stays as it was.
   */
  public RequestRecord withEngine(EngineTimings timings) {
    return new RequestRecord(
        traceHi,
        traceLo,
        spanId,
        model,
        pool,
        route,
        operation,
        stream,
        status,
        outcome,
        errorType,
        rootNanos,
        ttftNanos,
        phaseNanos,
        gatewayNanos,
        unattributedNanos,
        tpotNanos,
        inputTokens,
        outputTokens,
        finishReason,
        priority,
        upstreamAttempts,
        routeReason,
        upstreamConnectNanos,
        networkProtocolVersion,
        tlsProtocolVersion,
        external,
        keyName,
        tenant,
        sampled,
        timings == null ? "missing" : "matched",
        timings,
        slo);
  }

  /** The request's W3C trace id. */
  public String traceId() {
    return TraceId.fromLongs(traceHi, traceLo);
  }

  /** Renders the record as one line of JSON. */
  public String json() {
    StringWriter out = new StringWriter(640);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeNumberField("v", VERSION);
      g.writeStringField("trace_id", traceId());
      g.writeStringField("span_id", SpanId.fromLong(spanId));
      g.writeStringField("model", model);
      g.writeStringField("pool", pool);
      g.writeStringField("route", route);
      if (operation != null) {
        g.writeStringField("operation", operation);
      }
      g.writeBooleanField("stream", stream);
      g.writeNumberField("status", status);
      g.writeStringField("outcome", outcome);
      if (errorType != null) {
        g.writeStringField("error_type", errorType);
      }
      g.writeNumberField("root_ms", ms(rootNanos));
      writeMs(g, "server_ttft_ms", ttftNanos);
      g.writeObjectFieldStart("phases_ms");
      for (int i = 0; i < PHASES.length; i++) {
        if (phaseNanos[i] >= 0) {
          g.writeNumberField(PHASES[i].label(), ms(phaseNanos[i]));
        }
      }
      if (engine != null) {
        writeIfKnown(g, "engine_queue", engine.queueNanos());
        writeIfKnown(g, "prefill", engine.prefillNanos());
        writeIfKnown(g, "decode", engine.decodeNanos());
      }
      g.writeEndObject();
      writeMs(g, "gateway_ms", gatewayNanos);
      g.writeNumberField("unattributed_ms", ms(unattributedNanos));
      writeMs(g, "tpot_ms", tpotNanos);
      g.writeObjectFieldStart("tokens");
      writeCount(g, "input", inputTokens);
      writeCount(g, "output", outputTokens);
      g.writeEndObject();
      g.writeStringField("finish_reason", finishReason);
      g.writeStringField("priority", priority);
      g.writeNumberField("upstream_attempts", upstreamAttempts);
      g.writeStringField("route_reason", routeReason);
      writeMs(g, "upstream_connect_ms", upstreamConnectNanos);
      g.writeStringField("network_protocol_version", networkProtocolVersion);
      g.writeStringField("tls_protocol_version", tlsProtocolVersion);
      if (external) {
        g.writeBooleanField("external", true);
      }
      if (keyName != null) {
        g.writeStringField("key_name", keyName);
      }
      g.writeStringField("tenant", tenant);
      g.writeBooleanField("sampled", sampled);
      writeSlo(g, slo);
      if (engineStatus != null) {
        g.writeStringField("engine_status", engineStatus);
        if (engine == null) {
          g.writeNullField("engine");
        } else {
          g.writeObjectFieldStart("engine");
          writeIfKnown(g, "ttft_ms", engine.ttftNanos());
          writeIfKnown(g, "e2e_ms", engine.e2eNanos());
          g.writeEndObject();
        }
      }
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  @Override
  public String toString() {
    return json();
  }

  /**
   * {@code "slo"}: null when the request was not counted, else the verdict, the budget (null when
   * only headers gave objectives), the objectives judged, those missed and those a header set.
   */
  private static void writeSlo(JsonGenerator g, SloJudgement slo) throws IOException {
    if (slo == null) {
      g.writeNullField("slo");
      return;
    }
    g.writeObjectFieldStart("slo");
    g.writeStringField("result", slo.result());
    g.writeStringField("objective", slo.objective());
    g.writeStringField("budget", slo.budget());
    g.writeObjectFieldStart("objectives_ms");
    for (var o : slo.objectives().list()) {
      g.writeNumberField(o.key(), o.limitMs());
    }
    g.writeEndObject();
    g.writeArrayFieldStart("missed");
    for (String k : slo.missed()) {
      g.writeString(k);
    }
    g.writeEndArray();
    g.writeArrayFieldStart("overridden");
    for (String k : slo.overridden()) {
      g.writeString(k);
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  private static void writeIfKnown(JsonGenerator g, String field, long nanos) throws IOException {
    if (nanos >= 0) {
      g.writeNumberField(field, ms(nanos));
    }
  }

  private static void writeMs(JsonGenerator g, String field, long nanos) throws IOException {
    if (nanos < 0) {
      g.writeNullField(field);
    } else {
      g.writeNumberField(field, ms(nanos));
    }
  }

  private static void writeCount(JsonGenerator g, String field, long count) throws IOException {
    if (count >= 0) {
      g.writeNumberField(field, count);
    } else {
      g.writeNullField(field);
    }
  }

  /** Milliseconds with microsecond precision. */
  static double ms(long nanos) {
    return Math.round(nanos / 1000.0) / 1000.0;
  }
}
