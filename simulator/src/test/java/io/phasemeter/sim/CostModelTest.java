package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The batching arithmetic, exactly, without clocks. */
class CostModelTest {
  private final CostModel model = new CostModel(20_000, 20, 0.02);

  @Test
  void prefillIsPromptOverThroughput() {
    assertThat(model.prefillNanos(20_000)).isEqualTo(1_000_000_000L);
    assertThat(model.prefillNanos(1)).isEqualTo(50_000L);
    assertThat(model.prefillNanos(0)).isZero();
  }

  @Test
  void decodeStepGrowsWithTheBatch() {
    assertThat(model.decodeStepNanos(1, -1)).isEqualTo(20_000_000L);
    assertThat(model.decodeStepNanos(2, -1)).isEqualTo(20_400_000L);
    assertThat(model.decodeStepNanos(51, -1)).isEqualTo(40_000_000L);
    assertThat(model.decodeStepNanos(0, -1))
        .as("never below a batch of one")
        .isEqualTo(20_000_000L);
  }

  @Test
  void overrideReplacesTheWholeStep() {
    assertThat(model.decodeStepNanos(10, 7.5)).isEqualTo(7_500_000L);
    assertThat(model.decodeStepNanos(10, 0)).isZero();
  }

  @Test
  void fractionalStepsAccumulateWithoutDrift() {
    CostModel fractional = new CostModel(1, 0.3, 0);
    long due = 0;
    for (int i = 0; i < 1000; i++) {
      due += fractional.decodeStepNanos(1, -1);
    }
    assertThat(due).isEqualTo(300_000_000L);
  }

  @Test
  void timerDelayNeverFiresEarly() {
    assertThat(CostModel.timerDelayMs(0, 0)).isZero();
    assertThat(CostModel.timerDelayMs(10, 5)).isZero();
    assertThat(CostModel.timerDelayMs(0, 1)).isEqualTo(1);
    assertThat(CostModel.timerDelayMs(0, 1_000_000)).isEqualTo(1);
    assertThat(CostModel.timerDelayMs(0, 1_000_001)).isEqualTo(2);
    assertThat(CostModel.timerDelayMs(500_000, 150_000_000)).isEqualTo(150);
  }
}
