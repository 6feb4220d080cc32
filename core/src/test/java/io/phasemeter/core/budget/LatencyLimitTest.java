package io.phasemeter.core.budget;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class LatencyLimitTest {
  @Test
  void aLimitBecomesWholeNanosecondsRounded() {
    assertThat(LatencyLimit.nanos(250)).isEqualTo(250_000_000L);
    assertThat(LatencyLimit.nanos(1.2345678)).isEqualTo(1_234_568L);
    assertThat(LatencyLimit.nanos(0.0000004)).isZero();
    assertThat(LatencyLimit.nanos(0.0000005)).isEqualTo(1L);
  }

  @Test
  void aShareAboveOfExactlyOneMinusTheQuantileHolds() {
    assertThat(LatencyLimit.breached(0.95, 95, 100)).isFalse();
    assertThat(LatencyLimit.breached(0.95, 94, 100)).isTrue();
    assertThat(LatencyLimit.breached(0.99, 99, 100)).isFalse();
    assertThat(LatencyLimit.breached(0.99, 98, 100)).isTrue();
    assertThat(LatencyLimit.breached(0.5, 1, 2)).isFalse();
    assertThat(LatencyLimit.breached(0.5, 0, 2)).isTrue();
  }

  @Test
  void everyValueAtOrBelowHoldsAndNoDataIsNoBreach() {
    assertThat(LatencyLimit.breached(0.95, 7, 7)).isFalse();
    assertThat(LatencyLimit.breached(0.95, 0, 0)).isFalse();
  }
}
