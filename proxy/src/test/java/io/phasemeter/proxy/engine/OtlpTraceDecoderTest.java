package io.phasemeter.proxy.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** vLLM's {@code llm_request} span, built with the real OTLP protobuf classes, read back. */
public class OtlpTraceDecoderTest {
  public static final String TRACE = "0af7651916cd43dd8448eb211c80319c";
  public static final String PARENT = "b7ad6b7169203331";

  static KeyValue seconds(String key, double s) {
    return KeyValue.newBuilder()
        .setKey(key)
        .setValue(AnyValue.newBuilder().setDoubleValue(s))
        .build();
  }

  static KeyValue text(String key, String v) {
    return KeyValue.newBuilder()
        .setKey(key)
        .setValue(AnyValue.newBuilder().setStringValue(v))
        .build();
  }

  /** A span the way vLLM exports it: SERVER, child of the proxy's generation span, seconds. */
  public static Span vllmSpan(String traceId, double queue, double prefill, double decode) {
    return Span.newBuilder()
        .setName("llm_request")
        .setKind(Span.SpanKind.SPAN_KIND_SERVER)
        .setTraceId(ByteString.copyFrom(HexFormat.of().parseHex(traceId)))
        .setSpanId(ByteString.copyFrom(HexFormat.of().parseHex("00f067aa0ba902b7")))
        .setParentSpanId(ByteString.copyFrom(HexFormat.of().parseHex(PARENT)))
        .setStartTimeUnixNano(1_700_000_000_000_000_000L)
        .setEndTimeUnixNano(1_700_000_001_000_000_000L)
        .addAttributes(text("gen_ai.request.id", "chatcmpl-123"))
        .addAttributes(text("gen_ai.response.model", "sim-llama"))
        .addAttributes(seconds("gen_ai.latency.time_in_queue", queue))
        .addAttributes(seconds("gen_ai.latency.time_to_first_token", queue + prefill))
        .addAttributes(seconds("gen_ai.latency.time_in_model_prefill", prefill))
        .addAttributes(seconds("gen_ai.latency.time_in_model_decode", decode))
        .addAttributes(seconds("gen_ai.latency.e2e", queue + prefill + decode))
        .addAttributes(
            KeyValue.newBuilder()
                .setKey("gen_ai.usage.completion_tokens")
                .setValue(AnyValue.newBuilder().setIntValue(42)))
        .build();
  }

  public static byte[] export(Span... spans) {
    ScopeSpans.Builder scope = ScopeSpans.newBuilder();
    for (Span s : spans) {
      scope.addSpans(s);
    }
    return ExportTraceServiceRequest.newBuilder()
        .addResourceSpans(ResourceSpans.newBuilder().addScopeSpans(scope))
        .build()
        .toByteArray();
  }

  @Test
  void readsVllmsLatencyAttributesAsSecondsIntoNanoseconds() throws Exception {
    Span other =
        Span.newBuilder().setName("http get").setTraceId(ByteString.copyFrom(new byte[16])).build();
    OtlpTraceDecoder.Decoded d =
        OtlpTraceDecoder.decode(export(vllmSpan(TRACE, 1.25, 0.05, 0.5), other));

    assertThat(d.skipped()).isEqualTo(1);
    assertThat(d.engineSpans()).hasSize(1);
    OtlpTraceDecoder.EngineSpan e = d.engineSpans().get(0);
    assertThat(e.traceId()).isEqualTo(TRACE);
    assertThat(e.parentSpanId()).isEqualTo(PARENT);
    assertThat(e.timings())
        .isEqualTo(
            new EngineTimings(
                1_250_000_000L, 50_000_000L, 500_000_000L, 1_300_000_000L, 1_800_000_000L));
  }

  @Test
  void aSpanWithoutQueuePrefillOrDecodeIsNotAnEngineSpan() throws Exception {
    Span onlyE2e =
        Span.newBuilder()
            .setName("llm_request")
            .setTraceId(ByteString.copyFrom(HexFormat.of().parseHex(TRACE)))
            .addAttributes(seconds("gen_ai.latency.e2e", 1.0))
            .addAttributes(seconds("gen_ai.latency.time_in_queue", Double.NaN))
            .build();
    assertThat(OtlpTraceDecoder.decode(export(onlyE2e)).engineSpans()).isEmpty();
  }

  @Test
  void anEmptyExportIsValidAndGarbageIsNot() throws Exception {
    assertThat(OtlpTraceDecoder.decode(new byte[0]).engineSpans()).isEmpty();
    assertThatThrownBy(() -> OtlpTraceDecoder.decode(new byte[] {(byte) 0xff, 0x01, 0x02}))
        .isInstanceOf(InvalidProtocolBufferException.class);
  }

  @Test
  void pastMaxSpansTheRestAreCountedNotRead() throws Exception {
    Span other =
        Span.newBuilder().setName("http get").setTraceId(ByteString.copyFrom(new byte[16])).build();
    byte[] body =
        export(
            vllmSpan(TRACE, 1, 0.1, 0.5),
            other,
            vllmSpan("1af7651916cd43dd8448eb211c80319c", 1, 0.1, 0.5),
            vllmSpan("2af7651916cd43dd8448eb211c80319c", 1, 0.1, 0.5));
    OtlpTraceDecoder.Decoded d = OtlpTraceDecoder.decode(body, 3);
    assertThat(d.engineSpans())
        .extracting(OtlpTraceDecoder.EngineSpan::traceId)
        .containsExactly(TRACE, "1af7651916cd43dd8448eb211c80319c");
    assertThat(d.skipped()).isEqualTo(1);
    assertThat(d.refused()).isEqualTo(1);
    assertThat(d.spans()).isEqualTo(4);
    // The same export read from a stream (the gzip path) decodes the same.
    assertThat(OtlpTraceDecoder.decode(new java.io.ByteArrayInputStream(body), 3)).isEqualTo(d);
  }

  @Test
  void oddShapesAreSkippedOrRefusedNeverThrownAsAnythingButAProtobufError() throws Exception {
    // A trace id of the wrong length, an attribute key of 100 KiB, a string where seconds go.
    Span odd =
        Span.newBuilder()
            .setTraceId(ByteString.copyFrom(new byte[17]))
            .addAttributes(seconds("x".repeat(100_000), 1.0))
            .addAttributes(text(OtlpTraceDecoder.TIME_IN_QUEUE, "1.0"))
            .build();
    assertThat(OtlpTraceDecoder.decode(export(odd)).skipped()).isEqualTo(1);
    // 200,000 nested groups: protobuf's recursion limit, not a stack overflow.
    byte[] groups = new byte[200_000];
    java.util.Arrays.fill(groups, (byte) 0x0b);
    assertThatThrownBy(() -> OtlpTraceDecoder.decode(groups))
        .isInstanceOf(InvalidProtocolBufferException.class);
    // A length past the end, and a negative one.
    assertThatThrownBy(() -> OtlpTraceDecoder.decode(new byte[] {0x0a, 0x7f, 0x12}))
        .isInstanceOf(InvalidProtocolBufferException.class);
    assertThatThrownBy(
            () ->
                OtlpTraceDecoder.decode(
                    new byte[] {0x0a, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0x0f}))
        .isInstanceOf(InvalidProtocolBufferException.class);
  }
}
