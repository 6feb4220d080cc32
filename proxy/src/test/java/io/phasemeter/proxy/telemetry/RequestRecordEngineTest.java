package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.FinishedRequests;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/** What the engine's span adds to a record, and that it changes nothing else. */
class RequestRecordEngineTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final SdkTracerProvider TRACING = SdkTracerProvider.builder().build();
  private static final RequestRecord RECORD =
      RequestRecord.of(
          FinishedRequests.streamed(
              TRACING.get("test"), "0000000000000007000000000000012f", 64, 1, 1, 1, 1, 20, 1610, 1),
          true);

  @AfterAll
  static void closeTracing() {
    TRACING.close();
  }

  @Test
  void matchedAddsTheEnginePhasesInsideGenerationAndKeepsEverythingElse() throws Exception {
    String json =
        RECORD
            .withEngine(
                new EngineTimings(
                    1_200_000_000L, 10_500_000L, 390_000_000L, 1_210_500_000L, 1_600_500_000L))
            .json();
    ObjectNode r = (ObjectNode) JSON.readTree(json);

    assertThat(r.get("engine_status").asText()).isEqualTo("matched");
    JsonNode phases = r.get("phases_ms");
    assertThat(phases.get("engine_queue").asDouble()).isEqualTo(1200.0);
    assertThat(phases.get("prefill").asDouble()).isEqualTo(10.5);
    assertThat(phases.get("decode").asDouble()).isEqualTo(390.0);
    assertThat(phases.get("generation").asDouble())
        .as("generation stays as measured")
        .isEqualTo(1610.0);
    assertThat(r.get("engine").get("ttft_ms").asDouble()).isEqualTo(1210.5);
    assertThat(r.get("engine").get("e2e_ms").asDouble()).isEqualTo(1600.5);
    assertThat(r.get("unattributed_ms").asDouble()).isEqualTo(0.0);

    r.remove(java.util.List.of("engine_status", "engine"));
    ((ObjectNode) r.get("phases_ms"))
        .remove(java.util.List.of("engine_queue", "prefill", "decode"));
    assertThat(r).isEqualTo(JSON.readTree(RECORD.json()));
  }

  @Test
  void missingSaysSoAndAddsNoPhase() throws Exception {
    ObjectNode r = (ObjectNode) JSON.readTree(RECORD.withEngine(null).json());
    assertThat(r.get("engine_status").asText()).isEqualTo("missing");
    assertThat(r.get("engine").isNull()).isTrue();
    r.remove(java.util.List.of("engine_status", "engine"));
    assertThat(r).isEqualTo(JSON.readTree(RECORD.json()));
  }

  @Test
  void anAttributeTheEngineDidNotSendIsLeftOut() throws Exception {
    ObjectNode r =
        (ObjectNode)
            JSON.readTree(RECORD.withEngine(new EngineTimings(5_000_000L, -1, -1, -1, -1)).json());
    assertThat(r.get("phases_ms").get("engine_queue").asDouble()).isEqualTo(5.0);
    assertThat(r.get("phases_ms").has("prefill")).isFalse();
    assertThat(r.get("engine").has("e2e_ms")).isFalse();
  }
}
