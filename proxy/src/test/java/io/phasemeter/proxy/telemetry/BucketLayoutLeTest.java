package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The {@code le} text of a boundary as {@code /metrics} prints it and as Prometheus stores it when
 * it normalises labels (Go's shortest 'g' format, {@code .0} added without point or exponent).
 */
class BucketLayoutLeTest {

  @ParameterizedTest
  @CsvSource({
    "250000000, 0.25, 0.25",
    "6000000000, 6.0, 6.0",
    "100000000000, 100.0, 100.0",
    "1000000, 0.001, 0.001",
    "300000, 3.0E-4, 0.0003",
    "150000, 1.5E-4, 0.00015",
    "100000, 1.0E-4, 0.0001",
    "50000, 5.0E-5, 5e-05",
    "12345, 1.2345E-5, 1.2345e-05",
    "1000000000000000, 1000000.0, 1e+06"
  })
  void printedAndStored(long nanos, String printed, String stored) {
    assertThat(BucketLayout.le(nanos)).isEqualTo(printed);
    assertThat(BucketLayout.leNormalized(nanos)).isEqualTo(stored);
  }

  @Test
  void aMatcherTakesEitherTextWhereTheyDiffer() {
    assertThat(BucketLayout.leMatcher(250_000_000L)).isEqualTo("le=\"0.25\"");
    assertThat(BucketLayout.leMatcher(300_000L)).isEqualTo("le=~`3\\.0E-4|0\\.0003`");
    assertThat(BucketLayout.leMatcher(1_000_000_000_000_000L))
        .isEqualTo("le=~`1000000\\.0|1e\\+06`");
  }
}
