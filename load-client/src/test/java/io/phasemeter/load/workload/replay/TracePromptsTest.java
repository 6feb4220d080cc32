package io.phasemeter.load.workload.replay;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What a replayed row sends: which tokens are shared, and the request around them. */
class TracePromptsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static Trace trace(String jsonl) throws Exception {
    return new TraceReader("t", Replay.Format.JSONL, 0, TraceReader.Limits.DEFAULT)
        .read(new ByteArrayInputStream(jsonl.getBytes(StandardCharsets.UTF_8)));
  }

  private static String row(long ms, int in, int out, String more) {
    return "{\"offset_ms\": "
        + ms
        + ", \"input_length\": "
        + in
        + ", \"output_length\": "
        + out
        + more
        + "}\n";
  }

  /** Where two prompts first differ (the shorter's length when one starts the other). */
  private static int common(int[] a, int[] b) {
    int n = Math.min(a.length, b.length);
    int i = Arrays.mismatch(a, 0, n, b, 0, n);
    return i < 0 ? n : i;
  }

  @Test
  void rowsSharingLeadingHashIdsShareExactlyThoseBlocksTokens() throws Exception {
    Trace t =
        trace(
            row(0, 2000, 4, ", \"hash_ids\": [7, 8, 9]")
                + row(1, 1600, 4, ", \"hash_ids\": [7, 8, 10]")
                + row(2, 1500, 4, ", \"hash_ids\": [7, 8]")
                + row(3, 300, 4, ", \"hash_ids\": [7]")
                + row(4, 2000, 4, ", \"hash_ids\": [8, 7, 9]"));
    TracePrompts p = new TracePrompts(t, 42, Replay.Prefixes.SHARED, PromptSalt.NONE);
    int[] a = p.prompt(0);
    int[] b = p.prompt(1);
    assertThat(a).hasSize(2000);
    assertThat(b).hasSize(1600);
    // [7, 8] in common: exactly their 1,024 tokens, then each row's own.
    assertThat(common(a, b)).isEqualTo(1024);
    // Fewer blocks than the length fills: the rest is the row's own.
    assertThat(common(a, p.prompt(2))).isEqualTo(1024);
    // A block cut by the input length: its first tokens.
    assertThat(p.prompt(3)).containsExactly(Arrays.copyOf(a, 300));
    // Block 7 at another place is the same 512 tokens there.
    int[] e = p.prompt(4);
    assertThat(common(a, e)).isZero();
    assertThat(Arrays.copyOfRange(e, 512, 1024)).containsExactly(Arrays.copyOf(a, 512));
    assertThat(Arrays.copyOfRange(e, 1024, 1536))
        .containsExactly(Arrays.copyOfRange(a, 1024, 1536));
    for (int id : a) {
      assertThat(id).isBetween(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID);
    }
    // From the seed alone: the same again, another seed shares nothing.
    assertThat(new TracePrompts(t, 42, Replay.Prefixes.SHARED, PromptSalt.NONE).prompt(0))
        .containsExactly(a);
    assertThat(
            common(a, new TracePrompts(t, 43, Replay.Prefixes.SHARED, PromptSalt.NONE).prompt(0)))
        .isZero();
  }

  @Test
  void distinctKeepsTheLengthsAndSharesNothing() throws Exception {
    Trace t =
        trace(
            row(0, 1200, 4, ", \"hash_ids\": [7, 8], \"session\": \"s\"")
                + row(1, 1300, 4, ", \"hash_ids\": [7, 8]")
                + row(2, 1400, 4, ", \"session\": \"s\"")
                + row(3, 100, 4, ", \"prefix\": \"sys\", \"prefix_length\": 50")
                + row(4, 100, 4, ", \"prefix\": \"sys\", \"prefix_length\": 50"));
    TracePrompts shared = new TracePrompts(t, 1, Replay.Prefixes.SHARED, PromptSalt.NONE);
    TracePrompts distinct = new TracePrompts(t, 1, Replay.Prefixes.DISTINCT, PromptSalt.NONE);
    assertThat(common(shared.prompt(0), shared.prompt(1))).isEqualTo(1024);
    assertThat(common(shared.prompt(0), shared.prompt(2))).isEqualTo(1200);
    assertThat(common(shared.prompt(3), shared.prompt(4))).isEqualTo(50);
    for (int i = 0; i < t.rows(); i++) {
      assertThat(distinct.prompt(i)).hasSize(t.input(i));
      for (int j = 0; j < i; j++) {
        assertThat(common(distinct.prompt(i), distinct.prompt(j))).as(i + " vs " + j).isZero();
      }
    }
  }

  @Test
  void aTurnIsItsPreviousTurnThenTheAnswerThenItsOwn() throws Exception {
    Trace t =
        trace(
            row(0, 100, 20, ", \"session\": \"chat-1\"")
                + row(10, 50, 5, ", \"session\": \"chat-2\"")
                + row(20, 150, 30, ", \"session\": \"chat-1\"")
                + row(30, 200, 3, ", \"session\": \"chat-1\""));
    TracePrompts p = new TracePrompts(t, 5, Replay.Prefixes.SHARED, PromptSalt.NONE);
    int[] first = p.prompt(0);
    int[] second = p.prompt(2);
    int[] third = p.prompt(3);
    assertThat(second).startsWith(first);
    // 100 prompt + 20 answer: the third turn starts with the second's prompt and its answer.
    assertThat(third).startsWith(second);
    assertThat(common(second, third)).isEqualTo(150);
    // The answer ids are not the turn's own: a turn after another answer differs there.
    assertThat(common(first, p.prompt(1))).isZero();

    ReplaySource source =
        new ReplaySource(t, Replay.Prefixes.SHARED, "m", true, 5, PromptSalt.NONE);
    RequestSpec r = source.request(4, Map.of("authorization", "Bearer k"));
    assertThat(r.turn()).isEqualTo(3);
    assertThat(r.headers())
        .containsEntry(Workload.SESSION_HEADER, "chat-1")
        .containsEntry("authorization", "Bearer k");
    assertThat(source.request(2, Map.of()).headers())
        .containsEntry(Workload.SESSION_HEADER, "chat-2");
    assertThat(source.request(2, Map.of()).turn()).isEqualTo(1);
  }

  @Test
  void aRequestSendsItsRowsExactLengthsAndAWarmUpSharesNothingWithTheRun() throws Exception {
    Trace t = trace(row(0, 700, 9, ", \"hash_ids\": [1, 2]") + row(5, 30, 2, ""));
    ReplaySource source =
        new ReplaySource(t, Replay.Prefixes.SHARED, "sim-llama", false, 3, PromptSalt.NONE);
    RequestSpec r = source.request(1, Map.of());
    assertThat(r.api()).isEqualTo(Api.COMPLETIONS);
    assertThat(r.path()).isEqualTo("/v1/completions");
    assertThat(r.promptTokens()).isEqualTo(700);
    assertThat(r.maxTokens()).isEqualTo(9);
    assertThat(r.turn()).isZero();
    assertThat(r.headers()).isEmpty();
    assertThat(r.bucket()).isEqualTo("trace-1k");
    JsonNode body = JSON.readTree(r.body().getBytes());
    assertThat(body.get("model").asText()).isEqualTo("sim-llama");
    assertThat(body.get("max_tokens").asInt()).isEqualTo(9);
    assertThat(body.get("min_tokens").asInt()).isEqualTo(9);
    assertThat(body.get("ignore_eos").asBoolean()).isTrue();
    assertThat(body.get("stream").asBoolean()).isFalse();
    assertThat(body.has("stream_options")).isFalse();
    int[] sent = new int[700];
    for (int i = 0; i < 700; i++) {
      sent[i] = body.get("prompt").get(i).asInt();
    }
    assertThat(body.get("prompt").size()).isEqualTo(700);
    assertThat(sent)
        .containsExactly(new TracePrompts(t, 3, Replay.Prefixes.SHARED, PromptSalt.NONE).prompt(0));
    assertThat(source.request(2, Map.of()).bucket()).isEqualTo("trace-512");

    // A warm-up request (seq < 0): a row's lengths, ids of its own, no session.
    RequestSpec warm = source.request(-1, Map.of());
    assertThat(warm.promptTokens()).isEqualTo(700);
    JsonNode w = JSON.readTree(warm.body().getBytes());
    int[] warmIds = new int[700];
    for (int i = 0; i < 700; i++) {
      warmIds[i] = w.get("prompt").get(i).asInt();
    }
    assertThat(common(sent, warmIds)).isZero();
    assertThat(source.request(-2, Map.of()).promptTokens()).isEqualTo(30);

    RequestSpec streamed =
        new ReplaySource(t, Replay.Prefixes.SHARED, "m", true, 3, PromptSalt.NONE)
            .request(2, Map.of());
    assertThat(JSON.readTree(streamed.body().getBytes()).get("stream_options").toString())
        .isEqualTo("{\"include_usage\":true}");
    assertThat(ReplaySource.bucket(1)).isEqualTo("trace-512");
    assertThat(ReplaySource.bucket(513)).isEqualTo("trace-1k");
    assertThat(ReplaySource.bucket(1 << 20)).isEqualTo("trace-1024k");
  }
}
