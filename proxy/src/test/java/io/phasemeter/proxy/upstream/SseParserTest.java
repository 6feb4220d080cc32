package io.phasemeter.proxy.upstream;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class SseParserTest {

  private static final int MAX = 64 * 1024;

  private static final String HEAD =
      "{\"id\":\"chatcmpl-9d1e4c\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,"
          + "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",";

  /** The payloads of a vLLM chat stream with {@code stream_options.include_usage}. */
  private static final List<String> VLLM_DATA =
      List.of(
          HEAD
              + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
              + "\"logprobs\":null,\"finish_reason\":null}]}",
          content("Hello"),
          content("，世界"),
          content(" \uD83D\uDC4B"),
          content(" caf\u00e9 \u00fcber"),
          content("!\\n"),
          HEAD
              + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
              + "\"finish_reason\":\"stop\",\"stop_reason\":null}]}",
          HEAD
              + "\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":19,"
              + "\"completion_tokens\":7}}",
          "[DONE]");

  private static final byte[] VLLM_STREAM = stream(VLLM_DATA, "\n");

  private static String content(String text) {
    return HEAD
        + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
        + text
        + "\"},\"logprobs\":null,\"finish_reason\":null}]}";
  }

  private static byte[] stream(List<String> payloads, String eol) {
    StringBuilder out = new StringBuilder();
    for (String payload : payloads) {
      out.append("data: ").append(payload).append(eol).append(eol);
    }
    return out.toString().getBytes(UTF_8);
  }

  /** Feeds the chunks to a fresh parser; checks that raw + pending reproduce the input. */
  private static List<SseEvent> parse(byte[] input, List<Buffer> chunks) {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> events = new ArrayList<>();
    for (Buffer chunk : chunks) {
      parser.feed(chunk, event -> events.add(event.copy()));
    }
    Buffer relayed = Buffer.buffer();
    events.forEach(event -> relayed.appendBuffer(event.raw()));
    relayed.appendBuffer(parser.pending());
    assertThat(relayed.getBytes()).isEqualTo(input);
    return events;
  }

  private static List<SseEvent> parseWhole(String input) {
    byte[] bytes = input.getBytes(UTF_8);
    return parse(bytes, List.of(Buffer.buffer(bytes)));
  }

  /** Cuts the input at the given offsets (ascending; duplicates give empty chunks). */
  private static List<Buffer> split(byte[] input, int... cuts) {
    List<Buffer> chunks = new ArrayList<>();
    int from = 0;
    for (int cut : cuts) {
      chunks.add(Buffer.buffer(Arrays.copyOfRange(input, from, cut)));
      from = cut;
    }
    chunks.add(Buffer.buffer(Arrays.copyOfRange(input, from, input.length)));
    return chunks;
  }

  private static List<String> data(List<SseEvent> events) {
    return events.stream().map(SseEvent::data).toList();
  }

  private static List<String> raws(List<SseEvent> events) {
    return events.stream().map(event -> event.raw().toString(UTF_8)).toList();
  }

  @Test
  void wholeVllmStream() {
    List<SseEvent> events = parse(VLLM_STREAM, List.of(Buffer.buffer(VLLM_STREAM)));

    assertThat(data(events)).isEqualTo(VLLM_DATA);
    assertThat(raws(events)).first().isEqualTo("data: " + VLLM_DATA.get(0) + "\n\n");
    assertThat(raws(events)).last().isEqualTo("data: [DONE]\n\n");
  }

  @Test
  void whatCanOpenAnEventStream() {
    for (String opens :
        List.of("data: x", "event: e", "id: 1", "retry: 5", ": ping", "\n", "\r\n", "\uFEFFdata")) {
      assertThat(SseParser.opensEventStream(opens.getBytes(UTF_8)[0])).as(opens).isTrue();
    }
    for (String not : List.of("{\"id\":1}", "[1]", "<html>", " data: x", "\u001f\u008b")) {
      assertThat(SseParser.opensEventStream(not.getBytes(UTF_8)[0])).as(not).isFalse();
    }
  }

  @Test
  void vllmStreamOneByteAtATime() {
    List<Buffer> chunks = new ArrayList<>();
    for (byte b : VLLM_STREAM) {
      chunks.add(Buffer.buffer(new byte[] {b}));
    }

    assertThat(data(parse(VLLM_STREAM, chunks))).isEqualTo(VLLM_DATA);
  }

  @Test
  void vllmStreamSplitAtEveryOffset() {
    for (int cut = 0; cut <= VLLM_STREAM.length; cut++) {
      assertThat(data(parse(VLLM_STREAM, split(VLLM_STREAM, cut))))
          .as("split at %d", cut)
          .isEqualTo(VLLM_DATA);
    }
  }

  @Test
  void vllmStreamRandomSplits() {
    Random random = new Random(20240607L);
    for (int round = 0; round < 2_000; round++) {
      int[] cuts =
          random.ints(1 + random.nextInt(40), 0, VLLM_STREAM.length + 1).sorted().toArray();
      assertThat(data(parse(VLLM_STREAM, split(VLLM_STREAM, cuts))))
          .as("cuts %s", Arrays.toString(cuts))
          .isEqualTo(VLLM_DATA);
    }
  }

  @Test
  void vllmKindsInOrder() {
    List<StreamChunk.Kind> kinds =
        parse(VLLM_STREAM, List.of(Buffer.buffer(VLLM_STREAM))).stream()
            .map(event -> StreamChunk.inspect(event).kind())
            .toList();

    assertThat(kinds)
        .containsExactly(
            StreamChunk.Kind.ROLE_ONLY,
            StreamChunk.Kind.CONTENT,
            StreamChunk.Kind.CONTENT,
            StreamChunk.Kind.CONTENT,
            StreamChunk.Kind.CONTENT,
            StreamChunk.Kind.CONTENT,
            StreamChunk.Kind.FINISH_ONLY,
            StreamChunk.Kind.USAGE_ONLY,
            StreamChunk.Kind.DONE);
  }

  @Test
  void crLfAndBareCrEndingsAtEveryOffset() {
    for (String eol : List.of("\r\n", "\r")) {
      byte[] input = stream(VLLM_DATA, eol);
      for (int cut = 0; cut <= input.length; cut++) {
        assertThat(data(parse(input, split(input, cut))))
            .as("eol %s, split at %d", eol.replace("\r", "CR").replace("\n", "LF"), cut)
            .isEqualTo(VLLM_DATA);
      }
    }
  }

  @Test
  void mixedLineEndingsAtEveryPairOfOffsets() {
    byte[] input =
        "data: a\r\ndata: b\rdata: c\n\r\n: note\r\rdata: d\n\r\ndata: e\r\n\n".getBytes(UTF_8);
    for (int first = 0; first <= input.length; first++) {
      for (int second = first; second <= input.length; second++) {
        assertThat(data(parse(input, split(input, first, second))))
            .as("split at %d and %d", first, second)
            .containsExactly("a\nb\nc", null, "d", "e");
      }
    }
  }

  @Test
  void crLfEndings() {
    List<SseEvent> events = parseWhole("data: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n");

    assertThat(data(events)).containsExactly("a", "b");
    assertThat(raws(events)).containsExactly("data: a\r\n\r\n", "event: x\r\ndata: b\r\n\r\n");
  }

  @Test
  void bareCrEndings() {
    List<SseEvent> events = parseWhole("data: a\rdata: b\r\rdata: c\r\r");

    assertThat(data(events)).containsExactly("a\nb", "c");
    assertThat(raws(events)).containsExactly("data: a\rdata: b\r\r", "data: c\r\r");
  }

  @Test
  void crLfSplitAfterBlankLineCrDeliversAtOnceWithoutAnExtraEvent() {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> events = new ArrayList<>();

    parser.feed(Buffer.buffer("data: a\r\n\r"), event -> events.add(event.copy()));
    assertThat(data(events)).containsExactly("a");

    parser.feed(Buffer.buffer("\ndata: b\r\n\r\n"), event -> events.add(event.copy()));
    assertThat(data(events)).containsExactly("a", "b");
    assertThat(raws(events)).containsExactly("data: a\r\n\r", "\ndata: b\r\n\r\n");
    assertThat(parser.hasPending()).isFalse();
  }

  @Test
  void crLfSplitInsideAnEventDoesNotDoubleTheLine() {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> events = new ArrayList<>();

    parser.feed(Buffer.buffer("data: a\r"), event -> events.add(event.copy()));
    parser.feed(Buffer.buffer("\ndata: b\r"), event -> events.add(event.copy()));
    parser.feed(Buffer.buffer("\n\r"), event -> events.add(event.copy()));
    parser.feed(Buffer.buffer("\n"), event -> events.add(event.copy()));

    assertThat(data(events)).containsExactly("a\nb");
    assertThat(raws(events)).containsExactly("data: a\r\ndata: b\r\n\r");
    // The last \n completes the final \r\n: it is kept, but no event is in progress.
    assertThat(parser.hasPending()).isFalse();
    assertThat(parser.pending().toString(UTF_8)).isEqualTo("\n");
  }

  @Test
  void commentLinesAreKeptInRawButNotInData() {
    List<SseEvent> events = parseWhole(": keep-alive\n\n: note\ndata: x\n: between\ndata: y\n\n");

    assertThat(data(events)).containsExactly(null, "x\ny");
    assertThat(raws(events))
        .containsExactly(": keep-alive\n\n", ": note\ndata: x\n: between\ndata: y\n\n");
    assertThat(events.get(0).hasData()).isFalse();
  }

  @Test
  void multiLineDataIsJoinedWithLineFeeds() {
    List<SseEvent> events = parseWhole("data: {\"a\":\ndata:  1}\ndata:\ndata\ndata: end\n\n");

    assertThat(data(events)).containsExactly("{\"a\":\n 1}\n\n\nend");
  }

  @Test
  void dataWithAndWithoutTheOptionalSpace() {
    List<SseEvent> events =
        parseWhole("data:x\n\ndata: x\n\ndata:  x\n\ndata:\n\ndata\n\ndata: \n\n");

    assertThat(data(events)).containsExactly("x", "x", " x", "", "", "");
  }

  @Test
  void otherFieldsAreKeptInRawButNotInData() {
    String event = "event: message\nid: 42\nretry: 1000\ndata: x\nunknown: y\n\n";
    List<SseEvent> events = parseWhole(event + "Data: no\ndatax: no\ndata x\n\n");

    assertThat(data(events)).containsExactly("x", null);
    assertThat(raws(events)).first().isEqualTo(event);
  }

  @Test
  void multiByteCharactersSplitAtEveryOffset() {
    String text = "你好 \uD83D\uDC4B caf\u00e9 \uD83C\uDDEF\uD83C\uDDF5 \u20ac";
    byte[] input = ("data: " + text + "\ndata: \u4e16\u754c\n\n").getBytes(UTF_8);
    for (int cut = 0; cut <= input.length; cut++) {
      assertThat(data(parse(input, split(input, cut))))
          .as("split at %d", cut)
          .containsExactly(text + "\n\u4e16\u754c");
    }
  }

  @Test
  void byteOrderMarkBeforeTheFirstLineIsNotPartOfTheField() {
    List<SseEvent> events = parseWhole("\uFEFFdata: x\n\n\uFEFFdata: y\n\n");

    assertThat(data(events)).containsExactly("x", null);
    assertThat(raws(events)).first().isEqualTo("\uFEFFdata: x\n\n");
  }

  @Test
  void strayBlankLineIsAnEventWithoutData() {
    List<SseEvent> events = parseWhole("data: x\n\n\ndata: y\n\n");

    assertThat(data(events)).containsExactly("x", null, "y");
    assertThat(raws(events)).containsExactly("data: x\n\n", "\n", "data: y\n\n");
  }

  @Test
  void emptyChunksChangeNothing() {
    byte[] input = "data: a\r\n\r\n".getBytes(UTF_8);

    assertThat(data(parse(input, split(input, 0, 8, 8, 8, 11, 11)))).containsExactly("a");
  }

  @Test
  void eventOverTheLimitFails() {
    SseParser parser = new SseParser(16);
    List<SseEvent> events = new ArrayList<>();

    parser.feed(
        Buffer.buffer("data: 12345678\n\n"), event -> events.add(event.copy())); // exactly 16 bytes
    assertThat(data(events)).containsExactly("12345678");

    assertThatThrownBy(
            () ->
                parser.feed(
                    Buffer.buffer("data: 123456789\n\n"), event -> events.add(event.copy())))
        .isInstanceOf(SseParser.SseException.class)
        .hasMessageContaining("16 bytes");
    assertThat(events).hasSize(1);
    assertThatThrownBy(
            () -> parser.feed(Buffer.buffer("data: 1\n\n"), event -> events.add(event.copy())))
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void failingSinkStopsTheParser() {
    SseParser parser = new SseParser(MAX);
    RuntimeException boom = new RuntimeException("boom");

    assertThatThrownBy(
            () ->
                parser.feed(
                    Buffer.buffer("data: a\n\ndata: b\n\n"),
                    event -> {
                      throw boom;
                    }))
        .isSameAs(boom);
    assertThatThrownBy(() -> parser.feed(Buffer.buffer("data: c\n\n"), event -> {}))
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void pendingEventOverTheLimitFailsBeforeItEnds() {
    SseParser parser = new SseParser(100);
    Buffer piece = Buffer.buffer("data: " + "x".repeat(44)); // 50 bytes, no line end

    parser.feed(piece, event -> {});
    parser.feed(piece, event -> {});

    assertThatThrownBy(() -> parser.feed(Buffer.buffer("x"), event -> {}))
        .isInstanceOf(SseParser.SseException.class);
  }

  @Test
  void pendingHoldsTheEventCutByTheEndOfTheStream() {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> events = new ArrayList<>();
    assertThat(parser.hasPending()).isFalse();
    assertThat(parser.pending().length()).isZero();

    parser.feed(
        Buffer.buffer("data: {\"a\":1}\n\ndata: {\"choi"), event -> events.add(event.copy()));
    parser.feed(Buffer.buffer("ces\":[{\"delta\""), event -> events.add(event.copy()));

    assertThat(data(events)).containsExactly("{\"a\":1}");
    assertThat(parser.hasPending()).isTrue();
    assertThat(parser.pending().toString(UTF_8)).isEqualTo("data: {\"choices\":[{\"delta\"");
  }

  @Test
  void pendingIsEmptyAfterACompleteStream() {
    SseParser parser = new SseParser(MAX);

    parser.feed(Buffer.buffer(VLLM_STREAM), event -> {});

    assertThat(parser.hasPending()).isFalse();
    assertThat(parser.pending().length()).isZero();
  }

  @Test
  void eventsCutFromOneChunkShareItsBytesAndStraddlingOnesAreWhole() {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> events = new ArrayList<>();

    parser.feed(Buffer.buffer("data: a\n\ndata: b"), event -> events.add(event.copy()));
    parser.feed(Buffer.buffer("c\n\ndata: d\n\n"), event -> events.add(event.copy()));

    assertThat(raws(events)).containsExactly("data: a\n\n", "data: bc\n\n", "data: d\n\n");
    assertThat(data(events)).containsExactly("a", "bc", "d");
  }

  @Test
  void anEventThatIsExactlyItsChunkIsThatChunk() {
    SseParser parser = new SseParser(MAX);
    Buffer chunk = Buffer.buffer("data: {\"a\":1}\n\n");
    List<Buffer> raws = new ArrayList<>();

    parser.feed(chunk, event -> raws.add(event.raw()));

    assertThat(raws).hasSize(1);
    assertThat(raws.get(0)).isSameAs(chunk);
  }

  @Test
  void theSinkGetsOneInstanceValidDuringItsCall() {
    SseParser parser = new SseParser(MAX);
    List<SseEvent> seen = new ArrayList<>();
    List<SseEvent> kept = new ArrayList<>();

    parser.feed(
        Buffer.buffer("data: a\n\n: note\n\ndata: b\ndata: c\n\n"),
        event -> {
          seen.add(event);
          kept.add(event.copy());
        });

    assertThat(seen).hasSize(3);
    assertThat(seen.get(1)).isSameAs(seen.get(0));
    assertThat(seen.get(2)).isSameAs(seen.get(0));
    // Past its call, the event reads as nothing, never as a later one.
    assertThat(seen.get(0).raw()).isNull();
    assertThat(seen.get(0).hasData()).isFalse();
    assertThat(data(kept)).containsExactly("a", null, "b\nc");
    assertThat(raws(kept)).containsExactly("data: a\n\n", ": note\n\n", "data: b\ndata: c\n\n");
  }
}
