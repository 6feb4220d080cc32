package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.NanoClock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * What a search costs in time: a budget no load meets ends the halving early (nothing holds, exit
 * 3, not --max-duration), a slow rate's probe lasts long enough for its requests, and the time
 * estimate keeps a probe's overhead apart from the first probe's client warm-up. An injected clock.
 */
class SearchTimeTest {

  /** A clock the test moves. */
  private static final class Clock implements NanoClock {
    long now;

    @Override
    public long nanoTime() {
      return now;
    }

    @Override
    public long toEpochNanos(long nanoTime) {
      return nanoTime;
    }

    void advance(Duration d) {
      now += d.toNanos();
    }
  }

  private static CapacitySearch.Outcome search(DoubleUnaryOperator margin, List<String> asked) {
    return new CapacitySearch(
            new CapacitySearch.Settings(false, 1, Double.POSITIVE_INFINITY, 1.0 / 64, 0.05, 3, 7),
            (load, stage, block) -> {
              asked.add(stage.key() + " " + Format.load(load));
              return Probes.of(asked.size(), load, stage, block, margin.applyAsDouble(load));
            })
        .run();
  }

  @Test
  void aBudgetNoLoadMeetsStopsTheHalvingWhenAQuarterOfTheLoadFailsAlike() {
    List<String> asked = new ArrayList<>();
    CapacitySearch.Outcome o = search(x -> -0.95, asked);
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.NOTHING_HOLDS);
    assertThat(asked).containsExactly("double 1", "halve 0.5", "halve 0.25");
    assertThat(o.notes()).anyMatch(n -> n.contains("the failure is not the load's"));
  }

  @Test
  void aFailureThatEasesWithTheLoadHalvesOn() {
    List<String> asked = new ArrayList<>();
    CapacitySearch.Outcome o = search(x -> (0.1 - x) / 0.1, asked);
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    assertThat(o.pass()).isLessThanOrEqualTo(0.1);
  }

  @Test
  void aFigureThatDoesNotFallIsNotTheLoadsEvenWithoutAMarginChange() {
    Probe.Breach high = new Probe.Breach("b", "client_ttft", 100, 0.95, 400, 1.0, 0.95);
    Probe.Breach low = new Probe.Breach("b", "client_ttft", 100, 0.95, 390, 1.0, 0.95);
    Probe up = Probes.of(1, 4, Probe.Stage.DOUBLE, 0, -0.95, java.util.Map.of(), List.of(high));
    Probe down = Probes.of(3, 1, Probe.Stage.HALVE, 0, -0.95, java.util.Map.of(), List.of(low));
    assertThat(LoadDriven.eased(down, up)).isFalse();
    Probe queued =
        Probes.of(
            3,
            1,
            Probe.Stage.HALVE,
            0,
            -0.95,
            java.util.Map.of(),
            List.of(new Probe.Breach("b", "client_ttft", 100, 0.95, 150, 1.0, 0.95)));
    assertThat(LoadDriven.eased(queued, up)).isTrue();
  }

  @Test
  void aSlowRatesProbeLastsLongEnoughForItsRequests() {
    Duration d = Duration.ofSeconds(30);
    assertThat(SearchRunner.probeDuration(10, false, d)).isEqualTo(d);
    assertThat(SearchRunner.probeDuration(0.25, false, d)).isEqualTo(Duration.ofSeconds(80));
    assertThat(SearchRunner.probeDuration(0.25, true, d)).isEqualTo(d);
  }

  @Test
  void theEstimateKeepsTheOverheadApartFromTheFirstProbesClientWarmUp() {
    Clock clock = new Clock();
    Duration warm = Duration.ofSeconds(5);
    Duration probe = Duration.ofSeconds(30);
    Duration grace = Duration.ofSeconds(2);
    ProbeTime time = new ProbeTime(clock, Duration.ofSeconds(200));
    time.start();

    // The first probe carries the client's own warm-up and floor: 60 s more, not counted.
    long t0 = clock.nanoTime();
    assertThat(time.allows(warm, probe, grace)).isTrue();
    clock.advance(Duration.ofSeconds(95));
    time.ended(t0, warm, probe, true);
    assertThat(time.overhead()).isZero();
    // 95 s gone: 37 s more fit (5 + 30 + 2), a second probe starts.
    assertThat(time.allows(warm, probe, grace)).isTrue();

    // The second drains 10 s after its measurement: that overhead is kept.
    long t1 = clock.nanoTime();
    clock.advance(Duration.ofSeconds(45));
    time.ended(t1, warm, probe, false);
    assertThat(time.overhead()).isEqualTo(Duration.ofSeconds(10).toNanos());
    // 140 s gone, 45 s expected: 185 ≤ 200.
    assertThat(time.allows(warm, probe, grace)).isTrue();
    clock.advance(Duration.ofSeconds(20));
    // 160 s gone: 205 > 200, no probe starts that would end after the maximum.
    assertThat(time.allows(warm, probe, grace)).isFalse();
    // A shorter probe still fits.
    assertThat(time.allows(warm, Duration.ofSeconds(20), grace)).isTrue();
  }
}
