package io.phasemeter.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PhasesTest {

  @Test
  void namesAreUniqueSnakeCase() {
    Set<String> seen = new HashSet<>();
    for (Phases p : Phases.values()) {
      assertThat(p.key()).matches("[a-z]+(_[a-z]+)*");
      assertThat(seen.add(p.key())).as("duplicate %s", p.key()).isTrue();
      assertThat(p.key()).isEqualTo(p.name().toLowerCase(java.util.Locale.ROOT));
      assertThat(p.owner()).isNotBlank();
      assertThat(p.meaning()).isNotBlank();
    }
  }

  @Test
  void reportsListEveryPhaseOnceInTheOrderTheyAreDeclared() {
    assertThat(Phases.reportedKeys())
        .containsExactly(
            "client_total",
            "client_ttft",
            "transport_setup",
            "dns",
            "connect",
            "tls",
            "network_envelope",
            "ttft_envelope",
            "server_root",
            "server_ttft",
            "gateway",
            "receive",
            "queue",
            "generation",
            "engine_queue",
            "prefill",
            "decode",
            "write",
            "unattributed",
            "tpot",
            "itl",
            "schedule_lag");
  }

  @Test
  void olderBudgetNamesResolveToTheServerFigures() {
    assertThat(Phases.fromKey("ttft")).contains(Phases.TTFT);
    assertThat(Phases.TTFT.canonical()).isEqualTo(Phases.SERVER_TTFT);
    assertThat(Phases.TOTAL.canonical()).isEqualTo(Phases.SERVER_ROOT);
    assertThat(Phases.TOTAL.parts()).isEqualTo(Phases.SERVER_ROOT.parts());
    assertThat(Phases.TTFT.toFirstToken()).isTrue();
    assertThat(Phases.fromKey("nope")).isEmpty();
  }

  @Test
  void aSumIsMadeOfReportedPhasesThatAreNotSums() {
    for (Phases p : Phases.values()) {
      for (Phases part : p.parts()) {
        assertThat(part.reported()).isTrue();
        assertThat(part.parts()).isEmpty();
      }
    }
  }
}
