package io.phasemeter.proxy.telemetry;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * The per-request record of DESIGN.md §5 (schema {@code v} 1), rendered once as JSON when the
 * request ends. It carries durations and counts only: no prompt, completion, key or user id. Beyond
 * the schema's fields it says whether the trace was exported ({@code sampled}) and, on failure, the
 * {@code error_type}.
 */
public final class RequestRecord {
  /** The record schema version. */
  public static final int VERSION = 1;

  private static final JsonFactory JSON = new JsonFactory();
  private static final ObjectMapper TREE = new ObjectMapper(JSON);

  private RequestRecord() {}

  /** Renders the record of a finished request. */
  public static String json(RequestContext ctx, boolean sampled) {
    StringWriter out = new StringWriter(512);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeNumberField("v", VERSION);
      g.writeStringField("trace_id", ctx.traceId());
      g.writeStringField("span_id", ctx.spanId());
      g.writeStringField("model", ctx.modelLabel());
      g.writeStringField("pool", ctx.poolName() == null ? ProxyMetrics.NO_POOL : ctx.poolName());
      g.writeStringField("route", ctx.route().path());
      g.writeBooleanField("stream", ctx.streaming());
      g.writeNumberField("status", ctx.status());
      g.writeStringField("outcome", ctx.outcome().label());
      if (ctx.errorType() != null) {
        g.writeStringField("error_type", ctx.errorType());
      }
      g.writeNumberField("root_ms", ms(ctx.rootNanos()));
      writeMs(g, "server_ttft_ms", ctx.serverTtftNanos());
      g.writeObjectFieldStart("phases_ms");
      for (Phase p : Phase.values()) {
        long n = ctx.phaseNanos(p);
        if (n >= 0) {
          g.writeNumberField(p.label(), ms(n));
        }
      }
      g.writeEndObject();
      long gateway = ProxyMetrics.gatewayNanos(ctx);
      writeMs(g, "gateway_ms", gateway);
      g.writeNumberField("unattributed_ms", ms(ctx.unattributedNanos()));
      writeMs(g, "tpot_ms", ctx.tpotNanos());
      g.writeObjectFieldStart("tokens");
      if (ctx.inputTokens() >= 0) {
        g.writeNumberField("input", ctx.inputTokens());
      } else {
        g.writeNullField("input");
      }
      if (ctx.outputTokens() >= 0) {
        g.writeNumberField("output", ctx.outputTokens());
      } else {
        g.writeNullField("output");
      }
      g.writeEndObject();
      g.writeStringField("finish_reason", ctx.finishReason());
      g.writeStringField("priority", ctx.priority().label());
      g.writeNumberField("upstream_attempts", ctx.upstreamAttempts());
      if (ctx.external()) {
        g.writeBooleanField("external", true);
      }
      if (ctx.keyName() != null) {
        g.writeStringField("key_name", ctx.keyName());
      }
      g.writeBooleanField("sampled", sampled);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * The record with what the engine said about it: with {@code timings}, {@code engine_queue},
   * {@code prefill} and {@code decode} in {@code phases_ms} (those the engine reported), {@code
   * "engine_status":"matched"} and {@code engine} with the engine's {@code ttft_ms} and {@code
   * e2e_ms}; without (null), {@code "engine_status":"missing"} and {@code "engine":null}. Every
   * other field stays as it was.
   */
  public static String withEngine(String json, EngineTimings timings) {
    try {
      ObjectNode record = (ObjectNode) TREE.readTree(json);
      if (timings == null) {
        record.put("engine_status", "missing");
        record.putNull("engine");
      } else {
        ObjectNode phases = (ObjectNode) record.get("phases_ms");
        putMs(phases, "engine_queue", timings.queueNanos());
        putMs(phases, "prefill", timings.prefillNanos());
        putMs(phases, "decode", timings.decodeNanos());
        record.put("engine_status", "matched");
        ObjectNode engine = record.putObject("engine");
        putMs(engine, "ttft_ms", timings.ttftNanos());
        putMs(engine, "e2e_ms", timings.e2eNanos());
      }
      return TREE.writeValueAsString(record);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void putMs(ObjectNode node, String field, long nanos) {
    if (nanos >= 0) {
      node.put(field, ms(nanos));
    }
  }

  private static void writeMs(JsonGenerator g, String field, long nanos) throws IOException {
    if (nanos < 0) {
      g.writeNullField(field);
    } else {
      g.writeNumberField(field, ms(nanos));
    }
  }

  /** Milliseconds with microsecond precision. */
  static double ms(long nanos) {
    return Math.round(nanos / 1000.0) / 1000.0;
  }
}
