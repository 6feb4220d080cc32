package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Locale;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class ServerTimingTest {
  private static String millis(long nanos) {
    return ServerTiming.appendMillis(new StringBuilder(), nanos).toString();
  }

  @Test
  void printsWhatTheFormatterPrinted() {
    long[] edges = {
      0,
      1,
      499,
      500,
      999,
      1_000,
      1_499,
      1_500,
      9_999,
      10_000,
      99_500,
      999_499,
      999_500,
      1_000_000,
      12_345_678,
      123_456_789_012L
    };
    for (long n : edges) {
      assertThat(millis(n)).as("%d ns", n).isEqualTo(String.format(Locale.ROOT, "%.3f", n / 1e6));
    }
    SplittableRandom random = new SplittableRandom(8);
    for (int i = 0; i < 100_000; i++) {
      long n = random.nextLong(0, 600_000_000_000L);
      assertThat(millis(n)).as("%d ns", n).isEqualTo(String.format(Locale.ROOT, "%.3f", n / 1e6));
    }
  }
}
