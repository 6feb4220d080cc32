package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.client;
import static io.phasemeter.load.report.Fixtures.joined;
import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The live window records through HdrHistogram Recorders and reads exactly as the window it
 * replaced: a fresh {@link PhaseStats} per interval, fed the same requests.
 */
class PhaseWindowTest {

  /** Joined pairs with envelopes of both signs, unjoined and failed ones, and their ITL gaps. */
  private static List<Pair> requests(long seed, int n) {
    Random rnd = new Random(seed);
    List<Pair> pairs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      double root = 50 + rnd.nextDouble() * 2000;
      double env = rnd.nextGaussian() * 3; // a third of them below zero
      Pair p =
          switch (i % 10) {
            case 0 -> new Pair(client(i, i, root), null);
            case 1 -> new Pair(client(i, 0, i, root, root / 4, ErrorClass.HTTP_5XX), null);
            default -> joined(i, i, root, env);
          };
      pairs.add(p);
    }
    return pairs;
  }

  private static void feed(List<Pair> pairs, PhaseWindow window, PhaseStats old) {
    long gap = 1;
    for (Pair p : pairs) {
      window.add(p);
      old.add(p);
      gap = gap * 7 % 100_003;
      window.addItl(gap * 1000);
      old.addItl(gap * 1000);
    }
  }

  private static void assertSame(PhaseStats window, PhaseStats expected) {
    for (String name : PhaseStats.NAMES) {
      assertThat(window.summary(name)).as(name).isEqualTo(expected.summary(name));
      assertThat(window.negativeCount(name)).as(name).isEqualTo(expected.negativeCount(name));
      for (double q : new double[] {0, 0.5, 0.9, 0.99, 0.999, 1}) {
        // Boxed: NaN (nothing recorded) equals NaN.
        assertThat(Double.valueOf(window.quantileMs(name, q)))
            .as(name + " q" + q)
            .isEqualTo(Double.valueOf(expected.quantileMs(name, q)));
      }
    }
  }

  @Test
  void anIntervalReadsExactlyAsAFreshPhaseStatsFedTheSameRequests() {
    PhaseWindow window = new PhaseWindow();
    PhaseStats old = new PhaseStats();
    feed(requests(1, 2_000), window, old);

    PhaseStats w = window.interval();

    assertSame(w, old);
    assertThat(old.negativeCount("network_envelope")).isPositive();
    assertThat(w.count("network_envelope")).isEqualTo(old.count("network_envelope"));
  }

  @Test
  void eachIntervalHoldsOnlyWhatCameSinceTheLastWhileTheRunHoldsEverything() {
    PhaseWindow window = new PhaseWindow();
    PhaseStats cumulative = new PhaseStats();
    PhaseStats first = new PhaseStats();
    PhaseStats second = new PhaseStats();

    List<Pair> a = requests(2, 300);
    feed(a, window, first);
    a.forEach(cumulative::add);
    PhaseStats w1 = window.interval();
    assertSame(w1, first);
    assertThat(w1.count("client_total")).isEqualTo(first.count("client_total")).isPositive();

    List<Pair> b = requests(3, 500);
    feed(b, window, second);
    b.forEach(cumulative::add);
    PhaseStats w2 = window.interval();
    assertSame(w2, second);
    assertThat(w2.count("client_total")).isEqualTo(second.count("client_total"));
    assertThat(cumulative.count("client_total"))
        .isEqualTo(first.count("client_total") + second.count("client_total"));
  }

  @Test
  void takingAnIntervalStartsAnEmptyOne() {
    PhaseWindow window = new PhaseWindow();
    feed(requests(4, 100), window, new PhaseStats());
    window.interval();

    PhaseStats empty = window.interval();

    for (String name : PhaseStats.NAMES) {
      assertThat(empty.count(name)).as(name).isZero();
      assertThat(empty.summary(name)).isEqualTo(PhaseStats.Summary.EMPTY);
      assertThat(empty.quantileMs(name, 0.99)).isNaN();
    }
  }
}
