package io.phasemeter.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullAndEmptySource;
import org.junit.jupiter.params.provider.ValueSource;

class DurationsTest {

  @Test
  void parsesEveryUnit() {
    assertThat(Durations.parse("250ms")).isEqualTo(Duration.ofMillis(250));
    assertThat(Durations.parse("30s")).isEqualTo(Duration.ofSeconds(30));
    assertThat(Durations.parse("10m")).isEqualTo(Duration.ofMinutes(10));
    assertThat(Durations.parse("1h")).isEqualTo(Duration.ofHours(1));
  }

  @Test
  void acceptsFractionsSpacesAndUpperCase() {
    assertThat(Durations.parse("1.5s")).isEqualTo(Duration.ofMillis(1500));
    assertThat(Durations.parse(" 2 s ")).isEqualTo(Duration.ofSeconds(2));
    assertThat(Durations.parse("100MS")).isEqualTo(Duration.ofMillis(100));
  }

  @Test
  void bareNumberMeansSeconds() {
    assertThat(Durations.parse("5")).isEqualTo(Duration.ofSeconds(5));
    assertThat(Durations.parse("0.25")).isEqualTo(Duration.ofMillis(250));
  }

  @ParameterizedTest
  @NullAndEmptySource
  @ValueSource(strings = {"3 parsecs", "s", "-1s", "1d", "1s2", "abc", "1.s", ".5s"})
  void rejectsWhatIsNotADuration(String text) {
    assertThatThrownBy(() -> Durations.parse(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is not a duration");
  }

  @Test
  void formatsInTheLargestWholeUnit() {
    assertThat(Durations.format(Duration.ofMillis(250))).isEqualTo("250ms");
    assertThat(Durations.format(Duration.ofSeconds(30))).isEqualTo("30s");
    assertThat(Durations.format(Duration.ofMinutes(10))).isEqualTo("10m");
    assertThat(Durations.format(Duration.ofHours(1))).isEqualTo("1h");
    assertThat(Durations.format(Duration.ofMillis(1500))).isEqualTo("1500ms");
    assertThat(Durations.format(Duration.ofSeconds(90))).isEqualTo("90s");
    assertThat(Durations.format(Duration.ZERO)).isEqualTo("0s");
  }

  @ParameterizedTest
  @ValueSource(strings = {"250ms", "1500ms", "30s", "90s", "10m", "1h", "36h"})
  void formatRoundTrips(String text) {
    Duration d = Durations.parse(text);

    assertThat(Durations.format(d)).isEqualTo(text);
    assertThat(Durations.parse(Durations.format(d))).isEqualTo(d);
  }

  @Test
  void addsParts() {
    assertThat(Durations.parse("1m30s")).isEqualTo(Duration.ofSeconds(90));
    assertThat(Durations.parse("1h 0m 0.5s")).isEqualTo(Duration.ofMillis(3_600_500));
  }

  @Test
  void aPositiveDurationNamesTheFlagWhenItIsNotOne() {
    assertThat(Durations.parsePositive("--duration", "10s")).isEqualTo(Duration.ofSeconds(10));
    for (String bad : new String[] {"0s", "0", "10", "ten", ""}) {
      assertThatThrownBy(() -> Durations.parsePositive("--duration", bad))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage(
              "--duration must be a positive duration such as 500ms, 10s, 2m or 1m30s, got '"
                  + bad
                  + "'");
    }
  }
}
