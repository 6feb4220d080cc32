package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ProxyConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Passive ejection and health verdicts of one upstream, on a hand-advanced clock. */
class UpstreamHostTest {
  private static final long SECOND = 1_000_000_000L;

  private final UpstreamHost host =
      new UpstreamHost(
          ProxyConfig.Upstream.parse("http://10.0.0.1:8000"),
          4,
          new ProxyConfig.Ejection(3, Duration.ofSeconds(1), Duration.ofSeconds(4)),
          ProxyConfig.Reuse.AUTO);

  @Test
  void threeConnectionFailuresInARowEjectForTheBackoff() {
    long t = 100 * SECOND;
    assertThat(host.connectFailed(t)).isFalse();
    assertThat(host.connectFailed(t)).isFalse();
    assertThat(host.available(t)).isTrue();

    assertThat(host.connectFailed(t)).as("the third ejects").isTrue();

    assertThat(host.available(t)).isFalse();
    assertThat(host.ejected(t + SECOND - 1)).isTrue();
    assertThat(host.available(t + SECOND)).as("back after 1 s, on probation").isTrue();
  }

  @Test
  void aResponseInBetweenResetsTheStreak() {
    long t = 0;
    host.connectFailed(t);
    host.connectFailed(t);
    assertThat(host.reachable(t)).as("nothing was ejected").isFalse();
    host.connectFailed(t);
    host.connectFailed(t);

    assertThat(host.available(t)).isTrue();
  }

  @Test
  void aFailedProbeEjectsAgainAtOnceWithADoubledBackoffUpToTheMax() {
    long t = 0;
    for (int i = 0; i < 3; i++) {
      host.connectFailed(t);
    }
    t += SECOND;
    assertThat(host.connectFailed(t)).as("the probe failed: out again, 2 s").isTrue();
    assertThat(host.available(t + 2 * SECOND - 1)).isFalse();
    t += 2 * SECOND;
    assertThat(host.connectFailed(t)).as("4 s").isTrue();
    assertThat(host.available(t + 4 * SECOND - 1)).isFalse();
    t += 4 * SECOND;
    assertThat(host.connectFailed(t)).as("capped at 4 s").isTrue();
    assertThat(host.available(t + 4 * SECOND)).isTrue();
    assertThat(host.slotsNow(t + 4 * SECOND)).as("half-open: one slot, the probe's").isEqualTo(1);

    assertThat(host.reachable(t + 4 * SECOND))
        .as("the probe answered: the ejection is lifted")
        .isTrue();
    assertThat(host.slotsNow(t + 4 * SECOND)).isEqualTo(host.slots());
    assertThat(host.connectFailed(t + 4 * SECOND)).as("a success ended the probation").isFalse();
  }

  @Test
  void aResponseDuringTheBackoffLiftsTheEjectionAndSaysSo() {
    for (int i = 0; i < 3; i++) {
      host.connectFailed(0);
    }
    assertThat(host.ejectedUntil()).isEqualTo(SECOND);

    assertThat(host.reachable(SECOND / 2))
        .as("a request sent before the ejection answered")
        .isTrue();

    assertThat(host.available(SECOND / 2)).isTrue();
    assertThat(host.slots()).isEqualTo(4);
  }

  @Test
  void failuresRacingAnEjectionDoNotExtendIt() {
    long t = 0;
    for (int i = 0; i < 3; i++) {
      host.connectFailed(t);
    }
    assertThat(host.connectFailed(t + 10)).isFalse();
    assertThat(host.available(t + SECOND)).isTrue();
  }

  @Test
  void healthChecksMarkDownAfterTheirFailuresAndUpAfterOneSuccess() {
    assertThat(host.checked(false, 2)).isFalse();
    assertThat(host.healthy()).isTrue();
    assertThat(host.checked(false, 2)).as("verdict changed").isTrue();
    assertThat(host.available(0)).isFalse();

    assertThat(host.checked(true, 2)).isTrue();
    assertThat(host.available(0)).isTrue();
  }

  @Test
  void aHealthySuccessLiftsAnEjection() {
    for (int i = 0; i < 3; i++) {
      host.connectFailed(0);
    }
    assertThat(host.available(1)).isFalse();

    host.checked(true, 2);

    assertThat(host.available(1)).isTrue();
  }

  @Test
  void inFlightCountsOpenAttempts() {
    host.started();
    host.started();
    host.ended();

    assertThat(host.inFlight()).isEqualTo(1);
    assertThat(host).hasToString("10.0.0.1:8000");
  }

  @Test
  void fourOfTheLastEightResponsesFollowedByTheUpstreamsCloseMakeItOneThatClosesThem() {
    for (boolean closed : new boolean[] {true, false, true, false, true, false, false}) {
      assertThat(host.afterResponse(closed)).isFalse();
    }
    assertThat(host.closesAfterResponses()).isFalse();
    assertThat(host.singleUse()).isFalse();
    assertThat(host.afterResponse(true)).as("the fourth of the last eight").isTrue();
    assertThat(host.singleUse()).as("reuse: auto").isTrue();
    assertThat(host.afterResponse(true)).as("said once").isFalse();
    assertThat(host.closedAfterResponse()).isEqualTo(5);
  }

  @Test
  void closesFarApartAreNotEnough() {
    for (int i = 0; i < 40; i++) {
      assertThat(host.afterResponse(i % 3 == 0)).isFalse();
    }
    assertThat(host.singleUse()).isFalse();
  }

  @Test
  void reuseOnNeverSwitchesAndOffAlwaysIs() {
    ProxyConfig.Ejection e =
        new ProxyConfig.Ejection(3, Duration.ofSeconds(1), Duration.ofSeconds(4));
    UpstreamHost on =
        new UpstreamHost(
            ProxyConfig.Upstream.parse("http://10.0.0.1:8000"), 1, e, ProxyConfig.Reuse.ON);
    for (int i = 0; i < 8; i++) {
      on.afterResponse(true);
    }
    assertThat(on.closesAfterResponses()).as("seen, and counted").isTrue();
    assertThat(on.singleUse()).isFalse();
    UpstreamHost off =
        new UpstreamHost(
            ProxyConfig.Upstream.parse("http://10.0.0.1:8000"), 1, e, ProxyConfig.Reuse.OFF);
    assertThat(off.singleUse()).isTrue();
  }
}
