package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The prefix cache as a client and a scraper see it: {@code /metrics}'s two counters in vLLM's
 * exposition, and, with {@code --prompt-tokens-details}, the hit in the usage of each API. Requests
 * go one after another, so each one's prefill has ended before the next is scheduled.
 */
class PrefixCacheHttpTest extends SimTestBase {
  private static JsonObject completion(JsonArray ids, boolean stream) {
    JsonObject body =
        new JsonObject()
            .put("model", "sim-llama")
            .put("prompt", ids)
            .put("max_tokens", 2)
            .put("ignore_eos", true);
    return stream ? streamed(body, true) : body;
  }

  private long counter(Simulator sim, String name) throws Exception {
    return Math.round(
        ProtocolTest.sample(get(sim, "/metrics").body(), name + "{model_name=\"sim-llama\"}"));
  }

  @Test
  void metricsCountQueriedAndCachedTokensAndUsageReportsTheHit() throws Exception {
    Simulator sim = startSimulator(FAST.withPromptTokensDetails(true));
    String exposition = get(sim, "/metrics").body();
    assertThat(exposition)
        .contains(
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of"
                + " queried tokens.",
            "# TYPE vllm:prefix_cache_queries_total counter",
            "vllm:prefix_cache_queries_total{model_name=\"sim-llama\"} 0.0",
            "# TYPE vllm:prefix_cache_hits_total counter",
            "vllm:prefix_cache_hits_total{model_name=\"sim-llama\"} 0.0");

    JsonArray ids = PrefixCacheTest.ids(1_000, 100);
    Reply first = post(sim, "/v1/completions", completion(ids, false));
    JsonObject usage = first.json().getJsonObject("usage");
    assertThat(usage.containsKey("prompt_tokens_details")).isTrue();
    assertThat(usage.getValue("prompt_tokens_details")).as("no hit: null, as vLLM").isNull();

    Reply second = post(sim, "/v1/completions", completion(ids, false));
    assertThat(second.json().getJsonObject("usage").getJsonObject("prompt_tokens_details"))
        .isEqualTo(new JsonObject().put("cached_tokens", 96));
    Reply streamedReply = post(sim, "/v1/completions", completion(ids, true));
    JsonObject usageChunk =
        new JsonObject(streamedReply.data().get(streamedReply.data().size() - 2));
    assertThat(usageChunk.getJsonObject("usage").getJsonObject("prompt_tokens_details"))
        .isEqualTo(new JsonObject().put("cached_tokens", 96));
    assertThat(counter(sim, "vllm:prefix_cache_queries_total")).isEqualTo(300);
    assertThat(counter(sim, "vllm:prefix_cache_hits_total")).isEqualTo(192);

    // A Responses conversation: the second turn continues the first by previous_response_id, so
    // the first turn's prompt (instructions and input, 3 + (4 + 30) + (4 + 50) = 91 tokens, 5
    // whole blocks) is the start of the second's.
    JsonObject turn1 =
        new JsonObject()
            .put("model", "sim-llama")
            .put("instructions", "i".repeat(120))
            .put("input", "u".repeat(200))
            .put("max_output_tokens", 3);
    Reply one = post(sim, "/v1/responses", turn1);
    assertThat(one.json().getJsonObject("usage").getInteger("input_tokens")).isEqualTo(91);
    assertThat(
            one.json()
                .getJsonObject("usage")
                .getJsonObject("input_tokens_details")
                .getInteger("cached_tokens"))
        .isZero();
    JsonObject turn2 =
        turn1.copy().put("input", "next").put("previous_response_id", one.json().getString("id"));
    Reply two = post(sim, "/v1/responses", turn2);
    assertThat(
            two.json()
                .getJsonObject("usage")
                .getJsonObject("input_tokens_details")
                .getInteger("cached_tokens"))
        .isEqualTo(80);
  }

  @Test
  void withoutTheFlagUsageIsUnchangedAndWithTheCacheOffNothingIsQueried() throws Exception {
    Simulator plain = startSimulator(FAST);
    JsonArray ids = PrefixCacheTest.ids(1_000, 100);
    post(plain, "/v1/completions", completion(ids, false));
    Reply again = post(plain, "/v1/completions", completion(ids, false));
    assertThat(again.json().getJsonObject("usage").getValue("prompt_tokens_details")).isNull();
    Reply chunked = post(plain, "/v1/completions", completion(ids, true));
    JsonObject usageChunk = new JsonObject(chunked.data().get(chunked.data().size() - 2));
    assertThat(usageChunk.getJsonObject("usage").fieldNames())
        .containsExactlyInAnyOrder("prompt_tokens", "total_tokens", "completion_tokens");
    assertThat(counter(plain, "vllm:prefix_cache_hits_total")).as("the cache is on").isEqualTo(192);

    Simulator off = startSimulator(FAST.withPrefixCacheBlocks(0).withPromptTokensDetails(true));
    post(off, "/v1/completions", completion(ids, false));
    Reply missed = post(off, "/v1/completions", completion(ids, false), Map.of());
    assertThat(missed.json().getJsonObject("usage").getValue("prompt_tokens_details")).isNull();
    assertThat(counter(off, "vllm:prefix_cache_queries_total")).isZero();
    assertThat(counter(off, "vllm:prefix_cache_hits_total")).isZero();
  }
}
