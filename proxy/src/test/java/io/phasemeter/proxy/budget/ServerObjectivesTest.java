package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.pipeline.ProxyFailure;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Which endings the proxy's judgement counts, over every failure it knows, and the attainment
 * window's exact counts on a hand-driven clock.
 */
class ServerObjectivesTest {

  @Test
  void theServiceFailuresCountTheClientsAndTheKeysOwnRateLimitDoNot() {
    Set<String> counted =
        Arrays.stream(ProxyFailure.Kind.values())
            .filter(k -> ServerObjectives.counted(k.outcome(), k.code()))
            .map(Enum::name)
            .collect(Collectors.toCollection(java.util.TreeSet::new));
    assertThat(counted)
        .containsExactlyInAnyOrder(
            // rejected by the service
            "QUEUE_FULL",
            "SHUTTING_DOWN",
            "OVERLOADED",
            "RATE_LIMITER_UNAVAILABLE",
            "UPSTREAM_BUSY",
            // the upstream failed or timed out
            "NO_HEALTHY_UPSTREAM",
            "QUEUE_TIMEOUT",
            "UPSTREAM_UNAVAILABLE",
            "UPSTREAM_ERROR",
            "UPSTREAM_OVERLOADED",
            "UPSTREAM_MALFORMED",
            "UPSTREAM_DISCONNECTED",
            "UPSTREAM_TIMEOUT",
            "INTERNAL");
    assertThat(ServerObjectives.counted(io.phasemeter.proxy.pipeline.Outcome.SUCCESS, null))
        .isTrue();
  }

  @Test
  void aRequestIsCountedForItsBudgetsWindowAndNoLonger() {
    AtomicLong now = new AtomicLong(-7_000_000_000L);
    // 60 s in steps of 1 s.
    AttainmentWindow w = new AttainmentWindow(Duration.ofSeconds(60), now::get, 3);
    w.record("team-a", true, -1);
    w.record("team-a", false, AttainmentWindow.column("server_ttft"));
    w.record("team-a", false, AttainmentWindow.column("error"));
    w.record("team-b", false, AttainmentWindow.column("tpot"));
    assertThat(row(w, "team-a")).containsEntry("judged", 3L).containsEntry("met", 1L);
    assertThat(row(w, "team-a")).containsEntry("server_ttft", 1L).containsEntry("error", 1L);
    assertThat(row(w, "team-b")).containsEntry("judged", 1L).containsEntry("tpot", 1L);

    now.addAndGet(30_000_000_000L);
    w.record("team-a", true, -1);
    assertThat(row(w, "team-a")).containsEntry("judged", 4L).containsEntry("met", 2L);
    // 59 s after the first ones, in the last step of their window: still counted.
    now.addAndGet(29_000_000_000L);
    assertThat(row(w, "team-a")).containsEntry("judged", 4L);
    // A step later they are out; the one 30 s younger stays.
    now.addAndGet(1_000_000_000L);
    assertThat(row(w, "team-a")).containsEntry("judged", 1L).containsEntry("met", 1L);
    assertThat(row(w, "team-a")).doesNotContainKey("server_ttft");
    assertThat(w.sums().get("team-b")[AttainmentWindow.JUDGED]).isZero();
    // The ring reuses a step's row once its step has passed: no count from a minute before.
    w.record("team-b", true, -1);
    assertThat(row(w, "team-b")).containsEntry("judged", 1L).doesNotContainKey("tpot");

    // Past the bound of tenants, further ones are counted as other.
    w.record("team-c", true, -1);
    w.record("team-d", true, -1);
    assertThat(w.sums().keySet()).containsExactlyInAnyOrder("team-a", "team-b", "team-c", "other");
  }

  private static Map<String, Long> row(AttainmentWindow w, String tenant) {
    long[] c = w.sums().get(tenant);
    Map<String, Long> out = new java.util.TreeMap<>();
    out.put("judged", c[AttainmentWindow.JUDGED]);
    out.put("met", c[AttainmentWindow.MET]);
    for (int k = AttainmentWindow.ERROR; k < AttainmentWindow.WIDTH; k++) {
      if (c[k] > 0) {
        out.put(AttainmentWindow.objective(k), c[k]);
      }
    }
    return out;
  }
}
