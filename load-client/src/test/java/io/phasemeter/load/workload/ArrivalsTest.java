package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ArrivalsTest {
  // 200,000 draws: the standard error of the mean gap is cv / sqrt(N) of the mean, at most
  // 2 / 447 = 0.45% (burstiness 0.25, cv 2). A 3% tolerance is over 6 standard errors away, and
  // the draws are seeded, so the check is exact and repeatable rather than flaky.
  private static final int N = 200_000;

  @Test
  void constantGapsAreExactAndDoNotDrift() {
    Arrivals a = Arrivals.constant(3);
    long sum = 0;
    for (int i = 0; i < 3_000; i++) {
      long gap = a.nextGapNanos();
      assertThat(gap).isBetween(333_333_333L, 333_333_334L);
      sum += gap;
    }
    // 3,000 gaps at 3/s are exactly 1,000 s: the rounding of each gap is carried, not summed.
    assertThat(sum).isEqualTo(1_000_000_000_000L);
  }

  @Test
  void aRampRisesLinearlyToTheRateAndStaysThere() {
    // 1,000/s reached after 2 s: 1,000 arrivals in the ramp (half the full rate's), then 1 ms gaps.
    Arrivals a = Arrivals.ramp(1000, 2);
    long at = 0;
    int inRamp = 0;
    long lastGap = 0;
    while (at < 2_000_000_000L) {
      lastGap = a.nextGapNanos();
      at += lastGap;
      inRamp++;
    }
    assertThat(inRamp).isBetween(999, 1001);
    assertThat(lastGap).isCloseTo(1_000_000L, within(2_000L));
    // N(t) = rate × t² / (2 × ramp): 62.5 arrivals by 0.5 s.
    Arrivals b = Arrivals.ramp(1000, 2);
    long t = 0;
    int early = 0;
    while ((t += b.nextGapNanos()) < 500_000_000L) {
      early++;
    }
    assertThat(early).isBetween(61, 63);
    for (int i = 0; i < 100; i++) {
      assertThat(a.nextGapNanos()).isBetween(999_999L, 1_000_001L);
    }
  }

  @Test
  void poissonMeanGapIsOneOverRate() {
    double[] stats = stats(Arrivals.poisson(50, 7));
    assertThat(stats[0]).isCloseTo(1e9 / 50, within(0.03 * 1e9 / 50));
    // Exponential: cv 1.
    assertThat(stats[1]).isCloseTo(1.0, within(0.03));
  }

  @ParameterizedTest
  @ValueSource(doubles = {0.25, 0.5, 1.0, 2.0, 8.0})
  void gammaKeepsTheMeanAndHasCvOfOneOverSqrtBurstiness(double burstiness) {
    double[] stats = stats(Arrivals.gamma(20, burstiness, 11));
    assertThat(stats[0]).isCloseTo(1e9 / 20, within(0.03 * 1e9 / 20));
    // The sample cv's standard error is below 1% of cv here (gamma kurtosis 6/k with k >= 0.25).
    assertThat(stats[1]).isCloseTo(1 / Math.sqrt(burstiness), within(0.03 / Math.sqrt(burstiness)));
  }

  @Test
  void sameSeedSameGapsOtherSeedOtherGaps() {
    Arrivals a = Arrivals.gamma(10, 0.5, 42);
    Arrivals b = Arrivals.gamma(10, 0.5, 42);
    Arrivals c = Arrivals.gamma(10, 0.5, 43);
    boolean differs = false;
    for (int i = 0; i < 1_000; i++) {
      long x = a.nextGapNanos();
      assertThat(b.nextGapNanos()).isEqualTo(x);
      differs |= c.nextGapNanos() != x;
    }
    assertThat(differs).isTrue();
    Arrivals p = Arrivals.poisson(10, 1);
    Arrivals q = Arrivals.poisson(10, 1);
    for (int i = 0; i < 1_000; i++) {
      assertThat(q.nextGapNanos()).isEqualTo(p.nextGapNanos());
    }
  }

  @Test
  void gapsAreNeverNegative() {
    Arrivals a = Arrivals.gamma(1_000, 0.1, 3);
    for (int i = 0; i < N; i++) {
      assertThat(a.nextGapNanos()).isNotNegative();
    }
  }

  @Test
  void badRatesAndBurstinessAreRefusedNamingTheFlag() {
    assertThatThrownBy(() -> Arrivals.constant(0)).hasMessageContaining("--rate");
    assertThatThrownBy(() -> Arrivals.poisson(Double.NaN, 1)).hasMessageContaining("--rate");
    assertThatThrownBy(() -> Arrivals.gamma(1, 0, 1)).hasMessageContaining("--burstiness");
    assertThatThrownBy(() -> Arrivals.gamma(1, Double.POSITIVE_INFINITY, 1))
        .hasMessageContaining("--burstiness");
  }

  /** Mean gap in nanoseconds and coefficient of variation over N draws. */
  private static double[] stats(Arrivals a) {
    double sum = 0;
    double sumSq = 0;
    for (int i = 0; i < N; i++) {
      double g = a.nextGapNanos();
      sum += g;
      sumSq += g * g;
    }
    double mean = sum / N;
    double var = sumSq / N - mean * mean;
    return new double[] {mean, Math.sqrt(var) / mean};
  }
}
