package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.client;
import static io.phasemeter.load.report.Fixtures.joined;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;

class PhaseStatsTest {

  private static final Percentage ONE_PERCENT = Percentage.withPercentage(1);

  @Test
  void envelopeQuantileIsTheQuantileOfDifferencesNotTheDifferenceOfQuantiles() {
    // 100 requests, server roots 10..1000 ms. The six fastest on the server spent 300 ms on the
    // network; the rest 5 ms. The slow envelopes hide under fast server times, so
    // p95(client) − p95(server) = 955 − 950 = 5 ms, while the true p95 envelope is 300 ms.
    PhaseStats stats = PhaseStats.create();
    for (int i = 1; i <= 100; i++) {
      stats.add(joined(i, i, 10.0 * i, i <= 6 ? 300 : 5));
    }

    double differenceOfQuantiles =
        stats.quantileMs("client_total", 0.95) - stats.quantileMs("server_root", 0.95);
    assertThat(differenceOfQuantiles).isCloseTo(5, within(10.0));
    assertThat(stats.quantileMs("network_envelope", 0.95)).isCloseTo(300, ONE_PERCENT);
    assertThat(stats.summary("network_envelope").p95()).isCloseTo(300, ONE_PERCENT);
    assertThat(stats.summary("network_envelope").p50()).isCloseTo(5, ONE_PERCENT);
    assertThat(stats.negativeCount("network_envelope")).isZero();
  }

  @Test
  void negativeEnvelopesAreKeptCountedAndShown() {
    PhaseStats stats = PhaseStats.create();
    for (int i = 0; i < 100; i++) {
      stats.add(joined(i, i, 200, i < 60 ? -2 : 3));
    }

    assertThat(stats.negativeCount("network_envelope")).isEqualTo(60);
    PhaseStats.Summary s = stats.summary("network_envelope");
    assertThat(s.count()).isEqualTo(100);
    assertThat(s.p50()).isCloseTo(-2, ONE_PERCENT);
    assertThat(s.p95()).isCloseTo(3, ONE_PERCENT);
    assertThat(s.max()).isEqualTo(3, within(1e-9));
    assertThat(stats.quantileMs("network_envelope", 0)).isEqualTo(-2, within(1e-9));
    assertThat(stats.negativeCount("client_total")).isZero();
  }

  @Test
  void allNegativeEnvelopesOrderFromMostNegative() {
    PhaseStats stats = PhaseStats.create();
    for (int i = 1; i <= 100; i++) {
      stats.add(joined(i, i, 500, -i)); // envelopes −1 … −100 ms
    }
    assertThat(stats.quantileMs("network_envelope", 0.01)).isCloseTo(-100, ONE_PERCENT);
    assertThat(stats.quantileMs("network_envelope", 0.50)).isCloseTo(-51, ONE_PERCENT);
    assertThat(stats.summary("network_envelope").p99()).isCloseTo(-2, ONE_PERCENT);
    assertThat(stats.summary("network_envelope").max()).isEqualTo(-1, within(1e-9));
  }

  @Test
  void failedRequestsAreExcludedFromLatenciesButNotFromScheduleLag() {
    PhaseStats stats = PhaseStats.create();
    stats.add(new Pair(client(1, 0, 0, 100, 20, ErrorClass.NONE), null));
    stats.add(new Pair(client(2, 0, 1, 10_000, 20, ErrorClass.HTTP_5XX), null));
    stats.add(
        new Pair(
            client(3, 0, 2, 20_000, 20, ErrorClass.INVALID), Fixtures.server(3, 19_000, 5, 15)));

    assertThat(stats.summary("client_total").count()).isEqualTo(1);
    assertThat(stats.summary("client_total").max()).isEqualTo(100, within(1e-9));
    assertThat(stats.count("client_ttft")).isEqualTo(1);
    assertThat(stats.count("tpot")).isEqualTo(1);
    assertThat(stats.count("server_root")).isZero();
    assertThat(stats.count("network_envelope")).isZero();
    assertThat(stats.count("schedule_lag")).isEqualTo(3);
    assertThat(stats.quantileMs("schedule_lag", 0.5)).isCloseTo(0.2, ONE_PERCENT);
    assertThat(stats.okCount()).isEqualTo(1);
    assertThat(stats.startedCount()).isEqualTo(3);
    assertThat(stats.joinedCount()).isEqualTo(1);
    assertThat(stats.joinedOkCount()).isZero();
  }

  @Test
  void unjoinedPairsAreExcludedFromEnvelopesAndServerPhases() {
    PhaseStats stats = PhaseStats.create();
    stats.add(joined(1, 0, 100, 10));
    stats.add(joined(2, 1, 200, 10));
    stats.add(new Pair(client(3, 2, 5000), null));
    stats.add(new Pair(client(4, 3, 6000), null));

    assertThat(stats.count("client_total")).isEqualTo(4);
    for (String name :
        List.of(
            "network_envelope",
            "ttft_envelope",
            "server_root",
            "server_ttft",
            "gateway",
            "receive",
            "queue",
            "generation",
            "write",
            "unattributed")) {
      assertThat(stats.count(name)).as(name).isEqualTo(2);
    }
    assertThat(stats.summary("server_root").max()).isEqualTo(200, within(1e-9));
    assertThat(stats.summary("gateway").p50()).isCloseTo(1.0, ONE_PERCENT);
    assertThat(stats.joinCoverage()).isEqualTo(0.5);
  }

  @Test
  void quantilesAreWithinOnePercentOnKnownDistributions() {
    // Uniform 1 µs … 100 ms in 1 µs steps: the q quantile is q × 100 ms.
    PhaseStats uniform = PhaseStats.create();
    for (int us = 1; us <= 100_000; us++) {
      uniform.addItl(us * 1_000L);
    }
    for (double q : new double[] {0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999}) {
      assertThat(uniform.quantileMs("itl", q)).as("q=%s", q).isCloseTo(q * 100, ONE_PERCENT);
    }
    assertThat(uniform.summary("itl").max()).isEqualTo(100, within(1e-9));

    // Log-normal envelopes of both signs against the exact per-request quantiles.
    Random random = new Random(42);
    int n = 50_000;
    double[] envelopes = new double[n];
    PhaseStats signed = PhaseStats.create();
    for (int i = 0; i < n; i++) {
      double magnitude = Math.exp(random.nextGaussian() * 1.5 + 1);
      envelopes[i] = random.nextDouble() < 0.3 ? -magnitude : magnitude;
      signed.add(joined(i, i, 1000, envelopes[i]));
    }
    Arrays.sort(envelopes);
    for (double q : new double[] {0.01, 0.1, 0.3, 0.5, 0.9, 0.95, 0.99}) {
      double exact = envelopes[(int) Math.ceil(q * n) - 1];
      assertThat(signed.quantileMs("network_envelope", q))
          .as("q=%s", q)
          .isCloseTo(exact, Percentage.withPercentage(1));
    }
    assertThat(signed.negativeCount("network_envelope"))
        .isEqualTo(Arrays.stream(envelopes).filter(v -> v < 0).count());
  }

  @Test
  void emptyPhasesGiveNaN() {
    PhaseStats stats = PhaseStats.create();
    PhaseStats.Summary s = stats.summary("queue");
    assertThat(s.count()).isZero();
    assertThat(s.p50()).isNaN();
    assertThat(s.max()).isNaN();
    assertThat(stats.quantileMs("queue", 0.95)).isNaN();
    assertThat(stats.joinCoverage()).isNaN();
    assertThat(stats.names()).containsExactlyElementsOf(PhaseStats.NAMES).hasSize(22);
    assertThatThrownBy(() -> stats.summary("ttft")).hasMessageContaining("unknown phase: ttft");
  }

  @Test
  void windowsMergeIntoTheSameDistributionAsOneInstance() {
    Random random = new Random(7);
    List<Pair> pairs = new ArrayList<>();
    for (int i = 0; i < 3000; i++) {
      pairs.add(joined(i, i, 50 + random.nextInt(2000), random.nextInt(40) - 5));
    }
    PhaseStats whole = PhaseStats.of(pairs);
    PhaseStats cumulative = PhaseStats.create();
    for (int w = 0; w < 3; w++) {
      PhaseStats window = PhaseStats.of(pairs.subList(w * 1000, (w + 1) * 1000));
      window.addItl(1_000_000L * (w + 1));
      cumulative.merge(window);
    }
    for (String name : PhaseStats.NAMES) {
      if (!name.equals("itl")) {
        assertThat(cumulative.summary(name)).as(name).isEqualTo(whole.summary(name));
        assertThat(cumulative.negativeCount(name)).isEqualTo(whole.negativeCount(name));
      }
    }
    assertThat(cumulative.count("itl")).isEqualTo(3);
    assertThat(cumulative.joinedOkCount()).isEqualTo(3000);
    assertThat(cumulative.startedCount()).isEqualTo(3000);
  }
}
