package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * The search's decisions against deployments whose capacity is known: a fake prober whose margin is
 * a function of the load, no runs and no clock.
 */
class CapacitySearchTest {

  /** A prober from a margin function; it records what was asked. */
  private static final class Fake implements CapacitySearch.Prober {
    final DoubleUnaryOperator margin;
    final List<String> asked = new ArrayList<>();
    int limit = Integer.MAX_VALUE;
    java.util.function.DoublePredicate invalidAt = x -> false;

    Fake(DoubleUnaryOperator margin) {
      this.margin = margin;
    }

    @Override
    public Probe run(double load, Probe.Stage stage, int block) {
      if (asked.size() >= limit) {
        return null;
      }
      asked.add(stage.key() + " " + Format.load(load));
      int i = asked.size();
      return invalidAt.test(load)
          ? Probes.invalid(i, load, stage, block)
          : Probes.of(i, load, stage, block, margin.applyAsDouble(load));
    }
  }

  private static CapacitySearch.Settings open(double start, double max, double resolution) {
    return new CapacitySearch.Settings(false, start, max, start / 64, resolution, 3, 7);
  }

  @Test
  void doublesThenBisectsToTheResolutionThenConfirmsTheBracket() {
    // Holds up to 11 req/s exactly; the margin falls linearly through zero there.
    Fake fake = new Fake(x -> (11 - x) / 11);
    CapacitySearch.Outcome o =
        new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), fake).run();

    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    assertThat(fake.asked.subList(0, 5))
        .containsExactly("double 1", "double 2", "double 4", "double 8", "double 16");
    assertThat(fake.asked.subList(5, 9))
        .containsExactly("bisect 12", "bisect 10", "bisect 11", "bisect 11.5");
    assertThat(o.pass()).isEqualTo(11.0);
    assertThat(o.fail()).isEqualTo(11.5);
    assertThat((o.fail() - o.pass()) / o.fail()).isLessThanOrEqualTo(0.05);
    // The pass, the failure and one bracket width below and above, three blocks of each.
    assertThat(o.confirmRates()).containsExactly(10.5, 11.0, 11.5, 12.0);
    assertThat(o.probes().stream().filter(p -> p.stage() == Probe.Stage.CONFIRM)).hasSize(12);
    // Every block crosses at 11: margin 0 at 11 passes, 11.5 fails.
    assertThat(o.confirmation().interval().mean()).isEqualTo(11.0);
    assertThat(o.confirmation().passedEveryBlock()).isEqualTo(11.0);
  }

  @Test
  void theConfirmationBlocksComeInASeededRandomOrder() {
    Fake a = new Fake(x -> (11 - x) / 11);
    Fake b = new Fake(x -> (11 - x) / 11);
    new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), a).run();
    new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), b).run();
    assertThat(a.asked).isEqualTo(b.asked);
    List<String> confirm = a.asked.subList(9, 21);
    List<String> inOrder = List.of("confirm 10.5", "confirm 11", "confirm 11.5", "confirm 12");
    for (int k = 0; k < 3; k++) {
      assertThat(confirm.subList(4 * k, 4 * k + 4)).containsExactlyInAnyOrderElementsOf(inOrder);
    }
    assertThat(List.of(confirm.subList(0, 4), confirm.subList(4, 8), confirm.subList(8, 12)))
        .as("not every block in the same order")
        .anyMatch(block -> !block.equals(inOrder));
  }

  @Test
  void blocksThatHoldEverywhereMoveTheBracketOnce() {
    // Holds up to 20 req/s, but the first probe at 16 fails (noise, a cold server).
    java.util.Set<Double> seen = new java.util.HashSet<>();
    Fake fake = new Fake(x -> seen.add(x) && x == 16 ? -0.1 : (20 - x) / 20);
    CapacitySearch.Outcome o =
        new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), fake).run();
    assertThat(o.notes())
        .anyMatch(n -> n.startsWith("every confirmation block held at every load"));
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    assertThat(o.pass()).isLessThanOrEqualTo(20.0);
    assertThat(o.fail()).isGreaterThan(20.0);
    assertThat(o.confirmation().interval().mean()).isBetween(19.0, 21.0);
    // Only the second confirmation's blocks count.
    assertThat(o.confirmation().blocks()).hasSize(3);
  }

  @Test
  void aFailingStartHalvesUntilAPass() {
    Fake fake = new Fake(x -> (3 - x) / 3);
    CapacitySearch.Outcome o =
        new CapacitySearch(open(16, Double.POSITIVE_INFINITY, 0.05), fake).run();
    assertThat(fake.asked.subList(0, 4))
        .containsExactly("double 16", "halve 8", "halve 4", "halve 2");
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    assertThat(o.pass()).isLessThanOrEqualTo(3.0);
    assertThat(o.fail()).isGreaterThan(3.0);
  }

  @Test
  void nothingHoldingDownToTheFloorIsSaid() {
    Fake fake = new Fake(x -> -1);
    CapacitySearch.Outcome o =
        new CapacitySearch(new CapacitySearch.Settings(false, 8, 100, 2, 0.05, 3, 1), fake).run();
    assertThat(fake.asked).containsExactly("double 8", "halve 4", "halve 2");
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.NOTHING_HOLDS);
    assertThat(o.notes()).anyMatch(n -> n.contains("no load held down to 2 req/s"));
  }

  @Test
  void aMaximumThatHoldsIsALowerBound() {
    Fake fake = new Fake(x -> 1);
    CapacitySearch.Outcome o = new CapacitySearch(open(4, 20, 0.05), fake).run();
    assertThat(fake.asked.subList(0, 4))
        .containsExactly("double 4", "double 8", "double 16", "double 20");
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.AT_LEAST);
    assertThat(o.fail()).isNull();
    assertThat(o.confirmRates()).containsExactly(19.0, 20.0);
    Capacity c = Capacity.of(o);
    assertThat(c.atLeast()).isTrue();
    assertThat(c.rate()).isEqualTo(20.0);
  }

  @Test
  void theClosedModelMovesInWholeNumbersUntilTheBracketIsOneWide() {
    Fake fake = new Fake(x -> x <= 6 ? 0.5 : -0.5);
    CapacitySearch.Outcome o =
        new CapacitySearch(
                new CapacitySearch.Settings(true, 1, Double.POSITIVE_INFINITY, 1, 0.05, 3, 1), fake)
            .run();
    assertThat(o.pass()).isEqualTo(6.0);
    assertThat(o.fail()).isEqualTo(7.0);
    assertThat(o.probes()).allMatch(p -> p.load() == Math.rint(p.load()));
    assertThat(o.confirmRates()).containsExactly(5.0, 6.0, 7.0, 8.0);
  }

  @Test
  void anInvalidProbeIsRepeatedOnceThenTheBisectionStopsThere() {
    Fake fake = new Fake(x -> (11 - x) / 11);
    fake.invalidAt = x -> x == 12;
    CapacitySearch.Outcome o =
        new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), fake).run();
    assertThat(fake.asked.subList(5, 7)).containsExactly("bisect 12", "bisect 12");
    assertThat(o.notes()).anyMatch(n -> n.contains("the bisection stopped at 12 req/s"));
    // The bracket stays 8–16; the confirmation still runs around it.
    assertThat(o.pass()).isEqualTo(8.0);
    assertThat(o.fail()).isEqualTo(16.0);
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
  }

  @Test
  void runningOutOfTimeStopsWithTheBracketSoFar() {
    Fake fake = new Fake(x -> (11 - x) / 11);
    fake.limit = 6;
    CapacitySearch.Outcome o =
        new CapacitySearch(open(1, Double.POSITIVE_INFINITY, 0.05), fake).run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.OUT_OF_TIME);
    assertThat(o.pass()).isEqualTo(8.0);
    assertThat(o.fail()).isEqualTo(12.0);
    assertThat(o.confirmation()).isNull();
  }

  @Test
  void aFatalFirstProbeStopsTheSearch() {
    CapacitySearch.Prober fatal =
        (load, stage, block) ->
            new Probe(
                1,
                load,
                stage,
                block,
                Probe.Verdict.INVALID,
                List.of("no request succeeded"),
                Double.NaN,
                java.util.Map.of(),
                Double.NaN,
                Double.NaN,
                Double.NaN,
                Double.NaN,
                java.util.Map.of(),
                List.of(),
                java.nio.file.Path.of("p"),
                4,
                true,
                List.of());
    CapacitySearch.Outcome o = new CapacitySearch(open(1, 10, 0.05), fatal).run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FATAL);
    assertThat(o.probes()).hasSize(1);
  }

  @Test
  void settingsAreChecked() {
    assertThatThrownBy(() -> open(10, 5, 0.05)).hasMessageContaining("--max-rate (5)");
    assertThatThrownBy(() -> open(1, 5, 0)).hasMessageContaining("--resolution");
  }
}
