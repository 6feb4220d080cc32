package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The engine with its prefix cache, on a manual clock: one prompt token prefills in 1 ms, so a
 * first token's time says exactly how many tokens were prefilled. The truth is the cost model's
 * {@code prefillNanos} of the tokens the cache did not hold, and a control without the cache.
 */
class PrefixCacheEngineTest {
  private static final long MS = 1_000_000;

  private static final SimulatorConfig CONFIG =
      SimulatorConfig.defaults()
          .withSlots(8)
          .withPrefillTokensPerSecond(1000)
          .withDecodeStepMs(20)
          .withDecodeStepGrowth(0);

  private final ManualTimers timers = new ManualTimers();
  private final Map<String, Long> firstTokens = new HashMap<>();
  private VllmMetrics metrics;
  private Engine engine;
  private CostModel cost;

  private Engine engine(SimulatorConfig config) {
    metrics = new VllmMetrics(config.models());
    cost = CostModel.of(config);
    engine =
        new Engine(
            timers,
            config,
            cost,
            timers.clock(),
            metrics,
            EngineTracer.create(null, timers.clock()));
    return engine;
  }

  /** A completion of these token ids, two tokens long. */
  private Sequence completion(String name, JsonArray ids) {
    ParsedRequest parsed =
        new RequestParser(CONFIG)
            .parse(
                Endpoint.COMPLETION,
                Buffer.buffer(
                    new JsonObject()
                        .put("prompt", ids)
                        .put("max_tokens", 2)
                        .put("ignore_eos", true)
                        .encode()));
    return sequence(name, parsed);
  }

  private Sequence sequence(String name, ParsedRequest parsed) {
    TokenPlan plan = TokenPlan.create(42, name.hashCode(), parsed.maxTokens(), 0, true);
    return new Sequence(
        parsed,
        plan,
        0,
        -1,
        -1,
        0,
        (index, text, finish) -> {
          if (index == 0) {
            firstTokens.put(name, timers.now());
          }
        });
  }

  private long counter(String name) {
    return Math.round(ProtocolTest.sample(metrics.scrape(), name + "{model_name=\"sim-llama\"}"));
  }

  @Test
  void aPromptSharing64OfItsTokensPrefillsOnlyTheOther36() {
    JsonArray shared = PrefixCacheTest.ids(1_000, 64);
    engine(CONFIG);
    engine.admit(completion("a", PrefixCacheTest.concat(shared, PrefixCacheTest.ids(5_000, 36))));
    timers.advanceTo(150 * MS); // a's prefill (100 ms) ended at its first token
    Sequence b = completion("b", PrefixCacheTest.concat(shared, PrefixCacheTest.ids(7_000, 36)));
    engine.admit(b);
    timers.drain();

    assertThat(firstTokens.get("a")).isEqualTo(cost.prefillNanos(100));
    assertThat(b.cachedTokens).isEqualTo(64);
    assertThat(firstTokens.get("b") - 150 * MS).isEqualTo(cost.prefillNanos(100 - 64));
    assertThat(counter("vllm:prefix_cache_queries_total")).isEqualTo(200);
    assertThat(counter("vllm:prefix_cache_hits_total")).isEqualTo(64);
    assertThat(counter("vllm:prompt_tokens_total"))
        .as("prompt tokens count them all")
        .isEqualTo(200);

    // The control: the same two prompts with the cache off prefill all 100 tokens each.
    firstTokens.clear();
    engine(CONFIG.withPrefixCacheBlocks(0));
    long start = timers.now();
    engine.admit(completion("a", PrefixCacheTest.concat(shared, PrefixCacheTest.ids(5_000, 36))));
    timers.advanceTo(start + 150 * MS);
    engine.admit(completion("b", PrefixCacheTest.concat(shared, PrefixCacheTest.ids(7_000, 36))));
    timers.drain();
    assertThat(firstTokens.get("b") - start - 150 * MS).isEqualTo(cost.prefillNanos(100));
    assertThat(counter("vllm:prefix_cache_queries_total")).as("off: nothing queried").isZero();
    assertThat(counter("vllm:prefix_cache_hits_total")).isZero();
  }

  @Test
  void prefillsThatOverlapBothMissAndTheNextOneHits() {
    JsonArray prompt = PrefixCacheTest.ids(1_000, 100);
    engine(CONFIG);
    engine.admit(completion("a", prompt));
    timers.advanceTo(50 * MS);
    engine.admit(completion("b", prompt)); // a is still prefilling: nothing cached yet
    timers.advanceTo(200 * MS);
    Sequence c = completion("c", prompt);
    engine.admit(c);
    timers.drain();

    assertThat(firstTokens.get("a")).isEqualTo(cost.prefillNanos(100));
    assertThat(firstTokens.get("b") - 50 * MS).isEqualTo(cost.prefillNanos(100));
    // 6 whole blocks (96 tokens) of 100 were computed: c prefills the last 4.
    assertThat(c.cachedTokens).isEqualTo(96);
    assertThat(firstTokens.get("c") - 200 * MS).isEqualTo(cost.prefillNanos(4));
    assertThat(counter("vllm:prefix_cache_queries_total")).isEqualTo(300);
    assertThat(counter("vllm:prefix_cache_hits_total")).isEqualTo(96);
  }

  @Test
  void aSequenceCancelledBeforeItsFirstTokenCachesNothing() {
    JsonArray prompt = PrefixCacheTest.ids(1_000, 100);
    engine(CONFIG);
    Sequence a = completion("a", prompt);
    engine.admit(a);
    timers.advanceTo(50 * MS);
    engine.cancel(a);
    assertThat(engine.prefixCache().size()).isZero();
    engine.admit(completion("b", prompt));
    timers.drain();
    assertThat(firstTokens.get("b") - 50 * MS).isEqualTo(cost.prefillNanos(100));
    // b finished: its blocks stay cached after it
    assertThat(engine.prefixCache().size()).isEqualTo(6);
  }

  @Test
  void aLongerConversationHitsTheBlocksOfAnEarlierOnesPrefix() {
    RequestParser parser = new RequestParser(CONFIG);
    String question = "q".repeat(200);
    JsonObject first = SimTestBase.chat(question, 2);
    JsonObject second = SimTestBase.chat(question, 2);
    second
        .getJsonArray("messages")
        .add(new JsonObject().put("role", "assistant").put("content", "a".repeat(100)))
        .add(new JsonObject().put("role", "user").put("content", "n".repeat(50)));
    ParsedRequest one = parser.parse(Endpoint.CHAT, Buffer.buffer(first.encode()));
    ParsedRequest two = parser.parse(Endpoint.CHAT, Buffer.buffer(second.encode()));
    // 3 + (4 + 50) = 57 tokens; the longer one 57 + (4 + 25) + (4 + 13) = 103.
    assertThat(one.promptTokens()).isEqualTo(57);
    assertThat(two.promptTokens()).isEqualTo(103);

    engine(CONFIG);
    engine.admit(sequence("one", one));
    timers.advanceTo(100 * MS);
    Sequence later = sequence("two", two);
    engine.admit(later);
    timers.drain();

    // The two part after the first user message's end token (BOS + 54: token 55), so the 3 whole
    // blocks before it (48 tokens) hit; the first's generation prompt is not part of the second.
    assertThat(later.cachedTokens).isEqualTo(48);
    assertThat(firstTokens.get("two") - 100 * MS).isEqualTo(cost.prefillNanos(103 - 48));
    assertThat(counter("vllm:prefix_cache_queries_total")).isEqualTo(57 + 103);
    assertThat(counter("vllm:prefix_cache_hits_total")).isEqualTo(48);
  }

  @Test
  void theSharedStepClockStartsTheHitSequenceAtTheBoundaryAfterItsShorterPrefill() {
    JsonArray prompt = PrefixCacheTest.ids(1_000, 100);
    engine(CONFIG.withStepClock(SimulatorConfig.StepClock.SHARED));
    engine.admit(completion("a", prompt)); // first token at 100 ms; boundaries every 20 ms
    timers.advanceTo(110 * MS);
    engine.admit(completion("b", prompt)); // 96 cached: 4 ms of prefill, due at 114 ms
    timers.drain();
    assertThat(firstTokens.get("a")).isEqualTo(100 * MS);
    assertThat(firstTokens.get("b")).as("the next boundary, not 210 ms").isEqualTo(120 * MS);
  }
}
