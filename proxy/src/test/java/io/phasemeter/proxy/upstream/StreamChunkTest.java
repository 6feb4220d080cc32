package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.upstream.StreamChunk.Kind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class StreamChunkTest {

  private static final String CHAT =
      "{\"id\":\"chatcmpl-9d1e4c\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,"
          + "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",";
  private static final String COMPLETION =
      "{\"id\":\"cmpl-5b2f\",\"object\":\"text_completion\",\"created\":1730000000,"
          + "\"model\":\"meta-llama/Llama-3.1-8B\",";

  private static String chat(String delta, String finishReason) {
    return CHAT
        + "\"choices\":[{\"index\":0,\"delta\":"
        + delta
        + ",\"logprobs\":null,\"finish_reason\":"
        + finishReason
        + "}]}";
  }

  private static String completion(String text, String finishReason) {
    return COMPLETION
        + "\"choices\":[{\"index\":0,\"text\":\""
        + text
        + "\",\"logprobs\":null,\"finish_reason\":"
        + finishReason
        + ",\"stop_reason\":null}]}";
  }

  @Test
  void roleChunk() {
    StreamChunk chunk =
        StreamChunk.inspect(chat("{\"role\":\"assistant\",\"content\":\"\"}", "null"));

    assertThat(chunk.kind()).isEqualTo(Kind.ROLE_ONLY);
    assertThat(chunk.hasContent()).isFalse();
    assertThat(chunk.finishReason()).isNull();
    assertThat(chunk.hasUsage()).isFalse();
    assertThat(chunk.promptTokens()).isEqualTo(-1);
    assertThat(chunk.completionTokens()).isEqualTo(-1);
    assertThat(chunk.choicesEmpty()).isFalse();
    assertThat(StreamChunk.inspect(chat("{\"role\":\"assistant\"}", "null")).kind())
        .isEqualTo(Kind.ROLE_ONLY);
  }

  @Test
  void contentChunk() {
    StreamChunk chunk = StreamChunk.inspect(chat("{\"content\":\" world\"}", "null"));

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.hasContent()).isTrue();
    assertThat(chunk.finishReason()).isNull();
  }

  @Test
  void roleChunkThatAlreadyCarriesContentIsContent() {
    assertThat(
            StreamChunk.inspect(chat("{\"role\":\"assistant\",\"content\":\"Hi\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
  }

  @Test
  void emptyOrNullContentIsNotContent() {
    assertThat(StreamChunk.inspect(chat("{\"content\":\"\"}", "null")).kind())
        .isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(chat("{\"content\":null}", "null")).kind())
        .isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(chat("{}", "null")).hasContent()).isFalse();
  }

  @Test
  void finishChunk() {
    StreamChunk chunk =
        StreamChunk.inspect(
            CHAT
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
                + "\"finish_reason\":\"stop\",\"stop_reason\":null}]}");

    assertThat(chunk.kind()).isEqualTo(Kind.FINISH_ONLY);
    assertThat(chunk.finishReason()).isEqualTo("stop");
    assertThat(chunk.hasContent()).isFalse();
  }

  @Test
  void contentWinsOverFinishReason() {
    StreamChunk chunk = StreamChunk.inspect(chat("{\"content\":\".\"}", "\"length\""));

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.finishReason()).isEqualTo("length");
  }

  @Test
  void finalUsageChunk() {
    StreamChunk chunk =
        StreamChunk.inspect(
            CHAT
                + "\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":19,"
                + "\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":8}}}");

    assertThat(chunk.kind()).isEqualTo(Kind.USAGE_ONLY);
    assertThat(chunk.choicesEmpty()).isTrue();
    assertThat(chunk.hasUsage()).isTrue();
    assertThat(chunk.promptTokens()).isEqualTo(12);
    assertThat(chunk.completionTokens()).isEqualTo(7);
    assertThat(chunk.hasContent()).isFalse();
  }

  @Test
  void continuousUsageStatsDoNotHideContent() {
    String usage = ",\"usage\":{\"prompt_tokens\":12,\"total_tokens\":15,\"completion_tokens\":3}}";
    String content = chat("{\"content\":\"lo\"}", "null");
    String role = chat("{\"role\":\"assistant\",\"content\":\"\"}", "null");

    StreamChunk chunk = StreamChunk.inspect(content.substring(0, content.length() - 1) + usage);
    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.hasUsage()).isTrue();
    assertThat(chunk.promptTokens()).isEqualTo(12);
    assertThat(chunk.completionTokens()).isEqualTo(3);

    assertThat(StreamChunk.inspect(role.substring(0, role.length() - 1) + usage).kind())
        .isEqualTo(Kind.ROLE_ONLY);
  }

  @Test
  void usageOnAChoiceThatCarriesNothingIsNotUsageOnly() {
    String chunk = chat("{\"content\":\"\"}", "null");
    String withUsage =
        chunk.substring(0, chunk.length() - 1)
            + ",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}";

    assertThat(StreamChunk.inspect(withUsage).kind()).isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(withUsage).hasUsage()).isTrue();
  }

  @Test
  void nullUsageIsNoUsage() {
    StreamChunk chunk =
        StreamChunk.inspect(
            CHAT + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":null}");

    assertThat(chunk.hasUsage()).isFalse();
    assertThat(chunk.promptTokens()).isEqualTo(-1);
  }

  @Test
  void usageWithoutIntegerCountsKeepsMinusOne() {
    StreamChunk chunk =
        StreamChunk.inspect(
            "{\"choices\":[],\"usage\":{\"prompt_tokens\":\"12\",\"completion_tokens\":null}}");

    assertThat(chunk.kind()).isEqualTo(Kind.USAGE_ONLY);
    assertThat(chunk.promptTokens()).isEqualTo(-1);
    assertThat(chunk.completionTokens()).isEqualTo(-1);
  }

  @Test
  void doneSentinel() {
    assertThat(StreamChunk.inspect("[DONE]").kind()).isEqualTo(Kind.DONE);
    assertThat(StreamChunk.inspect(" [DONE] \n").kind()).isEqualTo(Kind.DONE);
    assertThat(StreamChunk.inspect("[DONE]").hasUsage()).isFalse();
  }

  @Test
  void toolCallsAreContent() {
    String call =
        "{\"tool_calls\":[{\"index\":0,\"id\":\"chatcmpl-tool-1\",\"type\":\"function\","
            + "\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}";
    String arguments =
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \"}}]}";

    assertThat(StreamChunk.inspect(chat(call, "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(StreamChunk.inspect(chat(arguments, "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(StreamChunk.inspect(chat("{\"tool_calls\":[]}", "null")).kind())
        .isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(chat("{\"tool_calls\":[]}", "\"tool_calls\"")).kind())
        .isEqualTo(Kind.FINISH_ONLY);
  }

  @Test
  void reasoningIsContent() {
    assertThat(StreamChunk.inspect(chat("{\"reasoning_content\":\"Let me\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
    assertThat(StreamChunk.inspect(chat("{\"reasoning\":\"think\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
    assertThat(StreamChunk.inspect(chat("{\"reasoning_content\":\"\"}", "null")).kind())
        .isEqualTo(Kind.EMPTY);
  }

  @Test
  void completionsTextChunks() {
    assertThat(StreamChunk.inspect(completion(" world", "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(StreamChunk.inspect(completion("", "null")).kind()).isEqualTo(Kind.EMPTY);

    StreamChunk last = StreamChunk.inspect(completion("", "\"length\""));
    assertThat(last.kind()).isEqualTo(Kind.FINISH_ONLY);
    assertThat(last.finishReason()).isEqualTo("length");

    StreamChunk usage =
        StreamChunk.inspect(
            COMPLETION
                + "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":21,"
                + "\"completion_tokens\":16}}");
    assertThat(usage.kind()).isEqualTo(Kind.USAGE_ONLY);
    assertThat(usage.completionTokens()).isEqualTo(16);
  }

  @Test
  void severalChoices() {
    StreamChunk chunk =
        StreamChunk.inspect(
            CHAT
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":null},"
                + "{\"index\":1,\"delta\":{\"content\":\"\"},\"finish_reason\":\"length\"},"
                + "{\"index\":2,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}");

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.finishReason()).isEqualTo("length");
  }

  @Test
  void contentInsideOtherFieldsIsNotGeneratedContent() {
    StreamChunk chunk =
        StreamChunk.inspect(
            CHAT
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":{\"content\":"
                + "[{\"token\":\"x\",\"logprob\":-0.1,\"bytes\":[120],\"top_logprobs\":[]}]},"
                + "\"finish_reason\":null,\"text\":null}],\"content\":\"not a delta\"}");

    assertThat(chunk.kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void objectsWithNothingToReportAreEmpty() {
    assertThat(StreamChunk.inspect("{}").kind()).isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(chat("{}", "null")).kind()).isEqualTo(Kind.EMPTY);
    assertThat(
            StreamChunk.inspect(
                    "{\"object\":\"error\",\"message\":\"boom\",\"type\":\"BadRequestError\","
                        + "\"param\":null,\"code\":400}")
                .kind())
        .isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(CHAT + "\"choices\":null}").kind()).isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(null).kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void emptyChoicesWithoutUsage() {
    StreamChunk chunk = StreamChunk.inspect(CHAT + "\"choices\":[]}");

    assertThat(chunk.kind()).isEqualTo(Kind.EMPTY);
    assertThat(chunk.choicesEmpty()).isTrue();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "   ",
        "not json",
        "{'choices':[]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"",
        "{\"choices\":",
        "{\"choices\"",
        "{\"usage\":{\"prompt_tokens\":12,",
        "{\"a\":1}}",
        "{} {}",
        "{\"a\":1} trailing",
        "[1,2]",
        "42",
        "\"text\"",
        "null",
        "{\"choices\":[{\"delta\":{\"content\":\"\\x\"}}]}",
        "{\"usage\":{\"prompt_tokens\":99999999999999999999999}}",
        "[DONE",
      })
  void malformedInputIsReportedNotThrown(String data) {
    StreamChunk chunk = StreamChunk.inspect(data);

    assertThat(chunk.kind()).isEqualTo(Kind.MALFORMED);
    assertThat(chunk.hasContent()).isFalse();
    assertThat(chunk.hasUsage()).isFalse();
  }

  @Test
  void deeplyNestedInputIsMalformed() {
    String deep = "{\"x\":" + "[".repeat(100_000) + "]".repeat(100_000) + "}";

    assertThat(StreamChunk.inspect(deep).kind()).isEqualTo(Kind.MALFORMED);
  }
}
