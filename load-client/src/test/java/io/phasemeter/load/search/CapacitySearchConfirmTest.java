package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

/**
 * The confirmation's harder endings: every block failing at every load, a block cut short by the
 * time allowed, a closed-model crossing between two whole concurrencies. A fake prober, no runs.
 */
class CapacitySearchConfirmTest {

  /** Margin from the load; the very first probe's margin can be forced (one noisy pass). */
  private static final class Fake implements CapacitySearch.Prober {
    final DoubleUnaryOperator margin;
    final Double first;
    final List<String> asked = new ArrayList<>();
    int limit = Integer.MAX_VALUE;

    Fake(DoubleUnaryOperator margin, Double first) {
      this.margin = margin;
      this.first = first;
    }

    @Override
    public Probe run(double load, Probe.Stage stage, int block) {
      if (asked.size() >= limit) {
        return null;
      }
      asked.add(stage.key() + " " + Format.load(load));
      int i = asked.size();
      double m = i == 1 && first != null ? first : margin.applyAsDouble(load);
      return Probes.of(i, load, stage, block, m);
    }
  }

  @Test
  void aClosedSearchWhoseOnlyPassWasTheStartHoldsNothingNotACapacity() {
    // Concurrency 1 passed once; it and everything else fail from then on.
    Fake fake = new Fake(x -> -1, 1.0);
    CapacitySearch.Outcome o =
        new CapacitySearch(
                new CapacitySearch.Settings(true, 1, Double.POSITIVE_INFINITY, 1, 0.05, 3, 7), fake)
            .run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.NOTHING_HOLDS);
    Capacity c = Capacity.of(o, true);
    assertThat(c.rate()).isNaN();
    assertThat(c.ci95Low()).isNaN();
    assertThat(o.notes()).anyMatch(n -> n.startsWith("every confirmation block failed"));
  }

  @Test
  void everyBlockFailingAtEveryLoadHalvesOnBelowAndConfirmsThere() {
    // Holds up to 5 req/s; the first probe, at 10, passed by chance.
    Fake fake = new Fake(x -> (5 - x) / 5, 0.01);
    CapacitySearch.Outcome o =
        new CapacitySearch(
                new CapacitySearch.Settings(
                    false, 10, Double.POSITIVE_INFINITY, 10.0 / 64, 0.05, 3, 7),
                fake)
            .run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    assertThat(fake.asked).contains("halve 4.8");
    Capacity c = Capacity.of(o);
    assertThat(c.rate()).isCloseTo(5, Offset.offset(0.01));
    assertThat(c.rate()).isLessThan(10);
    assertThat(c.ci95Low()).isLessThanOrEqualTo(c.rate());
    // Only the last confirmation's blocks count; the earlier ones are listed.
    long counted =
        o.probes().stream().filter(p -> o.confirmation().counted().contains(p.index())).count();
    assertThat(counted).isEqualTo(3L * o.confirmRates().size());
  }

  @Test
  void aBlockCutShortByTheTimeAllowedIsNotCounted() {
    // Block 1 complete (crossing at 11), block 2 ran only its highest load (a failure).
    List<Double> rates = List.of(10.5, 11.0, 11.5, 12.0);
    List<Probe> confirm = new ArrayList<>();
    int i = 0;
    for (double r : rates) {
      confirm.add(Probes.of(++i, r, Probe.Stage.CONFIRM, 1, (11 - r) / 11));
    }
    confirm.add(Probes.of(++i, 12.0, Probe.Stage.CONFIRM, 2, -0.1));
    Confirmation.Result r = Confirmation.estimate(confirm, rates, 3);
    assertThat(r.blocks()).extracting(Confirmation.Block::block).containsExactly(1);
    assertThat(r.interval().mean()).isEqualTo(11.0);
    assertThat(r.counted()).containsExactly(1, 2, 3, 4);
  }

  @Test
  void aSearchOutOfTimeInTheConfirmationReportsOnlyCompleteBlocks() {
    Fake fake = new Fake(x -> (11 - x) / 11, null);
    fake.limit = 9 + 4 + 1; // the bracket, one block, one probe of the second
    CapacitySearch.Outcome o =
        new CapacitySearch(
                new CapacitySearch.Settings(
                    false, 1, Double.POSITIVE_INFINITY, 1.0 / 64, 0.05, 3, 7),
                fake)
            .run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.OUT_OF_TIME);
    assertThat(o.confirmation().blocks()).hasSize(1);
    Capacity c = Capacity.of(o);
    assertThat(c.rate()).isBetween(o.pass(), o.fail());
  }

  @Test
  void theClosedModelReportsAWholeConcurrencyAndKeepsTheCrossingApart() {
    // Holds up to a concurrency of 6.33: 6 passes, 7 fails, every block crosses at 6.33.
    Fake fake = new Fake(x -> (6.33 - x) / 6.33, null);
    CapacitySearch.Outcome o =
        new CapacitySearch(
                new CapacitySearch.Settings(true, 1, Double.POSITIVE_INFINITY, 1, 0.05, 3, 7), fake)
            .run();
    assertThat(o.status()).isEqualTo(CapacitySearch.Status.FOUND);
    Capacity c = Capacity.of(o, true);
    assertThat(c.crossingMean()).isCloseTo(6.33, Offset.offset(0.01));
    assertThat(c.rate()).isEqualTo(6.0);
    assertThat(c.method()).contains("whole concurrency");
  }

  @Test
  void everyBlockCensoredGivesNoInterval() {
    List<Double> rates = List.of(9.0, 10.0);
    List<Probe> confirm = new ArrayList<>();
    int i = 0;
    for (int b = 1; b <= 3; b++) {
      for (double r : rates) {
        confirm.add(Probes.of(++i, r, Probe.Stage.CONFIRM, b, 0.1));
      }
    }
    Confirmation.Result r = Confirmation.estimate(confirm, rates, 3);
    CapacitySearch.Outcome o =
        new CapacitySearch.Outcome(
            CapacitySearch.Status.AT_LEAST, confirm, 10.0, null, rates, r, List.of());
    Capacity c = Capacity.of(o);
    assertThat(c.censoredBlocks()).isEqualTo(3);
    assertThat(c.rate()).isEqualTo(10.0);
    assertThat(c.atLeast()).isTrue();
    assertThat(c.ci95Low()).isNaN();
    assertThat(c.ci95High()).isNaN();
  }
}
