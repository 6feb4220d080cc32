package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.TreeMap;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class ConfirmationTest {

  private static TreeMap<Double, Probe> block(double... loadMargin) {
    TreeMap<Double, Probe> m = new TreeMap<>();
    for (int i = 0; i < loadMargin.length; i += 2) {
      m.put(loadMargin[i], Probes.of(i, loadMargin[i], Probe.Stage.CONFIRM, 1, loadMargin[i + 1]));
    }
    return m;
  }

  @Test
  void theCrossingIsInterpolatedBetweenTheHighestPassAndTheFailureAbove() {
    Confirmation.Block b = Confirmation.crossing(1, block(10, 0.04, 11, 0.01, 12, -0.02));
    // 11 + (0.01 / 0.03) × 1
    assertThat(b.load()).isCloseTo(11.3333, Offset.offset(1e-3));
    assertThat(b.censored()).isNull();
    assertThat(b.between()).containsExactly(11.0, 12.0);
  }

  @Test
  void aBlockWithAllPassesOrAllFailuresIsCensored() {
    assertThat(Confirmation.crossing(1, block(10, 0.1, 11, 0.1)))
        .extracting(Confirmation.Block::load, Confirmation.Block::censored)
        .containsExactly(11.0, "high");
    assertThat(Confirmation.crossing(1, block(10, -0.1, 11, -0.1)))
        .extracting(Confirmation.Block::load, Confirmation.Block::censored)
        .containsExactly(10.0, "low");
  }

  @Test
  void aPassAboveAFailureTakesTheHighestPass() {
    // Noise: 11 failed, 12 passed; the block held up to 12 and nothing above failed.
    Confirmation.Block b = Confirmation.crossing(1, block(10, 0.1, 11, -0.01, 12, 0.01));
    assertThat(b.load()).isEqualTo(12.0);
    assertThat(b.censored()).isEqualTo("high");
  }

  @Test
  void theCapacityIsTheMeanOfTheBlocksWithAStudentTInterval() {
    List<Probe> probes =
        List.of(
            Probes.of(1, 10, Probe.Stage.CONFIRM, 1, 0.02),
            Probes.of(2, 11, Probe.Stage.CONFIRM, 1, -0.02),
            Probes.of(3, 11, Probe.Stage.CONFIRM, 2, -0.01),
            Probes.of(4, 10, Probe.Stage.CONFIRM, 2, 0.03),
            Probes.of(5, 10, Probe.Stage.CONFIRM, 3, 0.01),
            Probes.of(6, 11, Probe.Stage.CONFIRM, 3, -0.03));
    Confirmation.Result r = Confirmation.estimate(probes, List.of(10.0, 11.0), 3);
    // Crossings 10.5, 10.75, 10.25.
    assertThat(r.blocks()).extracting(Confirmation.Block::load).containsExactly(10.5, 10.75, 10.25);
    assertThat(r.interval().mean()).isCloseTo(10.5, Offset.offset(1e-9));
    // t(0.975, 2) = 4.303, sd 0.25: half-width 0.621.
    assertThat(r.interval().half()).isCloseTo(0.621, Offset.offset(1e-3));
    assertThat(r.passedEveryBlock()).isEqualTo(10.0);
  }

  @Test
  void theRatesAreThePassTheFailureAndOneWidthBelowAndAbove() {
    double none = Double.POSITIVE_INFINITY;
    assertThat(Confirmation.rates(20.0, 22.0, false, 0.05, none))
        .containsExactly(18.0, 20.0, 22.0, 24.0);
    assertThat(Confirmation.rates(20.0, 22.0, false, 0.05, 23)).containsExactly(18.0, 20.0, 22.0);
    assertThat(Confirmation.rates(1.0, 2.0, true, 0.05, none)).containsExactly(1.0, 2.0, 3.0);
    assertThat(Confirmation.rates(7.0, 8.0, true, 0.05, none)).containsExactly(6.0, 7.0, 8.0, 9.0);
    assertThat(Confirmation.rates(20.0, null, false, 0.05, 20)).containsExactly(19.0, 20.0);
  }
}
