package io.phasemeter.proxy.engine;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Reads vLLM's per-request spans out of an OTLP/HTTP protobuf trace export. vLLM names the span
 * {@code llm_request} and puts its timings in attributes, as seconds in doubles ({@code
 * gen_ai.latency.time_in_queue}, {@code …time_to_first_token}, {@code …time_in_model_prefill},
 * {@code …time_in_model_decode}, {@code …e2e}). Spans without any of the queue, prefill or decode
 * attributes are not engine spans and are skipped; no other attribute is read or kept.
 */
public final class OtlpTraceDecoder {
  /** vLLM's span name for one request. */
  public static final String SPAN_NAME = "llm_request";

  public static final String TIME_IN_QUEUE = "gen_ai.latency.time_in_queue";
  public static final String TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token";
  public static final String TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill";
  public static final String TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode";
  public static final String E2E = "gen_ai.latency.e2e";

  private static final HexFormat HEX = HexFormat.of();

  /** One engine span: its trace, its parent (the proxy's generation span) and its timings. */
  public record EngineSpan(String traceId, String parentSpanId, EngineTimings timings) {}

  /** What one export held: the engine spans, and how many other spans were skipped. */
  public record Decoded(List<EngineSpan> engineSpans, int skipped) {}

  private OtlpTraceDecoder() {}

  /**
   * Decodes an {@code ExportTraceServiceRequest}.
   *
   * @throws InvalidProtocolBufferException when {@code body} is not one
   */
  public static Decoded decode(byte[] body) throws InvalidProtocolBufferException {
    ExportTraceServiceRequest request = ExportTraceServiceRequest.parseFrom(body);
    List<EngineSpan> out = new ArrayList<>();
    int skipped = 0;
    for (ResourceSpans rs : request.getResourceSpansList()) {
      for (ScopeSpans ss : rs.getScopeSpansList()) {
        for (Span span : ss.getSpansList()) {
          EngineSpan e = engineSpan(span);
          if (e == null) {
            skipped++;
          } else {
            out.add(e);
          }
        }
      }
    }
    return new Decoded(List.copyOf(out), skipped);
  }

  private static EngineSpan engineSpan(Span span) {
    if (span.getTraceId().size() != 16) {
      return null;
    }
    long queue = -1;
    long ttft = -1;
    long prefill = -1;
    long decode = -1;
    long e2e = -1;
    for (KeyValue kv : span.getAttributesList()) {
      switch (kv.getKey()) {
        case TIME_IN_QUEUE -> queue = nanos(kv.getValue());
        case TIME_TO_FIRST_TOKEN -> ttft = nanos(kv.getValue());
        case TIME_IN_MODEL_PREFILL -> prefill = nanos(kv.getValue());
        case TIME_IN_MODEL_DECODE -> decode = nanos(kv.getValue());
        case E2E -> e2e = nanos(kv.getValue());
        default -> {}
      }
    }
    EngineTimings t = new EngineTimings(queue, prefill, decode, ttft, e2e);
    if (!t.splitsGeneration()) {
      return null;
    }
    return new EngineSpan(hex(span.getTraceId()), hex(span.getParentSpanId()), t);
  }

  /** Seconds (a double, or an integer from a less careful exporter) to nanoseconds; -1 if not. */
  private static long nanos(AnyValue v) {
    double seconds =
        switch (v.getValueCase()) {
          case DOUBLE_VALUE -> v.getDoubleValue();
          case INT_VALUE -> v.getIntValue();
          default -> Double.NaN;
        };
    if (!(seconds >= 0) || Double.isInfinite(seconds)) {
      return -1;
    }
    return Math.round(seconds * 1e9);
  }

  private static String hex(ByteString bytes) {
    return bytes.isEmpty() ? null : HEX.formatHex(bytes.toByteArray());
  }
}
