package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ConversationTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static Conversation.Shape completions(String mix, int turns, int maxTokens) {
    return new Conversation.Shape(
        "m",
        Api.COMPLETIONS,
        Mix.parse(mix),
        0,
        true,
        11,
        Map.of("authorization", "Bearer k"),
        new SessionSpec(2, turns, Duration.ZERO, maxTokens),
        PromptSalt.NONE);
  }

  private static Conversation.Shape chat(int turns) {
    return new Conversation.Shape(
        "m",
        Api.CHAT,
        null,
        16,
        false,
        11,
        Map.of(),
        new SessionSpec(1, turns, Duration.ofMillis(5), SessionSpec.DEFAULT_MAX_TOKENS),
        PromptSalt.NONE);
  }

  private static List<Integer> ids(RequestSpec spec) throws Exception {
    List<Integer> ids = new ArrayList<>();
    for (JsonNode id : JSON.readTree(spec.body().getBytes()).get("prompt")) {
      ids.add(id.asInt());
    }
    return ids;
  }

  @Test
  void eachPromptIsThePreviousPromptThenTheAnswerAndTheNewInput() throws Exception {
    // Two shapes, so that the turns' lengths differ and the sum is checked turn by turn.
    Conversation c = new Conversation(completions("40:3=0.5,20:7=0.5", 5, 100_000), "r-s1", 1);
    List<Integer> previous = List.of();
    long expected = 0;
    int lastAnswer = 0;
    for (int turn = 1; turn <= 5; turn++) {
      RequestSpec spec = c.next();
      assertThat(spec.turn()).isEqualTo(turn);
      assertThat(spec.headers())
          .containsEntry(Workload.SESSION_HEADER, "r-s1")
          .containsEntry("authorization", "Bearer k");
      JsonNode body = JSON.readTree(spec.body().getBytes());
      int in = spec.bucket().startsWith("40") ? 40 : 20;
      int out = in == 40 ? 3 : 7;
      assertThat(spec.maxTokens()).isEqualTo(out);
      assertThat(body.get("min_tokens").asInt()).isEqualTo(out);
      assertThat(body.get("ignore_eos").asBoolean()).isTrue();
      // The answer's ids stand for what usage reported, not what was asked: 1 fewer here.
      expected += turn == 1 ? in : lastAnswer + in;
      List<Integer> ids = ids(spec);
      assertThat(spec.promptTokens()).isEqualTo((int) expected).isEqualTo(ids.size());
      assertThat(ids.subList(0, previous.size())).isEqualTo(previous);
      previous = ids;
      lastAnswer = out - 1;
      c.answered(lastAnswer, null);
    }
    assertThat(c.finished()).isTrue();
    assertThat(c.atLimit()).isFalse();
    assertThatThrownBy(c::next).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void turnsAreDeterministicPerSeedSessionAndTurnAndDifferAcrossSessions() throws Exception {
    Conversation.Shape shape = completions("30:4=1", 2, 100_000);
    Conversation a = new Conversation(shape, "x-s1", 1);
    Conversation b = new Conversation(shape, "y-s1", 1);
    Conversation other = new Conversation(shape, "x-s2", 2);
    List<Integer> a1 = ids(a.next());
    assertThat(ids(b.next())).isEqualTo(a1);
    assertThat(ids(other.next())).isNotEqualTo(a1);
    a.answered(4, null);
    b.answered(4, null);
    assertThat(ids(a.next())).isEqualTo(ids(b.next()));
  }

  @Test
  void anAnswerWithoutUsageCountsTheTokensAskedFor() throws Exception {
    Conversation c = new Conversation(completions("10:6=1", 2, 100_000), "s", 1);
    c.next();
    c.answered(-1, null);
    assertThat(c.next().promptTokens()).isEqualTo(10 + 6 + 10);
  }

  @Test
  void aSessionEndsBeforeATurnPastItsTokenLimitAndNotOneTokenEarlier() {
    // Turn 1: 10 in + 5 out = 15; turn 2: prompt 10 + 5 + 10 = 25, + 5 out = 30.
    Conversation exact = new Conversation(completions("10:5=1", 3, 30), "s", 1);
    exact.next();
    exact.answered(5, null);
    assertThat(exact.next().promptTokens()).isEqualTo(25);
    exact.answered(5, null);
    assertThat(exact.next()).isNull(); // turn 3 would need 45
    assertThat(exact.atLimit()).isTrue();
    assertThat(exact.turnsSent()).isEqualTo(2);

    Conversation below = new Conversation(completions("10:5=1", 3, 29), "s", 1);
    below.next();
    below.answered(5, null);
    assertThat(below.next()).isNull();
    assertThat(below.atLimit()).isTrue();
    assertThat(below.turnsSent()).isEqualTo(1);
  }

  @Test
  void aFirstTurnAboveTheLimitOrAnApiWithoutHistoryIsRefused() {
    assertThatThrownBy(() -> completions("10:5=0.5,100:20=0.5", 2, 119))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--session-max-tokens 119")
        .hasMessageContaining("100 input + 20 output");
    for (Api api : List.of(Api.RESPONSES, Api.EMBEDDINGS)) {
      assertThatThrownBy(
              () ->
                  new Conversation.Shape(
                      "m",
                      api,
                      Mix.parse("1:1=1"),
                      1,
                      false,
                      1,
                      Map.of(),
                      new SessionSpec(1, 1, null, 10),
                      PromptSalt.NONE))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("--sessions goes with --api completions or chat");
    }
  }

  @Test
  void chatHistoryHoldsThePromptsAndTheAnswersInOrder() throws Exception {
    Conversation c = new Conversation(chat(3), "r-s4", 4);
    assertThat(c.needsAnswerText()).isTrue();
    List<String> sent = new ArrayList<>();
    for (int turn = 1; turn <= 3; turn++) {
      RequestSpec spec = c.next();
      assertThat(spec.turn()).isEqualTo(turn);
      assertThat(spec.promptTokens()).isEqualTo(-1);
      assertThat(spec.maxTokens()).isEqualTo(16);
      assertThat(spec.headers()).containsEntry(Workload.SESSION_HEADER, "r-s4");
      JsonNode messages = JSON.readTree(spec.body().getBytes()).get("messages");
      assertThat(messages.size()).isEqualTo(2 * turn - 1);
      for (int i = 0; i < sent.size(); i++) {
        assertThat(messages.get(i).get("role").asText())
            .isEqualTo(i % 2 == 0 ? "user" : "assistant");
        assertThat(messages.get(i).get("content").asText()).isEqualTo(sent.get(i));
      }
      JsonNode last = messages.get(messages.size() - 1);
      assertThat(last.get("role").asText()).isEqualTo("user");
      // Session 4's turn: numbered after sessions 1 to 3's.
      assertThat(last.get("content").asText())
          .startsWith("Request " + (3 * SessionSpec.MAX_TURNS + turn) + ":");
      sent.add(last.get("content").asText());
      String answer = "answer \"" + turn + "\" \u00e9\n";
      c.answered(7, answer);
      sent.add(answer);
    }
    assertThat(c.finished()).isTrue();
    assertThat(c.atLimit()).isFalse();
  }

  @Test
  void noTwoChatSessionsSendTheSamePrompt() throws Exception {
    java.util.Set<String> first = new java.util.HashSet<>();
    for (int n = 1; n <= 100; n++) {
      Conversation c = new Conversation(chat(2), "r-s" + n, n);
      first.add(JSON.readTree(c.next().body().getBytes()).get("messages").toString());
    }
    // Ten topics: keyed by the turn alone, a hundred sessions sent at most ten first prompts.
    assertThat(first).hasSize(100);
  }

  @Test
  void theLastAnswerIsNotKeptSoItNeverEndsTheSessionAtItsLimit() throws Exception {
    Conversation probe = new Conversation(chat(1), "s", 1);
    JsonNode first = JSON.readTree(probe.next().body().getBytes()).get("messages").get(0);
    int prompt1 = Utf8.length(first.get("content").asText());
    // A one-turn session whose answer would pass the history's limit: it sent every turn.
    Conversation c = new Conversation(chat(1), "s", 1, 64, prompt1 + 9);
    c.next();
    c.answered(1, "0123456789");
    assertThat(c.finished()).isTrue();
    assertThat(c.atLimit()).isFalse();
  }

  @Test
  void theRunsChatHistoryIsSharedByItsSessionsUpToTheirLimit() throws Exception {
    assertThat(Conversation.historyBytesPerSession(1)).isEqualTo(1 << 20);
    assertThat(Conversation.historyBytesPerSession(256)).isEqualTo(1 << 20);
    assertThat(Conversation.historyBytesPerSession(257)).isEqualTo((256 << 20) / 257);
    assertThat(Conversation.historyBytesPerSession(4096)).isEqualTo(64 * 1024);
    assertThat(Conversation.MAX_CHAT_SESSIONS).isEqualTo(4096);
    assertThat((long) Conversation.MAX_CHAT_SESSIONS * Conversation.historyBytesPerSession(4096))
        .isEqualTo(Conversation.RUN_HISTORY_BYTES);

    // At the limit: 4,096 sessions keep 64 KiB each, so one whole answer after a prompt ends one.
    String answer = "x".repeat(Conversation.MAX_ANSWER_BYTES);
    Conversation most = new Conversation(chatSessions(4096, 3), "s", 1);
    most.next();
    most.answered(1, answer);
    assertThat(most.atLimit()).isTrue();
    Conversation fewer = new Conversation(chatSessions(256, 3), "s", 1);
    fewer.next();
    fewer.answered(1, answer);
    assertThat(fewer.atLimit()).isFalse();
    JsonNode kept = JSON.readTree(fewer.next().body().getBytes()).get("messages").get(1);
    assertThat(kept.get("content").asText()).isEqualTo(answer);
    assertThatThrownBy(() -> chatSessions(4097, 3))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "--sessions 4097 with --api chat: at most 4096 (the run keeps at most 256 MiB of chat"
                + " history, and each session at least one answer's 64 KiB)");
  }

  private static Conversation.Shape chatSessions(int count, int turns) {
    return new Conversation.Shape(
        "m",
        Api.CHAT,
        null,
        16,
        false,
        11,
        Map.of(),
        new SessionSpec(count, turns, Duration.ZERO, SessionSpec.DEFAULT_MAX_TOKENS),
        null);
  }

  @Test
  void aChatAnswerIsKeptUpToItsLimitInWholeCharacters() throws Exception {
    Conversation c = new Conversation(chat(2), "s", 1, 8, 1_000_000);
    c.next();
    // 7 ASCII bytes, then a 2-byte character: 9 bytes; the limit of 8 keeps the 7.
    c.answered(1, "abcdefg\u00e9");
    JsonNode messages = JSON.readTree(c.next().body().getBytes()).get("messages");
    assertThat(messages.get(1).get("content").asText()).isEqualTo("abcdefg");

    Conversation exact = new Conversation(chat(2), "s", 1, 8, 1_000_000);
    exact.next();
    exact.answered(1, "abcdef\u00e9"); // exactly 8 bytes
    messages = JSON.readTree(exact.next().body().getBytes()).get("messages");
    assertThat(messages.get(1).get("content").asText()).isEqualTo("abcdef\u00e9");
  }

  @Test
  void aChatHistoryMayReachItsLimitAndEndsPastIt() throws Exception {
    Conversation probe = new Conversation(chat(3), "s", 1);
    JsonNode first = JSON.readTree(probe.next().body().getBytes()).get("messages").get(0);
    int prompt1 = Utf8.length(first.get("content").asText());
    // The history after turn 1: its prompt and a 10-byte answer; the limit lets exactly that in.
    Conversation atLimit = new Conversation(chat(3), "s", 1, 64, prompt1 + 10);
    atLimit.next();
    atLimit.answered(1, "0123456789");
    assertThat(atLimit.atLimit()).isFalse();
    assertThat(atLimit.next()).isNull(); // turn 2's prompt would pass it
    assertThat(atLimit.atLimit()).isTrue();

    Conversation over = new Conversation(chat(3), "s", 1, 64, prompt1 + 9);
    over.next();
    over.answered(1, "0123456789");
    assertThat(over.atLimit()).isTrue();
    assertThatThrownBy(over::next).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void itsTextNamesTheSessionButNotTheHistory() {
    Conversation c = new Conversation(chat(2), "r-s9", 9);
    c.next();
    c.answered(1, "a secret answer");
    assertThat(c.toString()).contains("r-s9").doesNotContain("secret");
  }
}
