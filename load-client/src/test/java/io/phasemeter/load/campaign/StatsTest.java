package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;

class StatsTest {

  @Test
  void threeRepeatsGiveTheStudentTIntervalComputedByHand() {
    // mean 12, s = 2, t(0.975, 2) = 4.3027 (the table's 4.30), half = 4.3027 · 2 / √3 = 4.9683.
    Stats.Interval i = Stats.of(List.of(10.0, 12.0, 14.0));
    assertThat(i.n()).isEqualTo(3);
    assertThat(i.mean()).isEqualTo(12.0);
    assertThat(i.sd()).isCloseTo(2.0, within(1e-12));
    assertThat(i.t()).isCloseTo(4.3027, within(1e-4));
    assertThat(i.half()).isCloseTo(4.9683, within(1e-4));
    assertThat(i.low()).isCloseTo(7.0317, within(1e-4));
    assertThat(i.high()).isCloseTo(16.9683, within(1e-4));
  }

  @Test
  void theTQuantileShrinksTowardsTheNormalOneWithMoreRepeats() {
    assertThat(Stats.tQuantile(4)).isCloseTo(2.7764, within(1e-4));
    assertThat(Stats.tQuantile(9)).isCloseTo(2.2622, within(1e-4));
    assertThat(Stats.tQuantile(1000)).isCloseTo(1.9623, within(1e-4));
  }

  @Test
  void welchIntervalOfADifferenceMatchesTheHandComputation() {
    // A: mean 12, s² = 4, n = 3; B: mean 24, s² = 10, n = 5.
    // se = √(4/3 + 10/5) = 1.8257; df = 3.3333² / ((4/3)²/2 + 2²/4) = 5.882; t = 2.4588;
    // half = 4.4892.
    Stats.Interval a = Stats.of(List.of(10.0, 12.0, 14.0));
    Stats.Interval b = Stats.of(List.of(20.0, 22.0, 24.0, 26.0, 28.0));
    Stats.Interval d = Stats.welch(a, b);
    assertThat(d.mean()).isEqualTo(12.0);
    assertThat(d.sd()).isCloseTo(1.8257, within(1e-4));
    assertThat(d.t()).isCloseTo(2.4588, within(1e-4));
    assertThat(d.half()).isCloseTo(4.4892, within(1e-4));
  }

  @Test
  void oneValueHasNoIntervalAndNaNValuesAreLeftOut() {
    Stats.Interval one = Stats.of(List.of(5.0, Double.NaN));
    assertThat(one.n()).isEqualTo(1);
    assertThat(one.mean()).isEqualTo(5.0);
    assertThat(one.half()).isNaN();
    assertThat(Stats.of(List.of()).n()).isZero();
  }
}
