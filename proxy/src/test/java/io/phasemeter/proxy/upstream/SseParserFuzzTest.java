package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.vertx.core.buffer.Buffer;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The SSE parser under Jazzer. An input is two control bytes, then the stream: the first picks the
 * parser's event limit (16 B to 64 KiB), the second seeds where the stream is cut into network
 * chunks (1 to 64 bytes each). Whatever the bytes, the parser either follows the stream or refuses
 * it with its one documented failure ({@link SseParser.SseException}, an event over the limit); it
 * never holds more than the limit, and while it follows the stream it loses and invents no byte.
 *
 * <p>Plain {@code mvn test} replays the corpus in {@code
 * src/test/resources/io/phasemeter/proxy/upstream/SseParserFuzzTestInputs/}; with {@code
 * JAZZER_FUZZ=1} Jazzer fuzzes for {@code maxDuration} (the {@code fuzz} profile, README).
 */
class SseParserFuzzTest {

  @FuzzTest(maxDuration = "25s")
  void parserFollowsOrRefusesAnyByteStream(byte[] input) {
    if (input.length < 2) {
      return;
    }
    int maxEventBytes = 16 << (input[0] & 0x0f) % 13;
    SplittableRandom cuts = new SplittableRandom(input[1]);
    byte[] stream = Arrays.copyOfRange(input, 2, input.length);
    SseParser parser = new SseParser(maxEventBytes);
    Buffer seen = Buffer.buffer();
    int at = 0;
    while (at < stream.length) {
      int n = Math.min(stream.length - at, 1 + cuts.nextInt(64));
      Buffer chunk = Buffer.buffer().appendBytes(stream, at, n);
      at += n;
      try {
        parser.feed(
            chunk,
            event -> {
              assertThat(event.raw().length()).isLessThanOrEqualTo(maxEventBytes);
              seen.appendBuffer(event.raw());
            });
      } catch (SseParser.SseException refused) {
        // The documented refusal: an event over the limit. The stream cannot be followed.
        return;
      }
      assertThat(parser.pending().length()).isLessThanOrEqualTo(maxEventBytes);
    }
    // Followed to the end: every byte is in exactly one event or still pending.
    seen.appendBuffer(parser.pending());
    assertThat(seen.getBytes()).isEqualTo(stream);
  }
}
