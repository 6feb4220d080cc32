package io.phasemeter.load.workload.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code --prefix-tokens N --prefixes K}: K prefixes of N ids, each request one, exactly. */
class SharedPrefixTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static List<Integer> ids(RequestSpec r, String field) throws Exception {
    JsonNode body = JSON.readTree(r.body().getBytes());
    List<Integer> ids = new ArrayList<>();
    body.get(field).forEach(n -> ids.add(n.asInt()));
    return ids;
  }

  @Test
  void everyPromptStartsWithOneOfTheKPrefixesAndTheRestIsItsOwn() throws Exception {
    SharedPrefix sp = new SharedPrefix(100, 3);
    Workload w =
        sp.workload(
            "m", Api.COMPLETIONS, Mix.parse("200:4=0.5,300:8=0.5"), true, 11, PromptSalt.NONE);
    Map<List<Integer>, Integer> byPrefix = new HashMap<>();
    List<List<Integer>> tails = new ArrayList<>();
    for (long seq = 1; seq <= 60; seq++) {
      RequestSpec r = w.request(seq);
      List<Integer> ids = ids(r, "prompt");
      assertThat(ids).hasSize(r.promptTokens());
      assertThat(r.promptTokens()).isIn(200, 300);
      assertThat(r.maxTokens()).isEqualTo(r.promptTokens() == 200 ? 4 : 8);
      assertThat(r.bucket()).isIn("200-4", "300-8");
      JsonNode body = JSON.readTree(r.body().getBytes());
      assertThat(body.get("min_tokens").asInt()).isEqualTo(r.maxTokens());
      assertThat(body.get("ignore_eos").asBoolean()).isTrue();
      byPrefix.merge(ids.subList(0, 100), 1, Integer::sum);
      tails.add(ids.subList(100, ids.size()));
      // From the seed and the number alone.
      assertThat(w.request(seq).body().toString()).isEqualTo(r.body().toString());
    }
    // Three prefixes, each drawn by some of the 60 requests.
    assertThat(byPrefix).hasSize(3);
    assertThat(byPrefix.values()).allMatch(n -> n > 5);
    // No two requests share anything after the prefix.
    assertThat(tails.stream().map(t -> t.get(0)).distinct().count()).isGreaterThan(50);
    // Another seed, other prefixes.
    Workload other =
        sp.workload("m", Api.COMPLETIONS, Mix.parse("200:4=1"), true, 12, PromptSalt.NONE);
    assertThat(byPrefix).doesNotContainKey(ids(other.request(1), "prompt").subList(0, 100));
  }

  @Test
  void warmUpRequestsShareNoneOfTheRunsPrefixes() throws Exception {
    SharedPrefix sp = new SharedPrefix(64, 2);
    Workload w = sp.workload("m", Api.COMPLETIONS, Mix.parse("128:4=1"), true, 7, PromptSalt.NONE);
    java.util.Set<List<Integer>> run = new java.util.HashSet<>();
    for (long seq = 1; seq <= 40; seq++) {
      run.add(ids(w.request(seq), "prompt").subList(0, 64));
    }
    assertThat(run).hasSize(2);
    java.util.Set<List<Integer>> warm = new java.util.HashSet<>();
    for (long seq = -1; seq >= -40; seq--) {
      RequestSpec r = w.request(seq);
      List<Integer> ids = ids(r, "prompt");
      // The same lengths, as exact.
      assertThat(ids).hasSize(128);
      assertThat(r.maxTokens()).isEqualTo(4);
      warm.add(ids.subList(0, 64));
      // Not a single block of a run's prefix: nothing for a prefix cache to serve the run.
      for (List<Integer> p : run) {
        assertThat(ids.subList(0, 16)).isNotEqualTo(p.subList(0, 16));
      }
    }
    // The warm-up's own prefixes are shared among its requests, as the run's are.
    assertThat(warm).hasSize(2);
  }

  @Test
  void embeddingsStartTheirInputsWithThePrefixesToo() throws Exception {
    Workload w =
        new SharedPrefix(10, 1)
            .workload("e", Api.EMBEDDINGS, Mix.parse("64:1=1"), true, 3, PromptSalt.NONE);
    RequestSpec a = w.request(1);
    RequestSpec b = w.request(2);
    assertThat(a.api()).isEqualTo(Api.EMBEDDINGS);
    assertThat(a.stream()).isFalse();
    assertThat(a.maxTokens()).isZero();
    assertThat(a.bucket()).isEqualTo("64");
    assertThat(ids(a, "input")).hasSize(64);
    assertThat(ids(a, "input").subList(0, 10)).isEqualTo(ids(b, "input").subList(0, 10));
    assertThat(ids(a, "input").get(10)).isNotEqualTo(ids(b, "input").get(10));
  }

  @Test
  void aPrefixAsLongAsAnInputOrFreeTextIsRefused() {
    assertThatThrownBy(
            () ->
                new SharedPrefix(1024, 2)
                    .workload(
                        "m",
                        Api.COMPLETIONS,
                        Mix.parse("1k:512=0.5,4k:300=0.5"),
                        true,
                        1,
                        PromptSalt.NONE))
        .hasMessage(
            "--prefix-tokens 1024 must be below every input length: shape 1k-512 has 1024"
                + " tokens in");
    assertThatThrownBy(
            () ->
                new SharedPrefix(64, 2)
                    .workload("m", Api.EMBEDDINGS, Mix.parse("64:1=1"), false, 1, PromptSalt.NONE))
        .hasMessage(
            "--prefix-tokens 64 must be below every input length: input 64 has 64 tokens in");
    assertThatThrownBy(
            () ->
                new SharedPrefix(10, 2)
                    .workload("m", Api.CHAT, Mix.parse("1k:5=1"), true, 1, PromptSalt.NONE))
        .hasMessageStartingWith("--prefix-tokens needs token-id prompts");
    assertThatThrownBy(() -> SharedPrefix.fromFlags(10, null))
        .hasMessage(
            "--prefix-tokens N and --prefixes K go together (K shared prefixes of N tokens)");
    assertThatThrownBy(() -> SharedPrefix.fromFlags(10, 0))
        .hasMessage("--prefixes must be at least 1, got 0");
    assertThat(SharedPrefix.fromFlags(null, null)).isNull();
    assertThat(new SharedPrefix(512, 4).conditions())
        .containsExactly(Map.entry("prefix_tokens", 512), Map.entry("prefixes", 4));
  }
}
