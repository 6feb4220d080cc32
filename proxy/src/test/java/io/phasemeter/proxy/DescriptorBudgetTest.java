package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import org.junit.jupiter.api.Test;

/** How the file descriptors are shared between the listeners, the upstreams and the process. */
class DescriptorBudgetTest {
  private static ProxyConfig config(String extra) {
    // One pool of 16 slots before two upstreams, health checks on: 2 × ((16 + 8) + 32 + 2) = 116
    // upstream connections.
    return ConfigLoader.parse(
        "pools:\n"
            + "  - name: default\n"
            + "    models: [m]\n"
            + "    upstreams: [http://127.0.0.1:8000, http://127.0.0.1:8001]\n"
            + "    slots: 16\n"
            + extra,
        "test.yaml");
  }

  @Test
  void thePublicListenerGetsWhatTheOthersAndTheProcessLeave() {
    DescriptorBudget b = DescriptorBudget.of(config(""), 1024, 90);
    assertThat(b.upstreamMax()).isEqualTo(116);
    assertThat(b.adminMax()).isEqualTo(256);
    assertThat(b.inUse()).isEqualTo(90 + DescriptorBudget.MARGIN);
    assertThat(b.publicMax()).isEqualTo(1024 - 154 - 256 - 116);
    assertThat(b.fits()).isTrue();
    assertThat(b.describe())
        .isEqualTo(
            "connections: public at most 498, admin at most 256, upstreams at most 116, of a file"
                + " descriptor limit of 1024 (154 kept for the process)");
  }

  @Test
  void explicitBoundsOverTheLimitAreKeptAndWarnedAbout() {
    DescriptorBudget b =
        DescriptorBudget.of(
            config("listen: {max_connections: 5000}\nadmin: {max_connections: 16}\n"), 1024, 90);
    assertThat(b.publicMax()).isEqualTo(5000);
    assertThat(b.adminMax()).isEqualTo(16);
    assertThat(b.fits()).isFalse();
    assertThat(b.describe()).contains("WARNING", "listen.max_connections", "ulimit -n");
  }

  @Test
  void aLimitTooSmallForTheRestLeavesOneAndWarnsAndAnUnknownLimitLeavesADefault() {
    DescriptorBudget tiny = DescriptorBudget.of(config(""), 300, 90);
    assertThat(tiny.publicMax()).isEqualTo(1);
    assertThat(tiny.describe()).contains("WARNING");
    DescriptorBudget unknown = DescriptorBudget.of(config(""), -1, 0);
    assertThat(unknown.publicMax()).isEqualTo(DescriptorBudget.UNKNOWN_LIMIT_PUBLIC_MAX);
    assertThat(unknown.describe()).endsWith("(file descriptor limit unknown)");
  }
}
