package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Live budget ratios from known rolling values. */
class BudgetTrackerTest {
  private static final long MS = 1_000_000;

  private static final String YAML =
      """
      budgets:
        - name: all
          model: "*"
          quantile: 0.95
          window: 1m
          limits_ms: {network_envelope: 100, queue: 250, ttft: 1000, total: 5000}
          max_error_rate: 0.1
          min_join_coverage: 0.9
        - name: big
          model: big-model
          quantile: 0.5
          window: 1m
          limits_ms: {queue: 10}
          max_error_rate: 0.5
          min_join_coverage: 0.9
      """;

  @Test
  void ratioIsTheObservedQuantileOverTheLimitPerModelFilter() {
    Budgets budgets = Budgets.parse(YAML, "test.yaml");
    RollingQuantiles q =
        new RollingQuantiles(Duration.ofSeconds(10), 6, 100, BudgetTracker.limits(budgets));
    // small-model: queue 1..100 ms; big-model: queue 500 ms each.
    for (int i = 1; i <= 100; i++) {
      q.record("small-model", "p", "queue", i * MS);
      q.record("small-model", "p", "total", 1000 * MS);
    }
    for (int i = 0; i < 100; i++) {
      q.record("big-model", "p", "queue", 500 * MS);
    }
    BudgetTracker t = new BudgetTracker(budgets, q);
    Budget all = budgets.byName("all");
    Budget big = budgets.byName("big");
    // p95 over both models is 500 ms (half the values are 500): 500 / 250 = 2.
    assertThat(t.ratio(all, BudgetPhase.QUEUE)).isCloseTo(2.0, within(0.02));
    assertThat(t.ratio(big, BudgetPhase.QUEUE)).isCloseTo(50.0, within(0.5));
    assertThat(t.ratio(all, BudgetPhase.TOTAL)).isCloseTo(0.2, within(0.002));
    assertThat(t.ratio(all, BudgetPhase.TTFT)).isNaN();

    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    t.bindTo(registry);
    // One gauge per server-side phase: network_envelope is the load client's.
    assertThat(registry.find("llm.budget.ratio").gauges()).hasSize(4);
    assertThat(
            registry
                .get("llm.budget.ratio")
                .tags("budget", "all", "llm_phase", "queue")
                .gauge()
                .value())
        .isCloseTo(2.0, within(0.02));
  }

  @Test
  void statusListsBreachesAndTheErrorRate() {
    Budgets budgets = Budgets.parse(YAML, "test.yaml");
    RollingQuantiles q =
        new RollingQuantiles(Duration.ofSeconds(10), 6, 100, BudgetTracker.limits(budgets));
    for (int i = 0; i < 80; i++) {
      q.record("m", "p", "total", 100 * MS);
      q.record("m", "p", "queue", 300 * MS);
    }
    for (int i = 0; i < 20; i++) {
      q.record("m", "p", LiveStats.FAILED_SERIES, 100 * MS);
    }
    JsonObject all = new BudgetTracker(budgets, q).status().getJsonObject(0);
    assertThat(all.getLong("requests")).isEqualTo(100);
    assertThat(all.getDouble("error_rate")).isCloseTo(0.2, within(1e-9));
    assertThat(all.getBoolean("error_rate_breached")).isTrue();
    var phases = all.getJsonArray("phases");
    JsonObject queue = phases.getJsonObject(1);
    assertThat(queue.getString("phase")).isEqualTo("queue");
    assertThat(queue.getBoolean("breached")).isTrue();
    JsonObject total = phases.getJsonObject(3);
    assertThat(total.getBoolean("breached")).isFalse();
    assertThat(phases.getJsonObject(0).getString("note")).contains("load client");
  }

  @Test
  void engineQueueIsBudgetedApartFromTheProxysQueue() {
    Budgets budgets =
        Budgets.parse(
            """
            budgets:
              - name: engine
                quantile: 0.5
                window: 1m
                limits_ms: {queue: 100, engine_queue: 200}
                max_error_rate: 0.1
                min_join_coverage: 0.9
            """,
            "test.yaml");
    RollingQuantiles q =
        new RollingQuantiles(Duration.ofSeconds(10), 6, 100, BudgetTracker.limits(budgets));
    // The proxy admits at once; the engine's own scheduler holds each request 800 ms.
    for (int i = 0; i < 10; i++) {
      q.record("m", "p", "queue", MS / 10);
      q.record("m", "p", "engine_queue", 800 * MS);
    }
    BudgetTracker t = new BudgetTracker(budgets, q);
    Budget b = budgets.byName("engine");
    assertThat(t.ratio(b, BudgetPhase.QUEUE)).isLessThan(0.01);
    assertThat(t.ratio(b, BudgetPhase.ENGINE_QUEUE)).isCloseTo(4.0, within(0.04));
    assertThat(BudgetPhase.ENGINE_QUEUE.matcher()).isEqualTo("llm_phase=\"engine_queue\"");
  }
}
