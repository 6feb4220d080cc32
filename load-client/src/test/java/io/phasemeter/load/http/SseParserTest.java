package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SseParserTest {
  private static final String STREAM =
      "\uFEFF: keep-alive comment\r\n"
          + "event: message\r\n"
          + "id: 1\r\n"
          + "data: {\"a\":\"é\"}\r\n"
          + "\r\n"
          + "data:no-space\n"
          + "data:  two spaces\n"
          + "\n"
          + "retry: 10\r"
          + "\r"
          + "data: cr only\r"
          + "\r"
          + "data\n"
          + "\n"
          + "data: [DONE]\n\n";

  private static final List<String> EVENTS =
      List.of("{\"a\":\"é\"}", "no-space\n two spaces", "cr only", "", "[DONE]");

  /** llama.cpp's older failure: an {@code error:} field, handed over as it comes, no event. */
  @Test
  void anErrorFieldIsHandedOverAndDispatchesNothing() {
    SseParser p = new SseParser(1024);
    List<String> seen = new ArrayList<>();
    SseParser.EventSink sink =
        new SseParser.EventSink() {
          @Override
          public void event(String type, String data) {
            seen.add("event " + data);
          }

          @Override
          public void errorField(String value) {
            seen.add("error " + value);
          }
        };
    p.feedEvents(Buffer.buffer("data: a\n\nerror: {\"message\":\"boom\"}\n\ndata: b\n\n"), sink);
    assertThat(seen).containsExactly("event a", "error {\"message\":\"boom\"}", "event b");
  }

  @Test
  void anIdSetsTheLastEventIdAndAnEventWithAnIdAndNoDataIsToldAsSuch() {
    SseParser p = new SseParser(1024);
    List<String> seen = new ArrayList<>();
    SseParser.EventSink sink =
        new SseParser.EventSink() {
          @Override
          public void event(String type, String data) {
            seen.add(data + "@" + p.lastEventId());
          }

          @Override
          public void idOnly(String id) {
            seen.add("id-only " + id);
          }
        };
    p.feedEvents(
        Buffer.buffer(
            ": c\n\nid: 41\n\ndata: a\nid: 42\n\ndata: b\n\nid: x\u0000\ndata: c\n\nevent: e\n\n"),
        sink);
    // b keeps 42 (an id lasts until another); an id holding NUL is ignored; a bare event is not.
    assertThat(seen).containsExactly("id-only 41", "a@42", "b@42", "c@42");
  }

  @Test
  void wholeStreamInOneRead() {
    assertThat(parse(List.of(bytes(STREAM)))).containsExactlyElementsOf(EVENTS);
  }

  @Test
  void everySplitPointGivesTheSameEvents() {
    byte[] all = bytes(STREAM);
    for (int cut = 1; cut < all.length; cut++) {
      byte[] a = java.util.Arrays.copyOfRange(all, 0, cut);
      byte[] b = java.util.Arrays.copyOfRange(all, cut, all.length);
      assertThat(parse(List.of(a, b))).as("cut at %d", cut).containsExactlyElementsOf(EVENTS);
    }
  }

  @Test
  void byteByByte() {
    byte[] all = bytes(STREAM);
    List<byte[]> reads = new ArrayList<>();
    for (byte x : all) {
      reads.add(new byte[] {x});
    }
    assertThat(parse(reads)).containsExactlyElementsOf(EVENTS);
  }

  @Test
  void unfinishedEventIsPendingNotDispatched() {
    SseParser p = new SseParser(1024);
    List<String> out = new ArrayList<>();
    p.feed(Buffer.buffer("data: a\n\ndata: b\n"), out::add);
    assertThat(out).containsExactly("a");
    assertThat(p.hasPending()).isTrue();
  }

  @Test
  void overlongLineIsRefused() {
    SseParser p = new SseParser(8);
    assertThatThrownBy(() -> p.feed(Buffer.buffer("data: 0123456789\n\n"), e -> {}))
        .isInstanceOf(IllegalStateException.class);
  }

  private static List<String> parse(List<byte[]> reads) {
    SseParser p = new SseParser(1024);
    List<String> out = new ArrayList<>();
    for (byte[] r : reads) {
      p.feed(Buffer.buffer(r), out::add);
    }
    assertThat(p.hasPending()).isFalse();
    return out;
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
