package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.upstream.StreamChunk.Kind;
import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.List;
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

  private static StreamChunk inspect(String data) {
    return StreamChunk.inspect(Buffer.buffer(data));
  }

  /** A comment-only event: no data field. */
  private static SseEvent keepAlive() {
    List<SseEvent> events = new ArrayList<>();
    new SseParser(1024).feed(Buffer.buffer(": keep-alive\n\n"), event -> events.add(event.copy()));
    return events.get(0);
  }

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
    StreamChunk chunk = inspect(chat("{\"role\":\"assistant\",\"content\":\"\"}", "null"));

    assertThat(chunk.kind()).isEqualTo(Kind.ROLE_ONLY);
    assertThat(chunk.hasContent()).isFalse();
    assertThat(chunk.finishReason()).isNull();
    assertThat(chunk.hasUsage()).isFalse();
    assertThat(chunk.promptTokens()).isEqualTo(-1);
    assertThat(chunk.completionTokens()).isEqualTo(-1);
    assertThat(chunk.choicesEmpty()).isFalse();
    assertThat(inspect(chat("{\"role\":\"assistant\"}", "null")).kind()).isEqualTo(Kind.ROLE_ONLY);
  }

  @Test
  void contentChunk() {
    StreamChunk chunk = inspect(chat("{\"content\":\" world\"}", "null"));

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.hasContent()).isTrue();
    assertThat(chunk.finishReason()).isNull();
  }

  @Test
  void roleChunkThatAlreadyCarriesContentIsContent() {
    assertThat(inspect(chat("{\"role\":\"assistant\",\"content\":\"Hi\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
  }

  @Test
  void emptyOrNullContentIsNotContent() {
    assertThat(inspect(chat("{\"content\":\"\"}", "null")).kind()).isEqualTo(Kind.EMPTY);
    assertThat(inspect(chat("{\"content\":null}", "null")).kind()).isEqualTo(Kind.EMPTY);
    assertThat(inspect(chat("{}", "null")).hasContent()).isFalse();
  }

  @Test
  void finishChunk() {
    StreamChunk chunk =
        inspect(
            CHAT
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
                + "\"finish_reason\":\"stop\",\"stop_reason\":null}]}");

    assertThat(chunk.kind()).isEqualTo(Kind.FINISH_ONLY);
    assertThat(chunk.finishReason()).isEqualTo("stop");
    assertThat(chunk.hasContent()).isFalse();
  }

  @Test
  void contentWinsOverFinishReason() {
    StreamChunk chunk = inspect(chat("{\"content\":\".\"}", "\"length\""));

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.finishReason()).isEqualTo("length");
  }

  @Test
  void finalUsageChunk() {
    StreamChunk chunk =
        inspect(
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

    StreamChunk chunk = inspect(content.substring(0, content.length() - 1) + usage);
    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.hasUsage()).isTrue();
    assertThat(chunk.promptTokens()).isEqualTo(12);
    assertThat(chunk.completionTokens()).isEqualTo(3);

    assertThat(inspect(role.substring(0, role.length() - 1) + usage).kind())
        .isEqualTo(Kind.ROLE_ONLY);
  }

  @Test
  void usageOnAChoiceThatCarriesNothingIsNotUsageOnly() {
    String chunk = chat("{\"content\":\"\"}", "null");
    String withUsage =
        chunk.substring(0, chunk.length() - 1)
            + ",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}";

    assertThat(inspect(withUsage).kind()).isEqualTo(Kind.EMPTY);
    assertThat(inspect(withUsage).hasUsage()).isTrue();
  }

  @Test
  void nullUsageIsNoUsage() {
    StreamChunk chunk =
        inspect(CHAT + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":null}");

    assertThat(chunk.hasUsage()).isFalse();
    assertThat(chunk.promptTokens()).isEqualTo(-1);
  }

  @Test
  void usageWithoutIntegerCountsKeepsMinusOne() {
    StreamChunk chunk =
        inspect("{\"choices\":[],\"usage\":{\"prompt_tokens\":\"12\",\"completion_tokens\":null}}");

    assertThat(chunk.kind()).isEqualTo(Kind.USAGE_ONLY);
    assertThat(chunk.promptTokens()).isEqualTo(-1);
    assertThat(chunk.completionTokens()).isEqualTo(-1);
  }

  @Test
  void doneSentinel() {
    assertThat(inspect("[DONE]").kind()).isEqualTo(Kind.DONE);
    assertThat(inspect(" [DONE] \n").kind()).isEqualTo(Kind.DONE);
    assertThat(inspect("[DONE]").hasUsage()).isFalse();
  }

  @Test
  void toolCallsAreContent() {
    String call =
        "{\"tool_calls\":[{\"index\":0,\"id\":\"chatcmpl-tool-1\",\"type\":\"function\","
            + "\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}";
    String arguments =
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \"}}]}";

    assertThat(inspect(chat(call, "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(inspect(chat(arguments, "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(inspect(chat("{\"tool_calls\":[]}", "null")).kind()).isEqualTo(Kind.EMPTY);
    assertThat(inspect(chat("{\"tool_calls\":[]}", "\"tool_calls\"")).kind())
        .isEqualTo(Kind.FINISH_ONLY);
  }

  @Test
  void reasoningIsContent() {
    assertThat(inspect(chat("{\"reasoning_content\":\"Let me\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
    assertThat(inspect(chat("{\"reasoning\":\"think\"}", "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(inspect(chat("{\"reasoning_content\":\"\"}", "null")).kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void completionsTextChunks() {
    assertThat(inspect(completion(" world", "null")).kind()).isEqualTo(Kind.CONTENT);
    assertThat(inspect(completion("", "null")).kind()).isEqualTo(Kind.EMPTY);

    StreamChunk last = inspect(completion("", "\"length\""));
    assertThat(last.kind()).isEqualTo(Kind.FINISH_ONLY);
    assertThat(last.finishReason()).isEqualTo("length");

    StreamChunk usage =
        inspect(
            COMPLETION
                + "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":21,"
                + "\"completion_tokens\":16}}");
    assertThat(usage.kind()).isEqualTo(Kind.USAGE_ONLY);
    assertThat(usage.completionTokens()).isEqualTo(16);
  }

  @Test
  void severalChoices() {
    StreamChunk chunk =
        inspect(
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
        inspect(
            CHAT
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":{\"content\":"
                + "[{\"token\":\"x\",\"logprob\":-0.1,\"bytes\":[120],\"top_logprobs\":[]}]},"
                + "\"finish_reason\":null,\"text\":null}],\"content\":\"not a delta\"}");

    assertThat(chunk.kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void objectsWithNothingToReportAreEmpty() {
    assertThat(inspect("{}").kind()).isEqualTo(Kind.EMPTY);
    assertThat(inspect(chat("{}", "null")).kind()).isEqualTo(Kind.EMPTY);
    assertThat(
            inspect(
                    "{\"object\":\"error\",\"message\":\"boom\",\"type\":\"BadRequestError\","
                        + "\"param\":null,\"code\":400}")
                .kind())
        .isEqualTo(Kind.EMPTY);
    assertThat(inspect(CHAT + "\"choices\":null}").kind()).isEqualTo(Kind.EMPTY);
    assertThat(StreamChunk.inspect(keepAlive()).kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void emptyChoicesWithoutUsage() {
    StreamChunk chunk = inspect(CHAT + "\"choices\":[]}");

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
    StreamChunk chunk = inspect(data);

    assertThat(chunk.kind()).isEqualTo(Kind.MALFORMED);
    assertThat(chunk.hasContent()).isFalse();
    assertThat(chunk.hasUsage()).isFalse();
  }

  @Test
  void deeplyNestedInputIsMalformed() {
    String deep = "{\"x\":" + "[".repeat(100_000) + "]".repeat(100_000) + "}";

    assertThat(inspect(deep).kind()).isEqualTo(Kind.MALFORMED);
  }

  @Test
  void escapedQuotesAndBackslashesInContentDoNotEndTheString() {
    assertThat(inspect(chat("{\"content\":\"\\\"quoted\\\" and \\\\\"}", "null")).kind())
        .isEqualTo(Kind.CONTENT);
    assertThat(inspect(chat("{\"content\":\"\\\"\"}", "null")).kind()).isEqualTo(Kind.CONTENT);
    // A field-like text inside the content is content, not a finish reason.
    StreamChunk chunk =
        inspect(chat("{\"content\":\"\\\",\\\"finish_reason\\\":\\\"stop\"}", "null"));
    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.finishReason()).isNull();
  }

  @Test
  void escapedFieldNamesAndValuesReadAsDecoded() {
    StreamChunk chunk =
        inspect(
            "{\"choic\\u0065s\":[{\"delta\":{\"c\\u006fntent\":\"x\"},"
                + "\"finish_reason\":\"st\\u006fp\"}],"
                + "\"us\\u0061ge\":{\"prompt\\u005ftokens\":3,\"completion_tokens\":4}}");

    assertThat(chunk.kind()).isEqualTo(Kind.CONTENT);
    assertThat(chunk.finishReason()).isSameAs(inspect(chat("{}", "\"stop\"")).finishReason());
    assertThat(chunk.promptTokens()).isEqualTo(3);
    assertThat(chunk.completionTokens()).isEqualTo(4);
  }

  @Test
  void unusualFinishReasonsAreDecoded() {
    assertThat(inspect(chat("{}", "\"custom\"")).finishReason()).isEqualTo("custom");
    assertThat(inspect(chat("{}", "\"caf\\u00e9 \\\"x\\\"\"")).finishReason())
        .isEqualTo("caf\u00e9 \"x\"");
    assertThat(inspect(chat("{}", "\"\"")).kind()).isEqualTo(Kind.FINISH_ONLY);
    assertThat(inspect(chat("{}", "\"\"")).finishReason()).isEmpty();
    assertThat(inspect(chat("{}", "7")).kind()).isEqualTo(Kind.EMPTY);
  }

  @Test
  void usageNumbersAtTheEdgesOfLong() {
    StreamChunk chunk =
        inspect(
            "{\"choices\":[],\"usage\":{\"prompt_tokens\":-9223372036854775808,"
                + "\"completion_tokens\":9223372036854775807}}");

    assertThat(chunk.promptTokens()).isEqualTo(Long.MIN_VALUE);
    assertThat(chunk.completionTokens()).isEqualTo(Long.MAX_VALUE);
    assertThat(inspect("{\"usage\":{\"prompt_tokens\":-0}}").promptTokens()).isZero();
    assertThat(inspect("{\"usage\":{\"prompt_tokens\":12.0,\"completion_tokens\":1e3}}"))
        .extracting(StreamChunk::promptTokens, StreamChunk::completionTokens)
        .containsExactly(-1L, -1L);
    assertThat(inspect("{\"usage\":{\"completion_tokens\":9223372036854775808}}").kind())
        .isEqualTo(Kind.MALFORMED);
    assertThat(inspect("{\"usage\":{\"completion_tokens\":-9223372036854775809}}").kind())
        .isEqualTo(Kind.MALFORMED);
  }

  @Test
  void chunksWithoutUsageShareTheirResult() {
    assertThat(inspect(chat("{\"content\":\"a\"}", "null")))
        .isSameAs(inspect(chat("{\"content\":\"b\"}", "null")));
    assertThat(inspect(chat("{}", "\"length\""))).isSameAs(inspect(completion("", "\"length\"")));
  }

  @Test
  void eventsAreReadWhereverTheirDataLies() {
    String content = chat("{\"content\":\"x\"}", "null");
    String finish = chat("{}", "\"stop\"");
    String usage = "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}";
    // Several events in one chunk, then one split across chunks, then data over several lines.
    List<Buffer> chunks =
        List.of(
            Buffer.buffer("data: " + content + "\n\ndata:" + finish + "\r\n\r\ndata: " + usage),
            Buffer.buffer("\n\ndata: {\"choices\":[{\"delta\":\ndata: {\"content\":\"y\"}}]}\n\n"),
            Buffer.buffer("data: [DONE]\n\n"));
    List<String> kinds = new ArrayList<>();
    SseParser parser = new SseParser(1024);
    for (Buffer chunk : chunks) {
      parser.feed(chunk, event -> kinds.add(StreamChunk.inspect(event).toString()));
    }

    assertThat(kinds)
        .containsExactly(
            "StreamChunk{CONTENT, content}",
            "StreamChunk{FINISH_ONLY, finish_reason=stop}",
            "StreamChunk{USAGE_ONLY, usage=5/2, choices=[]}",
            "StreamChunk{CONTENT, content}",
            "StreamChunk{DONE}");
  }

  @Test
  void payloadsLargerThanTheKeptScratchArray() {
    String big = "x".repeat(JsonCursor.KEPT_BYTES * 2);

    assertThat(inspect(chat("{\"content\":\"" + big + "\"}", "\"length\"")))
        .extracting(StreamChunk::kind, StreamChunk::finishReason)
        .containsExactly(Kind.CONTENT, "length");
    assertThat(inspect(chat("{\"content\":\"\"}", "null")).kind()).isEqualTo(Kind.EMPTY);
  }
}
