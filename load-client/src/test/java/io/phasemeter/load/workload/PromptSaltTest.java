package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.SharedPrefix;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --prompt-salt}: two salts send the same request numbers with the same lengths and shapes
 * but no 16-token block in common (a prefix cache's block, vLLM's and the simulator's), warm-up
 * requests included; within one salt, what a run shares it still shares exactly.
 */
class PromptSaltTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A prefix cache's block, in tokens. */
  private static final int BLOCK = 16;

  private static final PromptSalt A = PromptSalt.of(0x0123_4567_89ab_cdefL);
  private static final PromptSalt B = PromptSalt.of(0xfeed_0000_0000_0001L);
  private static final List<PromptSalt> SALTS = List.of(PromptSalt.NONE, A, B);

  /**
   * Rows 0 and 1 share hash ids [1, 2] (1,024 tokens); rows 2 and 3 are a session's turns (turn 2:
   * turn 1's 300, 6 standing for its answer, 94 of its own); rows 4 and 5 share a named prefix of
   * 600.
   */
  static final String TRACE =
      "{\"offset_ms\": 0, \"input_length\": 1200, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n"
          + "{\"offset_ms\": 1, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2,"
          + " 4]}\n"
          + "{\"offset_ms\": 2, \"input_length\": 300, \"output_length\": 6, \"session\": \"a\"}\n"
          + "{\"offset_ms\": 3, \"input_length\": 400, \"output_length\": 6, \"session\": \"a\"}\n"
          + "{\"offset_ms\": 4, \"input_length\": 900, \"output_length\": 7, \"prefix\": \"sys\","
          + " \"prefix_length\": 600}\n"
          + "{\"offset_ms\": 5, \"input_length\": 800, \"output_length\": 7, \"prefix\": \"sys\","
          + " \"prefix_length\": 600}\n";

  @TempDir Path dir;

  private static int[] ids(RequestSpec spec) throws Exception {
    JsonNode body = JSON.readTree(spec.body().getBytes());
    JsonNode a = body.has("prompt") ? body.get("prompt") : body.get("input");
    int[] ids = new int[a.size()];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = a.get(i).asInt();
    }
    return ids;
  }

  /** Every whole block of 16 ids of a prompt, wherever it stands. */
  private static Set<List<Integer>> blocks(int[] ids) {
    Set<List<Integer>> blocks = new HashSet<>();
    for (int b = 0; b + BLOCK <= ids.length; b += BLOCK) {
      List<Integer> block = new ArrayList<>(BLOCK);
      for (int i = b; i < b + BLOCK; i++) {
        block.add(ids[i]);
      }
      blocks.add(block);
    }
    return blocks;
  }

  private static void assertNoBlockInCommon(int[] a, int[] b, String what) {
    Set<List<Integer>> common = blocks(a);
    common.retainAll(blocks(b));
    assertThat(common).as(what).isEmpty();
  }

  /** Where two prompts first differ (the shorter's length when one starts the other). */
  private static int common(int[] a, int[] b) {
    int n = Math.min(a.length, b.length);
    int i = Arrays.mismatch(a, 0, n, b, 0, n);
    return i < 0 ? n : i;
  }

  @Test
  void aSaltIsHexOrNoneAndReadsBackAsTheConditionsWriteIt() {
    assertThat(PromptSalt.parse("--prompt-salt", "none")).isEqualTo(PromptSalt.NONE);
    assertThat(PromptSalt.parse("--prompt-salt", "0")).isEqualTo(PromptSalt.NONE);
    assertThat(PromptSalt.parse("--prompt-salt", "0x000")).isEqualTo(PromptSalt.NONE);
    assertThat(PromptSalt.NONE.hex()).isEqualTo("none");
    PromptSalt ff = PromptSalt.parse("--prompt-salt", " 0x00FF ");
    assertThat(ff.value()).isEqualTo(255);
    assertThat(ff.drawn()).isFalse();
    assertThat(ff.hex()).isEqualTo("00000000000000ff");
    assertThat(PromptSalt.parse("--prompt-salt", "ffffffffffffffff").value()).isEqualTo(-1L);
    PromptSalt fresh = PromptSalt.fresh();
    assertThat(fresh.drawn()).isTrue();
    assertThat(fresh.none()).isFalse();
    assertThat(fresh.hex()).hasSize(16);
    assertThat(PromptSalt.parse("--prompt-salt", fresh.hex()).value()).isEqualTo(fresh.value());
    assertThat(PromptSalt.fresh().value()).isNotEqualTo(fresh.value());
    for (String bad : new String[] {"", "salt", "12345678901234567", "-1", "0x"}) {
      assertThatThrownBy(() -> PromptSalt.parse("--prompt-salt", bad))
          .as(bad)
          .hasMessage(
              "--prompt-salt must be up to 16 hex digits (as the conditions' prompt_salt records"
                  + " it), or none (0) for no salt, got '"
                  + bad
                  + "'");
    }
  }

  @Test
  void twoSaltsSendTheSameShapesWithNoBlockInCommon() throws Exception {
    Mix mix = Mix.parse("1k:8=0.5,200:4=0.3,40:3=0.2");
    for (boolean embeddings : new boolean[] {false, true}) {
      List<Workload> ws = new ArrayList<>();
      for (PromptSalt s : SALTS) {
        Workload w =
            embeddings ? Workload.embeddings("m", mix, 7) : Workload.completions("m", mix, true, 7);
        ws.add(w.withSalt(s));
      }
      for (long seq = -5; seq <= 40; seq++) {
        for (int i = 0; i < ws.size(); i++) {
          RequestSpec a = ws.get(i).request(seq);
          for (int j = i + 1; j < ws.size(); j++) {
            RequestSpec b = ws.get(j).request(seq);
            String what = (embeddings ? "embeddings " : "completions ") + seq + " " + i + "/" + j;
            assertThat(b.bucket()).as(what).isEqualTo(a.bucket());
            assertThat(b.promptTokens()).as(what).isEqualTo(a.promptTokens());
            assertThat(b.maxTokens()).as(what).isEqualTo(a.maxTokens());
            assertNoBlockInCommon(ids(a), ids(b), what);
          }
        }
      }
    }
    // From the seed, the salt and the number alone, in whatever order requests are built.
    Workload w = Workload.completions("m", mix, true, 7).withSalt(A);
    Workload v = Workload.completions("m", mix, true, 7).withSalt(A);
    for (long seq = 30; seq >= -3; seq--) {
      v.request(seq);
    }
    assertThat(v.request(12).body()).isEqualTo(w.request(12).body());
  }

  @Test
  void aSaltedRunsWarmUpSharesNoBlockWithItsRequests() throws Exception {
    Workload w = Workload.completions("m", Mix.parse("200:4=1"), true, 7).withSalt(A);
    Set<List<Integer>> run = new HashSet<>();
    for (long seq = 1; seq <= 200; seq++) {
      run.addAll(blocks(ids(w.request(seq))));
    }
    for (long seq = -1; seq >= -200; seq--) {
      Set<List<Integer>> warm = blocks(ids(w.request(seq)));
      warm.retainAll(run);
      assertThat(warm).as("warm-up " + seq).isEmpty();
    }
  }

  @Test
  void freeTextCarriesTheSaltAfterItsNumber() throws Exception {
    for (boolean chat : new boolean[] {true, false}) {
      Workload plain =
          chat ? Workload.chat("m", 64, true, 3) : Workload.responses("m", 64, true, 3);
      String none = text(plain.request(12), chat);
      String salted = text(plain.withSalt(A).request(12), chat);
      assertThat(none).startsWith("Request 12: write a short paragraph about ");
      // The same topic (a pick), the salt's mark after the number.
      assertThat(salted)
          .isEqualTo(none.replace("Request 12:", "Request 12 (run 0123456789abcdef):"));
      assertThat(text(plain.withSalt(B).request(12), chat)).isNotEqualTo(salted);
    }
  }

  private static String text(RequestSpec spec, boolean chat) throws Exception {
    JsonNode body = JSON.readTree(spec.body().getBytes());
    return chat ? body.get("messages").get(0).get("content").asText() : body.get("input").asText();
  }

  @Test
  void sharedPrefixesStaySharedUnderOneSaltAndTheWarmUpHasItsOwn() throws Exception {
    SharedPrefix sp = new SharedPrefix(96, 3);
    Mix mix = Mix.parse("200:4=0.5,300:8=0.5");
    List<Workload> ws = new ArrayList<>();
    for (PromptSalt s : SALTS) {
      ws.add(sp.workload("m", Api.COMPLETIONS, mix, true, 7, s));
    }
    for (int i = 0; i < ws.size(); i++) {
      Workload w = ws.get(i);
      Set<List<Integer>> run = new HashSet<>();
      for (long seq = 1; seq <= 40; seq++) {
        int[] a = ids(w.request(seq));
        run.addAll(blocks(a));
        for (long other = 1; other < seq; other++) {
          // The same requests share a prefix as without a salt: the pick is the seed's.
          boolean sharesNow = common(a, ids(w.request(other))) >= 96;
          boolean sharedBefore =
              common(ids(ws.get(0).request(seq)), ids(ws.get(0).request(other))) >= 96;
          assertThat(sharesNow).as(seq + " and " + other).isEqualTo(sharedBefore);
          if (sharesNow) {
            assertThat(common(a, ids(w.request(other)))).isEqualTo(96);
          }
        }
        for (int j = i + 1; j < ws.size(); j++) {
          RequestSpec b = ws.get(j).request(seq);
          assertThat(b.bucket()).isEqualTo(w.request(seq).bucket());
          assertNoBlockInCommon(a, ids(b), "salts " + i + "/" + j + ", request " + seq);
        }
      }
      // The warm-up's prefixes are its own: nothing of it is in the run's blocks.
      for (long seq = -1; seq >= -40; seq--) {
        Set<List<Integer>> warm = blocks(ids(w.request(seq)));
        warm.retainAll(run);
        assertThat(warm).as("salt " + i + ", warm-up " + seq).isEmpty();
      }
    }
  }

  @Test
  void aReplayedTraceSharesExactlyWhatItSaysUnderEverySaltAndNothingAcrossSalts() throws Exception {
    Path trace = dir.resolve("t.jsonl");
    Files.writeString(trace, TRACE);
    var replayed = new Replay(trace, Replay.Format.JSONL, 1.0, 0, Replay.Prefixes.SHARED).load();
    var distinct = new Replay(trace, Replay.Format.JSONL, 1.0, 0, Replay.Prefixes.DISTINCT).load();
    List<Workload> ws = new ArrayList<>();
    for (PromptSalt s : SALTS) {
      ws.add(replayed.workload("m", true, 7, s));
    }
    for (int i = 0; i < ws.size(); i++) {
      Workload w = ws.get(i);
      int[][] rows = new int[6][];
      Set<List<Integer>> run = new HashSet<>();
      for (int r = 0; r < 6; r++) {
        rows[r] = ids(w.request(r + 1));
        run.addAll(blocks(rows[r]));
      }
      // Hash ids [1, 2] in common: their 1,024 tokens exactly.
      assertThat(common(rows[0], rows[1])).isEqualTo(1024);
      // Turn 2 starts with turn 1's prompt, then 6 ids for its answer and its own.
      assertThat(Arrays.copyOf(rows[3], 300)).containsExactly(rows[2]);
      // A named prefix of 600.
      assertThat(common(rows[4], rows[5])).isEqualTo(600);
      // Warm-up rows: the lengths of a row, ids of their own.
      for (long seq = -1; seq >= -6; seq--) {
        Set<List<Integer>> warm = blocks(ids(w.request(seq)));
        warm.retainAll(run);
        assertThat(warm).as("salt " + i + ", warm-up " + seq).isEmpty();
      }
      for (int j = i + 1; j < ws.size(); j++) {
        for (int r = 0; r < 6; r++) {
          int[] other = ids(ws.get(j).request(r + 1));
          assertThat(other).hasSameSizeAs(rows[r]);
          assertNoBlockInCommon(rows[r], other, "salts " + i + "/" + j + ", row " + r);
        }
      }
    }
    // --replay-prefixes distinct: "distinct" blocks are another run's too, unless salted alike.
    Workload d1 = distinct.workload("m", true, 7, A);
    Workload d2 = distinct.workload("m", true, 7, B);
    for (int r = 1; r <= 6; r++) {
      assertNoBlockInCommon(ids(d1.request(r)), ids(d2.request(r)), "distinct row " + r);
      assertThat(d1.request(r).body())
          .isEqualTo(distinct.workload("m", true, 7, A).request(r).body());
    }
  }

  @Test
  void aSessionsTurnStillStartsWithThePreviousPromptAndTwoSaltsShareNoBlock() throws Exception {
    List<List<int[]>> bySalt = new ArrayList<>();
    for (PromptSalt s : SALTS) {
      Conversation.Shape shape =
          new Conversation.Shape(
              "m",
              Api.COMPLETIONS,
              Mix.parse("40:3=0.5,64:7=0.5"),
              0,
              true,
              11,
              Map.of(),
              new SessionSpec(1, 5, Duration.ZERO, 100_000),
              s);
      Conversation c = new Conversation(shape, "r-s1", 1);
      List<int[]> turns = new ArrayList<>();
      while (!c.finished()) {
        turns.add(ids(c.next()));
        c.answered(5, null);
      }
      for (int k = 1; k < turns.size(); k++) {
        int[] previous = turns.get(k - 1);
        assertThat(Arrays.copyOf(turns.get(k), previous.length)).containsExactly(previous);
      }
      bySalt.add(turns);
    }
    for (int i = 0; i < SALTS.size(); i++) {
      for (int j = i + 1; j < SALTS.size(); j++) {
        for (int k = 0; k < 5; k++) {
          int[] a = bySalt.get(i).get(k);
          int[] b = bySalt.get(j).get(k);
          // The same lengths: the shapes are the seed's.
          assertThat(b).hasSameSizeAs(a);
          assertNoBlockInCommon(a, b, "salts " + i + "/" + j + ", turn " + (k + 1));
        }
      }
    }
  }
}
