package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class WorkloadTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void streamedCompletionHasExactLengthsAndAsksForUsage() throws Exception {
    RequestSpec spec = Workload.completions("m\"1", Profile.DOC_QA, true, 5).request(0);
    assertThat(spec.path()).isEqualTo("/v1/completions");
    assertThat(spec.bucket()).isEqualTo("doc-qa");
    assertThat(spec.promptTokens()).isEqualTo(4096);
    assertThat(spec.maxTokens()).isEqualTo(300);
    assertThat(spec.stream()).isTrue();
    assertThat(spec.exactLengths()).isTrue();
    assertThat(spec.headers()).isEmpty();
    JsonNode body = JSON.readTree(spec.body().getBytes());
    assertThat(body.get("model").asText()).isEqualTo("m\"1");
    assertThat(body.get("prompt").size()).isEqualTo(4096);
    for (JsonNode id : body.get("prompt")) {
      assertThat(id.asInt()).isBetween(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID);
    }
    assertThat(body.get("max_tokens").asInt()).isEqualTo(300);
    assertThat(body.get("min_tokens").asInt()).isEqualTo(300);
    assertThat(body.get("ignore_eos").asBoolean()).isTrue();
    assertThat(body.get("stream").asBoolean()).isTrue();
    assertThat(body.get("stream_options").get("include_usage").asBoolean()).isTrue();
  }

  @Test
  void wholeCompletionHasNoStreamOptions() throws Exception {
    RequestSpec spec = Workload.completions("m", Profile.custom(10, 3), false, 5).request(3);
    JsonNode body = JSON.readTree(spec.body().getBytes());
    assertThat(body.get("stream").asBoolean()).isFalse();
    assertThat(body.has("stream_options")).isFalse();
    assertThat(spec.bucket()).isEqualTo("10-3");
  }

  @Test
  void requestsDependOnlyOnSeedAndNumber() {
    Workload a = Workload.completions("m", Mix.parse("1k:8=1,2k:8=1"), true, 9);
    Workload b = Workload.completions("m", Mix.parse("1k:8=1,2k:8=1"), true, 9);
    Workload c = Workload.completions("m", Mix.parse("1k:8=1,2k:8=1"), true, 10);
    // Built in a different order, request 7 is still the same.
    for (long seq = 20; seq >= 0; seq--) {
      b.request(seq);
    }
    assertThat(a.request(7).body()).isEqualTo(b.request(7).body());
    assertThat(a.request(7).body()).isNotEqualTo(a.request(8).body());
    assertThat(a.request(7).body()).isNotEqualTo(c.request(7).body());
  }

  @Test
  void mixIsFollowedOverManyRequests() {
    Workload w = Workload.completions("m", Mix.parse("1:1=0.7,2:1=0.3"), false, 1);
    Map<String, Integer> counts = new HashMap<>();
    int n = 20_000;
    for (long seq = 0; seq < n; seq++) {
      counts.merge(w.request(seq).bucket(), 1, Integer::sum);
    }
    // Binomial standard error sqrt(0.21 / 20000) = 0.32%; 2% is over 6 of them.
    assertThat(counts.get("1-1") / (double) n).isCloseTo(0.7, within(0.02));
    assertThat(counts.get("2-1") / (double) n).isCloseTo(0.3, within(0.02));
  }

  @Test
  void chatIsFreeTextWithDistinctPrompts() throws Exception {
    Workload w = Workload.chat("m", 64, true, 3);
    RequestSpec spec = w.request(12);
    assertThat(spec.path()).isEqualTo("/v1/chat/completions");
    assertThat(spec.promptTokens()).isEqualTo(-1);
    assertThat(spec.exactLengths()).isFalse();
    assertThat(spec.bucket()).isEqualTo("chat");
    JsonNode body = JSON.readTree(spec.body().getBytes());
    assertThat(body.get("messages").get(0).get("role").asText()).isEqualTo("user");
    assertThat(body.get("max_tokens").asInt()).isEqualTo(64);
    assertThat(body.get("stream_options").get("include_usage").asBoolean()).isTrue();
    Set<String> prompts = new HashSet<>();
    for (long seq = 0; seq < 100; seq++) {
      prompts.add(JSON.readTree(w.request(seq).body().getBytes()).get("messages").toString());
    }
    assertThat(prompts).hasSize(100);
  }

  @Test
  void headersCanBeAdded() {
    RequestSpec spec =
        Workload.chat("m", 4, false, 1).request(0).withHeaders(Map.of("x-sim-ttft-ms", "5"));
    assertThat(spec.headers()).containsEntry("x-sim-ttft-ms", "5");
  }

  @Test
  void responsesSendTheChatPromptAsInputAndAskForMaxOutputTokens() throws Exception {
    Workload w = Workload.responses("m", 32, true, 3);
    RequestSpec spec = w.request(12);
    assertThat(spec.api()).isEqualTo(Api.RESPONSES);
    assertThat(spec.path()).isEqualTo("/v1/responses");
    assertThat(spec.promptTokens()).isEqualTo(-1);
    assertThat(spec.exactLengths()).isFalse();
    assertThat(spec.maxTokens()).isEqualTo(32);
    assertThat(spec.bucket()).isEqualTo("responses");
    JsonNode body = JSON.readTree(spec.body().getBytes());
    assertThat(body.get("model").asText()).isEqualTo("m");
    // The same text chat sends as its message.
    String chat =
        JSON.readTree(Workload.chat("m", 32, true, 3).request(12).body().getBytes())
            .get("messages")
            .get(0)
            .get("content")
            .asText();
    assertThat(body.get("input").asText()).isEqualTo(chat).startsWith("Request 12: ");
    assertThat(body.get("max_output_tokens").asInt()).isEqualTo(32);
    assertThat(body.get("stream").asBoolean()).isTrue();
    // Usage comes with response.completed; there is no stream_options, no max_tokens.
    assertThat(body.has("stream_options")).isFalse();
    assertThat(body.has("max_tokens")).isFalse();
    assertThat(
            JSON.readTree(Workload.responses("m", 32, false, 3).request(0).body().getBytes())
                .get("stream")
                .asBoolean())
        .isFalse();
  }

  @Test
  void embeddingsSendTokenIdsOfExactLengthAndNeverStream() throws Exception {
    RequestSpec spec = Workload.embeddings("m", Mix.of(Profile.SINGLE_1K), 5).request(0);
    assertThat(spec.api()).isEqualTo(Api.EMBEDDINGS);
    assertThat(spec.path()).isEqualTo("/v1/embeddings");
    assertThat(spec.promptTokens()).isEqualTo(1024);
    assertThat(spec.exactLengths()).isTrue();
    assertThat(spec.maxTokens()).isZero();
    assertThat(spec.stream()).isFalse();
    assertThat(spec.bucket()).isEqualTo("1k");
    JsonNode body = JSON.readTree(spec.body().getBytes());
    assertThat(body.get("model").asText()).isEqualTo("m");
    assertThat(body.get("input").size()).isEqualTo(1024);
    for (JsonNode id : body.get("input")) {
      assertThat(id.asInt()).isBetween(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID);
    }
    assertThat(body.size()).as(body.toString()).isEqualTo(2);

    RequestSpec custom = Workload.embeddings("m", 1000, 5).request(1);
    assertThat(custom.promptTokens()).isEqualTo(1000);
    assertThat(custom.bucket()).isEqualTo("1000");
    Workload mix = Workload.embeddings("m", Mix.parse("1k:1=1,2k:1=1"), 5);
    Set<String> buckets = new HashSet<>();
    for (long seq = 0; seq < 50; seq++) {
      buckets.add(mix.request(seq).bucket());
    }
    assertThat(buckets).containsExactlyInAnyOrder("1k", "2k");
  }

  @Test
  void theApiOfAPathIsTheOneThatServesIt() {
    for (Api a : Api.values()) {
      assertThat(Api.ofPath(a.path())).isEqualTo(a);
      assertThat(Api.parse("--api", a.key().toUpperCase(java.util.Locale.ROOT))).isEqualTo(a);
    }
    assertThat(Api.ofPath("/other")).isEqualTo(Api.COMPLETIONS);
    assertThat(new RequestSpec("/v1/chat/completions", spec0(), "b", -1, 1, true).api())
        .isEqualTo(Api.CHAT);
    assertThat(Api.EMBEDDINGS.notApplicable())
        .containsExactly("client_ttft", "ttft_envelope", "server_ttft", "tpot", "itl");
    assertThat(Api.RESPONSES.notApplicable()).isEmpty();
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> Api.parse("--api", "completion"))
        .hasMessage(
            "--api must be one of chat, completions, responses, embeddings, got 'completion'");
  }

  private static io.vertx.core.buffer.Buffer spec0() {
    return io.vertx.core.buffer.Buffer.buffer("{}");
  }
}
