package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * When no load held down to the floor, the capacity lies below every probe, and the phase that gave
 * way is still named: a fault present at every load (a slow Redis behind the gateway, a slow
 * network) is the case an operator most needs named.
 */
class LimitingPhaseNothingHeldTest {

  private static Probe fail(int index, double load, double gatewayP95) {
    return Probes.of(
        index,
        load,
        index == 1 ? Probe.Stage.DOUBLE : Probe.Stage.HALVE,
        0,
        -0.9,
        Map.of("gateway", gatewayP95, "queue", 1.0),
        List.of(new Probe.Breach("b", "gateway", 20, 0.95, gatewayP95, 1.0, 0.95)));
  }

  @Test
  void theLowestFailingProbeNamesThePhase() {
    List<Probe> probes = List.of(fail(1, 12, 90), fail(2, 6, 75), fail(3, 3, 70));
    LimitingPhase l = LimitingPhase.decide(probes, Double.NaN, true, false);
    assertThat(l.phase()).isEqualTo("gateway");
    assertThat(l.owner()).isEqualTo("gateway");
    assertThat(l.basis()).isEqualTo("budget");
    assertThat(l.failProbe()).isEqualTo(3);
    assertThat(l.passProbe()).isNull();
    assertThat(l.reason()).contains("at 3 req/s");
  }
}
