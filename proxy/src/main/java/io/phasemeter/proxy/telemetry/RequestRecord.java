package io.phasemeter.proxy.telemetry;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.opentelemetry.api.trace.SpanId;
import io.opentelemetry.api.trace.TraceId;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * The per-request record of DESIGN.md §5 (schema {@code v} 1). It carries durations and counts
 * only: no prompt, completion, key or user id. Beyond the schema's fields it says whether the trace
 * was exported ({@code sampled}) and, on failure, the {@code error_type}.
 *
 * <p>Taken as numbers when the request ends and rendered as JSON only when someone reads it ({@code
 * GET /admin/records/{traceId}}, a feed subscriber): most records are never read, and 100,000 kept
 * records cost ~20 MB as numbers against ~100 MB as JSON strings (docs/performance.md). The strings
 * it holds are the request's own (trace and span ids) or come from configuration and enums.
 */
public final class RequestRecord {
  /** The record schema version. */
  public static final int VERSION = 1;

  private static final JsonFactory JSON = new JsonFactory();
  private static final Phase[] PHASES = Phase.all();

  // Ids as numbers: a kept record is two objects (itself and its phases), nothing for the
  // collector to copy beyond that (docs/performance.md, closed-loop p99).
  private final long traceHi;
  private final long traceLo;
  private final long spanId;
  private final String model;
  private final String pool;
  private final String route;
  private final boolean stream;
  private final int status;
  private final String outcome;
  private final String errorType;
  private final long rootNanos;
  private final long ttftNanos;
  private final long[] phaseNanos;
  private final long gatewayNanos;
  private final long unattributedNanos;
  private final long tpotNanos;
  private final long inputTokens;
  private final long outputTokens;
  private final String finishReason;
  private final String priority;
  private final int upstreamAttempts;
  private final boolean external;
  private final String keyName;
  private final boolean sampled;
  // The engine's split (issue 11): engineStatus null = not asked; "matched" with timings;
  // "missing".
  private final String engineStatus;
  private final EngineTimings engine;

  private RequestRecord(RequestContext ctx, boolean sampled) {
    String trace = ctx.traceId();
    this.traceHi = Long.parseUnsignedLong(trace, 0, 16, 16);
    this.traceLo = Long.parseUnsignedLong(trace, 16, 32, 16);
    this.spanId = Long.parseUnsignedLong(ctx.spanId(), 0, 16, 16);
    this.model = ctx.modelLabel();
    this.pool = ctx.poolName() == null ? ProxyMetrics.NO_POOL : ctx.poolName();
    this.route = ctx.route().path();
    this.stream = ctx.streaming();
    this.status = ctx.status();
    this.outcome = ctx.outcome().label();
    this.errorType = ctx.errorType();
    this.rootNanos = ctx.rootNanos();
    this.ttftNanos = ctx.serverTtftNanos();
    this.phaseNanos = new long[PHASES.length];
    for (int i = 0; i < PHASES.length; i++) {
      phaseNanos[i] = ctx.phaseNanos(PHASES[i]);
    }
    this.gatewayNanos = ProxyMetrics.gatewayNanos(ctx);
    this.unattributedNanos = ctx.unattributedNanos();
    this.tpotNanos = ctx.tpotNanos();
    this.inputTokens = ctx.inputTokens();
    this.outputTokens = ctx.outputTokens();
    this.finishReason = ctx.finishReason();
    this.priority = ctx.priority().label();
    this.upstreamAttempts = ctx.upstreamAttempts();
    this.external = ctx.external();
    this.keyName = ctx.keyName();
    this.sampled = sampled;
    this.engineStatus = null;
    this.engine = null;
  }

  private RequestRecord(RequestRecord r, String engineStatus, EngineTimings engine) {
    this.traceHi = r.traceHi;
    this.traceLo = r.traceLo;
    this.spanId = r.spanId;
    this.model = r.model;
    this.pool = r.pool;
    this.route = r.route;
    this.stream = r.stream;
    this.status = r.status;
    this.outcome = r.outcome;
    this.errorType = r.errorType;
    this.rootNanos = r.rootNanos;
    this.ttftNanos = r.ttftNanos;
    this.phaseNanos = r.phaseNanos;
    this.gatewayNanos = r.gatewayNanos;
    this.unattributedNanos = r.unattributedNanos;
    this.tpotNanos = r.tpotNanos;
    this.inputTokens = r.inputTokens;
    this.outputTokens = r.outputTokens;
    this.finishReason = r.finishReason;
    this.priority = r.priority;
    this.upstreamAttempts = r.upstreamAttempts;
    this.external = r.external;
    this.keyName = r.keyName;
    this.sampled = r.sampled;
    this.engineStatus = engineStatus;
    this.engine = engine;
  }

  /** The record of a finished request; {@code sampled} says whether its trace was exported. */
  public static RequestRecord of(RequestContext ctx, boolean sampled) {
    return new RequestRecord(ctx, sampled);
  }

  /**
   * The record with what the engine said about it: with {@code timings}, {@code engine_queue},
   * {@code prefill} and {@code decode} in {@code phases_ms} (those the engine reported), {@code
   * "engine_status":"matched"} and {@code engine} with the engine's {@code ttft_ms} and {@code
   * e2e_ms}; without (null), {@code "engine_status":"missing"} and {@code "engine":null}. Every
   * other field stays as it was.
   */
  public RequestRecord withEngine(EngineTimings timings) {
    return new RequestRecord(this, timings == null ? "missing" : "matched", timings);
  }

  /** The request's W3C trace id. */
  public String traceId() {
    return TraceId.fromLongs(traceHi, traceLo);
  }

  /** The trace id's first 16 hex digits, as a number. */
  long traceHi() {
    return traceHi;
  }

  /** The trace id's last 16 hex digits, as a number. */
  long traceLo() {
    return traceLo;
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
      if (external) {
        g.writeBooleanField("external", true);
      }
      if (keyName != null) {
        g.writeStringField("key_name", keyName);
      }
      g.writeBooleanField("sampled", sampled);
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
