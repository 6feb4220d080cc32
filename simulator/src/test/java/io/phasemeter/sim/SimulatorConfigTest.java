package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class SimulatorConfigTest {

  @Test
  void defaultsAreTheDocumentedOnes() {
    SimulatorConfig d = SimulatorConfig.defaults();
    assertThat(d.host()).isEqualTo("127.0.0.1");
    assertThat(d.port()).isEqualTo(8000);
    assertThat(d.models()).containsExactly("sim-llama");
    assertThat(d.slots()).isEqualTo(16);
    assertThat(d.maxQueue()).isEqualTo(10_000);
    assertThat(d.prefillTokensPerSecond()).isEqualTo(20_000);
    assertThat(d.decodeStepMs()).isEqualTo(20);
    assertThat(d.decodeStepGrowth()).isEqualTo(0.02);
    assertThat(d.defaultMaxTokens()).isEqualTo(256);
    assertThat(d.maxModelLen()).isEqualTo(65_536);
    assertThat(d.seed()).isEqualTo(42);
    assertThat(d.errorRate() + d.stallRate() + d.disconnectRate()).isZero();
    assertThat(d.stepClock()).isEqualTo(SimulatorConfig.StepClock.PER_SEQUENCE);
  }

  @Test
  void stepClockParsesItsFlagValues() {
    assertThat(SimulatorConfig.StepClock.parse("shared"))
        .isEqualTo(SimulatorConfig.StepClock.SHARED);
    assertThat(SimulatorConfig.StepClock.parse("Per-Sequence"))
        .isEqualTo(SimulatorConfig.StepClock.PER_SEQUENCE);
    assertThatThrownBy(() -> SimulatorConfig.StepClock.parse("global"))
        .hasMessageContaining("--step-clock must be per-sequence or shared");
    SimulatorConfig d = SimulatorConfig.defaults();
    assertThatThrownBy(() -> d.withDecodeStepMs(0).withStepClock(SimulatorConfig.StepClock.SHARED))
        .hasMessageContaining("--step-clock shared needs --decode-step-ms above 0");
    assertThat(d.withDecodeStepMs(0).stepClock()).isEqualTo(SimulatorConfig.StepClock.PER_SEQUENCE);
  }

  @Test
  void withersChangeOneField() {
    SimulatorConfig c = SimulatorConfig.defaults().withPort(0).withSlots(2).withSeed(5);
    assertThat(c.port()).isZero();
    assertThat(c.slots()).isEqualTo(2);
    assertThat(c.seed()).isEqualTo(5);
    assertThat(c.models()).isEqualTo(SimulatorConfig.defaults().models());
  }

  @Test
  void badValuesNameTheFlag() {
    SimulatorConfig d = SimulatorConfig.defaults();
    assertThatThrownBy(() -> d.withSlots(0)).hasMessageContaining("--slots");
    assertThatThrownBy(() -> d.withPort(70000)).hasMessageContaining("--port");
    assertThatThrownBy(() -> d.withModels(List.of())).hasMessageContaining("--model");
    assertThatThrownBy(() -> d.withPrefillTokensPerSecond(0))
        .hasMessageContaining("--prefill-tokens-per-s");
    assertThatThrownBy(() -> d.withDecodeStepMs(-1)).hasMessageContaining("--decode-step-ms");
    assertThatThrownBy(() -> d.withErrorRate(1.5)).hasMessageContaining("--error-rate");
    assertThatThrownBy(() -> d.withErrorRate(0.6).withStallRate(0.6))
        .hasMessageContaining("must not exceed 1");
    assertThatThrownBy(() -> d.withMaxModelLen(100)).hasMessageContaining("--default-max-tokens");
    assertThatThrownBy(() -> d.withOtlpTracesEndpoint("collector:4318"))
        .hasMessageContaining("--otlp-traces-endpoint");
  }

  @Test
  void engineSpansAreOffUnlessAnEndpointIsGiven() {
    assertThat(SimulatorConfig.defaults().otlpTracesEndpoint()).isNull();
    assertThat(SimulatorConfig.defaults().withOtlpTracesEndpoint(" ").otlpTracesEndpoint())
        .isNull();
    assertThat(
            SimulatorConfig.defaults()
                .withOtlpTracesEndpoint("http://127.0.0.1:9464/v1/traces")
                .otlpTracesEndpoint())
        .isEqualTo("http://127.0.0.1:9464/v1/traces");
  }
}
