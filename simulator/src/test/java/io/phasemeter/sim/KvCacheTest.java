package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import org.junit.jupiter.api.Test;

/**
 * {@code vllm:kv_cache_usage_perc} moves with the batch: the 16-token blocks of every running
 * sequence's prompt and tokens so far, over the cache's blocks, on the engine's manual clock. One
 * prompt token prefills in 1 ms; a decode step is 20 ms.
 */
class KvCacheTest {
  private static final long MS = 1_000_000;

  private final ManualTimers timers = new ManualTimers();

  @Test
  void usageFollowsTheRunningSequencesBlocksAndFallsToZeroWhenTheyEnd() {
    // 1,024 tokens: 64 blocks.
    SimulatorConfig config =
        SimulatorConfig.defaults()
            .withSlots(4)
            .withPrefillTokensPerSecond(1000)
            .withDecodeStepMs(20)
            .withDecodeStepGrowth(0)
            .withKvCacheTokens(1024);
    VllmMetrics metrics = new VllmMetrics(config.models());
    Engine engine =
        new Engine(
            timers,
            config,
            CostModel.of(config),
            timers.clock(),
            metrics,
            EngineTracer.create(null, timers.clock()));
    engine.admit(sequence(32, 40)); // prompt: 2 blocks; first token at 32 ms
    engine.admit(sequence(16, 40)); // prompt: 1 block; first token at 16 ms
    assertThat(engine.kvBlocksUsed()).isEqualTo(3);
    assertThat(usage(metrics)).isEqualTo(3 / 64.0);

    timers.advanceTo(33 * MS); // 33 and 17 tokens of context: 3 + 2 blocks
    assertThat(engine.kvBlocksUsed()).isEqualTo(5);
    assertThat(usage(metrics)).isEqualTo(5 / 64.0);

    // Token 17 of the first (index 16, at 32 + 16 x 20 ms) makes 49 tokens: a fourth block.
    timers.advanceTo(351 * MS);
    long before = engine.kvBlocksUsed();
    timers.advanceTo(352 * MS);
    assertThat(engine.kvBlocksUsed()).isEqualTo(before + 1);

    timers.drain();
    assertThat(engine.stats().completed()).isEqualTo(2);
    assertThat(engine.kvBlocksUsed()).isZero();
    assertThat(usage(metrics)).isZero();
  }

  @Test
  void usageStaysAtOneWhenTheBatchOutgrowsTheCache() {
    SimulatorConfig config =
        SimulatorConfig.defaults()
            .withSlots(4)
            .withPrefillTokensPerSecond(1000)
            .withKvCacheTokens(32);
    VllmMetrics metrics = new VllmMetrics(config.models());
    Engine engine =
        new Engine(
            timers,
            config,
            CostModel.of(config),
            timers.clock(),
            metrics,
            EngineTracer.create(null, timers.clock()));
    engine.admit(sequence(64, 2));
    assertThat(engine.kvBlocksUsed()).isEqualTo(4);
    assertThat(usage(metrics)).isEqualTo(1.0);
  }

  @Test
  void capacityDefaultsPerSlotAndTheFlagIsChecked() {
    assertThat(SimulatorConfig.defaults().kvCacheTokens()).isZero();
    assertThat(SimulatorConfig.defaults().kvCacheBlocks()).isEqualTo(16 * 2048 / 16);
    assertThat(SimulatorConfig.defaults().withSlots(2).kvCacheBlocks()).isEqualTo(2 * 2048 / 16);
    assertThat(SimulatorConfig.defaults().withKvCacheTokens(1000).kvCacheBlocks()).isEqualTo(62);
    assertThatThrownBy(() -> SimulatorConfig.defaults().withKvCacheTokens(8))
        .hasMessageContaining("--kv-cache-tokens");
  }

  private Sequence sequence(int promptTokens, int completionTokens) {
    ParsedRequest request =
        new ParsedRequest(
            Endpoint.CHAT, "sim-llama", promptTokens, completionTokens, 0, true, true, false, 7);
    TokenPlan plan = TokenPlan.create(42, promptTokens, completionTokens, 0, true);
    return new Sequence(request, plan, 0, -1, -1, 0, (index, text, finish) -> {});
  }

  /** The gauge as a scrape shows it. */
  private static double usage(VllmMetrics metrics) {
    for (String line : metrics.scrape().split("\n")) {
      if (line.startsWith("vllm:kv_cache_usage_perc{model_name=\"sim-llama\"}")) {
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    throw new AssertionError("no vllm:kv_cache_usage_perc in the scrape");
  }
}
