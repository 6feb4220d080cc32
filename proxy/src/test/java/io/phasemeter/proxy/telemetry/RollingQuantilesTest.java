package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.time.Duration;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** Rolling windows driven by hand: values enter, age through slices, and leave. */
class RollingQuantilesTest {
  private static final long MS = 1_000_000;

  @Test
  void quantilesOfKnownValuesWithinOnePercent() {
    RollingQuantiles q = new RollingQuantiles(Duration.ofSeconds(10), 6, 100);
    for (int i = 1; i <= 1000; i++) {
      q.record("m", "p", "queue", i * MS);
    }
    Histogram h = q.merged(k -> true, Duration.ofMinutes(1));
    assertThat(h.getTotalCount()).isEqualTo(1000);
    assertThat(RollingQuantiles.quantileMs(h, 0.5)).isCloseTo(500, within(5.0));
    assertThat(RollingQuantiles.quantileMs(h, 0.95)).isCloseTo(950, within(9.5));
    assertThat(RollingQuantiles.quantileMs(h, 0.99)).isCloseTo(990, within(9.9));
  }

  @Test
  void valuesAgeOutOfTheWindowSliceBySlice() {
    RollingQuantiles q = new RollingQuantiles(Duration.ofSeconds(10), 3, 100);
    q.record("m", "p", "total", 100 * MS);
    assertThat(q.merged(k -> true, Duration.ofSeconds(10)).getTotalCount()).isEqualTo(1);
    q.rotate();
    q.record("m", "p", "total", 200 * MS);
    // A 10 s window holds only the open slice; 20 s reaches back one closed slice.
    assertThat(q.merged(k -> true, Duration.ofSeconds(10)).getTotalCount()).isEqualTo(1);
    assertThat(q.merged(k -> true, Duration.ofSeconds(20)).getTotalCount()).isEqualTo(2);
    q.rotate();
    q.rotate();
    // Three slices kept: the first value is gone, the second still there.
    assertThat(q.merged(k -> true, Duration.ofMinutes(5)).getTotalCount()).isEqualTo(1);
    q.rotate();
    assertThat(q.merged(k -> true, Duration.ofMinutes(5)).getTotalCount()).isZero();
    assertThat(
            Double.isNaN(
                RollingQuantiles.quantileMs(q.merged(k -> true, Duration.ofMinutes(5)), 0.95)))
        .isTrue();
  }

  @Test
  void filtersSelectSeriesAndSummariesListOnlyLiveOnes() {
    RollingQuantiles q = new RollingQuantiles(Duration.ofSeconds(10), 6, 100);
    q.record("a", "p", "queue", 10 * MS);
    q.record("b", "p", "queue", 30 * MS);
    q.record("b", "p", "ttft", 50 * MS);
    assertThat(q.merged(k -> k.model().equals("b"), Duration.ofMinutes(1)).getTotalCount())
        .isEqualTo(2);
    assertThat(q.merged(k -> k.phase().equals("queue"), Duration.ofMinutes(1)).getTotalCount())
        .isEqualTo(2);
    var summaries = q.summaries(Duration.ofMinutes(1));
    assertThat(summaries).hasSize(3);
    assertThat(summaries.get(new RollingQuantiles.Key("b", "p", "ttft")).p50())
        .isCloseTo(50, within(0.5));
  }

  @Test
  void theNumberOfSeriesIsBounded() {
    RollingQuantiles q = new RollingQuantiles(Duration.ofSeconds(10), 6, 10);
    for (int i = 0; i < 1000; i++) {
      q.record("model-" + i, "p", "queue", MS);
    }
    assertThat(q.summaries(Duration.ofMinutes(1))).hasSize(10);
  }
}
