package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.join.JoinerTest;
import io.phasemeter.load.join.Pair;
import org.junit.jupiter.api.Test;

/** A request is SLOW above twice the run's client_total p99, and only once there is a p99. */
class SlowThresholdTest {

  private static void add(PhaseStats stats, int n, long totalMs) {
    for (int i = 0; i < n; i++) {
      stats.add(new Pair(JoinerTest.client("t" + i, totalMs), null));
    }
  }

  @Test
  void thereIsNoThresholdBeforeAHundredSuccesses() {
    PhaseStats stats = new PhaseStats();
    add(stats, 99, 10);
    SlowThreshold t = new SlowThreshold(stats);
    for (int i = 0; i < 99; i++) {
      assertThat(t.p99Ms()).isNaN();
    }
    assertThat(SlowThreshold.slow(JoinerTest.client("x", 1_000), Double.NaN)).isFalse();
  }

  @Test
  void theThresholdIsTwiceTheP99OfTheRunSoFar() {
    PhaseStats stats = new PhaseStats();
    add(stats, 200, 10);
    SlowThreshold t = new SlowThreshold(stats);
    double p99 = Double.NaN;
    for (int i = 0; i < 100; i++) {
      p99 = t.p99Ms();
    }
    // Two significant digits: within 1 % of the 10 ms every request took.
    assertThat(p99).isBetween(9.9, 10.1);
    assertThat(SlowThreshold.slow(JoinerTest.client("a", 21), p99)).isTrue();
    assertThat(SlowThreshold.slow(JoinerTest.client("b", 19), p99)).isFalse();
  }

  @Test
  void theLineNamesTheTraceTheTimeAndTheThreshold() {
    assertThat(LiveReport.notableLine(JoinerTest.client("abc", 25), 10.0))
        .isEqualTo("  SLOW trace=abc client_total=25.0 ms (> 2 × p99 10.0 ms)");
  }
}
