package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.core.Durations;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class StepsTest {
  @Test
  void parsesRatesAndDuration() {
    assertThat(Steps.parse("2, 4,8.5", "10s"))
        .containsExactly(
            new Step(2, Duration.ofSeconds(10)),
            new Step(4, Duration.ofSeconds(10)),
            new Step(8.5, Duration.ofSeconds(10)));
  }

  @Test
  void durationsTakeMillisecondsSecondsMinutesHoursAndCompounds() {
    assertThat(Durations.parsePositive("--d", "500ms")).isEqualTo(Duration.ofMillis(500));
    assertThat(Durations.parsePositive("--d", "2m")).isEqualTo(Duration.ofMinutes(2));
    assertThat(Durations.parsePositive("--d", "1h")).isEqualTo(Duration.ofHours(1));
    assertThat(Durations.parsePositive("--d", "1m30s")).isEqualTo(Duration.ofSeconds(90));
    assertThat(Durations.parsePositive("--d", "1.5s")).isEqualTo(Duration.ofMillis(1500));
  }

  @Test
  void badInputNamesTheFlag() {
    assertThatThrownBy(() -> Steps.parse("2,,4", "10s")).hasMessageContaining("--steps");
    assertThatThrownBy(() -> Steps.parse("2,0", "10s")).hasMessageContaining("--steps");
    assertThatThrownBy(() -> Steps.parse("2,x", "10s")).hasMessageContaining("--steps");
    assertThatThrownBy(() -> Steps.parse("", "10s")).hasMessageContaining("--steps");
    assertThatThrownBy(() -> Steps.parse("2", "10")).hasMessageContaining("--step-duration");
    assertThatThrownBy(() -> Steps.parse("2", "0s")).hasMessageContaining("--step-duration");
    assertThatThrownBy(() -> Steps.parse("2", "10 parsecs"))
        .hasMessageContaining("--step-duration");
  }
}
