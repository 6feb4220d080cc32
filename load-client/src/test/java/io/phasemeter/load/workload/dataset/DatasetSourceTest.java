package io.phasemeter.load.workload.dataset;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sampling: request k sends entry perm[(k − 1) mod n] of a permutation shuffled with the seed, the
 * same for the same seed; and the bodies: the text as prompt or user message, {@code max_tokens =
 * min_tokens} and {@code ignore_eos}, the output exact and the prompt not.
 */
class DatasetSourceTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int N = 50;

  @TempDir Path dir;
  private DatasetEntries entries;

  @BeforeEach
  void entries() throws Exception {
    List<String> lines = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      lines.add("{\"prompt\": \"entry " + i + "\", \"output_tokens\": " + (i + 1) + "}");
    }
    entries =
        Dataset.of(Dataset.Kind.JSONL, DatasetFiles.lines(dir.resolve("d.jsonl"), lines)).load(0);
  }

  private List<Integer> order(long seed, long from, long to) {
    Workload w = DatasetSource.workload("m", Api.COMPLETIONS, false, seed, entries);
    List<Integer> out = new ArrayList<>();
    for (long k = from; k <= to; k++) {
      // The entry is told by its output length, i + 1.
      out.add(w.request(k).maxTokens() - 1);
    }
    return out;
  }

  @Test
  void eachEntryGoesOnceBeforeAnyRepeatsInAnOrderDecidedByTheSeed() {
    List<Integer> first = order(42, 1, N);
    assertThat(new HashSet<>(first)).hasSize(N);
    assertThat(first).isNotEqualTo(first.stream().sorted().toList());
    // The next n requests repeat the same order; the same seed gives the same run.
    assertThat(order(42, N + 1, 2 * N)).isEqualTo(first);
    assertThat(order(42, 1, N)).isEqualTo(first);
    assertThat(order(43, 1, N)).isNotEqualTo(first);
    // As the permutation says, request by request.
    int[] perm = DatasetSource.permutation(N, 42);
    for (int k = 1; k <= 3 * N; k++) {
      assertThat(order(42, k, k).get(0)).isEqualTo(perm[(k - 1) % N]);
    }
  }

  @Test
  void warmUpRequestsSendEntriesOfTheDatasetToo() {
    Workload w = DatasetSource.workload("m", Api.COMPLETIONS, false, 1, entries);
    Set<Integer> seen = new HashSet<>();
    for (long k : new long[] {-1, -2, -N, -N - 1, Long.MIN_VALUE + 1, -123_456_789L}) {
      int out = w.request(k).maxTokens();
      assertThat(out).isBetween(1, N);
      seen.add(out);
    }
    assertThat(seen).isNotEmpty();
  }

  @Test
  void completionsSendTheTextAsPromptWithAnExactOutput() throws Exception {
    Workload w =
        DatasetSource.workload("m\"odel", Api.COMPLETIONS, true, 7, entries)
            .withHeaders(Map.of("x-h", "v"));
    RequestSpec spec = w.request(1);
    JsonNode body = JSON.readTree(spec.body().getBytes());
    int entry = spec.maxTokens() - 1;
    assertThat(body.get("model").asText()).isEqualTo("m\"odel");
    assertThat(body.get("prompt").asText()).isEqualTo("entry " + entry);
    assertThat(body.get("max_tokens").asInt()).isEqualTo(entry + 1);
    assertThat(body.get("min_tokens").asInt()).isEqualTo(entry + 1);
    assertThat(body.get("ignore_eos").asBoolean()).isTrue();
    assertThat(body.get("stream").asBoolean()).isTrue();
    assertThat(body.get("stream_options").get("include_usage").asBoolean()).isTrue();
    assertThat(spec.api()).isEqualTo(Api.COMPLETIONS);
    assertThat(spec.path()).isEqualTo("/v1/completions");
    assertThat(spec.promptTokens()).isEqualTo(-1);
    assertThat(spec.exactLengths()).isFalse();
    assertThat(spec.exactOutput()).isTrue();
    assertThat(spec.bucket()).isEqualTo("jsonl");
    assertThat(spec.headers()).containsEntry("x-h", "v");
    assertThat(spec.turn()).isZero();
  }

  @Test
  void chatSendsTheTextAsOneUserMessageWithVllmsMinTokensAndIgnoreEos() throws Exception {
    RequestSpec spec = DatasetSource.workload("m", Api.CHAT, false, 7, entries).request(3);
    JsonNode body = JSON.readTree(spec.body().getBytes());
    int entry = spec.maxTokens() - 1;
    assertThat(body.get("messages")).hasSize(1);
    assertThat(body.get("messages").get(0).get("role").asText()).isEqualTo("user");
    assertThat(body.get("messages").get(0).get("content").asText()).isEqualTo("entry " + entry);
    assertThat(body.get("max_tokens").asInt()).isEqualTo(entry + 1);
    assertThat(body.get("min_tokens").asInt()).isEqualTo(entry + 1);
    assertThat(body.get("ignore_eos").asBoolean()).isTrue();
    assertThat(body.has("stream_options")).isFalse();
    assertThat(spec.path()).isEqualTo("/v1/chat/completions");
    assertThat(spec.exactOutput()).isTrue();
  }

  @Test
  void otherApisAreRefused() {
    for (Api api : List.of(Api.RESPONSES, Api.EMBEDDINGS)) {
      assertThatThrownBy(() -> DatasetSource.workload("m", api, false, 1, entries))
          .hasMessage(
              "--dataset sends its prompts on --api completions (the default) or --api chat, not"
                  + " --api "
                  + api.key());
    }
  }
}
