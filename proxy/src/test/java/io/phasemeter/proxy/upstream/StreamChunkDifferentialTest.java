package io.phasemeter.proxy.upstream;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link StreamChunk} scans bytes; the Jackson-based scan it replaced ({@link JacksonStreamChunk})
 * read the payload decoded to a String. Over generated stream-chunk payloads, mutations of them and
 * plain noise, both must say the same about every field, MALFORMED included.
 */
class StreamChunkDifferentialTest {

  private static final String[] STRINGS = {
    "",
    "x",
    " token7",
    "Hello",
    "\\\"quoted\\\"",
    "back\\\\slash",
    "\\n",
    "\\u00e9t\\u00E9",
    "\\ud83d\\udc4b",
    "\\ud800",
    "caf\u00e9",
    "\u4e16\u754c",
    "\uD83D\uDC4B",
    "a/b\\/c",
    "\\b\\f\\r\\t",
    "stop",
    "length",
    "st\\u006fp",
    "tool_calls",
    "\u007f",
  };

  private static final String[] NAMES = {
    "id",
    "object",
    "created",
    "model",
    "choices",
    "usage",
    "index",
    "delta",
    "text",
    "logprobs",
    "finish_reason",
    "stop_reason",
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "role",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "choic\\u0065s",
    "us\\u0061ge",
    "c\\u006fntent",
    "finish\\u005freason",
    "prompt\\u005ftokens",
    "",
    "Content",
    "choices ",
  };

  private static final String[] NUMBERS = {
    "0",
    "-0",
    "7",
    "12",
    "512",
    "-3",
    "1.5",
    "1e3",
    "1E+3",
    "2e-1",
    "0.0",
    "-0.5e-7",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999",
    "01",
    "1.",
    ".5",
    "-",
    "+1",
    "1e",
    "--1",
  };

  /** A payload shaped like a stream chunk, with the shapes and oddities a server might send. */
  private static String payload(SplittableRandom random) {
    Gen gen = new Gen(random);
    gen.chunk();
    return gen.out.toString();
  }

  private static final class Gen {
    final SplittableRandom random;
    final StringBuilder out = new StringBuilder();

    Gen(SplittableRandom random) {
      this.random = random;
    }

    boolean chance(int percent) {
      return random.nextInt(100) < percent;
    }

    <T> T pick(T[] values) {
      return values[random.nextInt(values.length)];
    }

    void ws() {
      if (chance(10)) {
        out.append(pick(new String[] {" ", "\n", "\t", "\r\n", "  "}));
      }
    }

    void name(String name) {
      ws();
      out.append('"').append(name).append('"');
      ws();
      out.append(':');
      ws();
    }

    void chunk() {
      out.append('{');
      List<Runnable> fields = new ArrayList<>();
      fields.add(() -> field("id", () -> out.append("\"chatcmpl-9b2f\"")));
      fields.add(() -> field("object", () -> out.append("\"chat.completion.chunk\"")));
      fields.add(
          () -> field("created", () -> out.append(chance(90) ? "1730000000" : pick(NUMBERS))));
      if (chance(80)) {
        fields.add(() -> field(chance(95) ? "choices" : pick(NAMES), this::choices));
      }
      if (chance(40)) {
        fields.add(() -> field(chance(90) ? "usage" : pick(NAMES), this::usage));
      }
      if (chance(15)) {
        fields.add(() -> field(pick(NAMES), this::anyValue));
      }
      if (chance(5)) {
        // A duplicate: Jackson does not refuse them, and the scan counts each one.
        fields.add(() -> field(chance(50) ? "choices" : "usage", this::anyValue));
      }
      for (int k = fields.size() - 1; k > 0; k--) {
        int j = random.nextInt(k + 1);
        Runnable t = fields.get(k);
        fields.set(k, fields.get(j));
        fields.set(j, t);
      }
      members(fields);
      ws();
      out.append('}');
      ws();
    }

    /** Writes {@code fields} separated by commas (the braces are the caller's). */
    void members(List<Runnable> fields) {
      for (int k = 0; k < fields.size(); k++) {
        if (k > 0) {
          out.append(',');
        }
        fields.get(k).run();
      }
    }

    void field(String name, Runnable value) {
      name(name);
      value.run();
      ws();
    }

    void choices() {
      if (chance(10)) {
        anyValue();
        return;
      }
      out.append('[');
      int n = chance(20) ? 0 : 1 + random.nextInt(3);
      for (int k = 0; k < n; k++) {
        if (k > 0) {
          out.append(',');
        }
        ws();
        if (chance(90)) {
          choice();
        } else {
          anyValue();
        }
        ws();
      }
      out.append(']');
    }

    void choice() {
      out.append('{');
      List<Runnable> fields = new ArrayList<>();
      fields.add(() -> field("index", () -> out.append(random.nextInt(3))));
      if (chance(70)) {
        fields.add(() -> field(chance(95) ? "delta" : pick(NAMES), this::delta));
      }
      if (chance(30)) {
        fields.add(() -> field("text", this::stringOrOther));
      }
      fields.add(
          () -> field("logprobs", () -> out.append(chance(80) ? "null" : "{\"content\":[]}")));
      if (chance(70)) {
        fields.add(() -> field("finish_reason", this::stringOrOther));
      }
      if (chance(10)) {
        fields.add(() -> field(pick(NAMES), this::anyValue));
      }
      members(fields);
      out.append('}');
    }

    void delta() {
      if (chance(5)) {
        anyValue();
        return;
      }
      out.append('{');
      List<Runnable> fields = new ArrayList<>();
      if (chance(20)) {
        fields.add(() -> field("role", this::stringOrOther));
      }
      if (chance(80)) {
        fields.add(
            () ->
                field(
                    pick(new String[] {"content", "content", "reasoning_content", "reasoning"}),
                    this::stringOrOther));
      }
      if (chance(15)) {
        fields.add(() -> field("tool_calls", this::toolCalls));
      }
      if (chance(10)) {
        fields.add(() -> field(pick(NAMES), this::anyValue));
      }
      members(fields);
      out.append('}');
    }

    void toolCalls() {
      if (chance(20)) {
        anyValue();
        return;
      }
      out.append('[');
      int n = random.nextInt(3);
      for (int k = 0; k < n; k++) {
        if (k > 0) {
          out.append(',');
        }
        out.append(
            "{\"index\":0,\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"c\\\": \"}}");
      }
      out.append(']');
    }

    void usage() {
      if (chance(15)) {
        anyValue();
        return;
      }
      out.append('{');
      List<Runnable> fields = new ArrayList<>();
      if (chance(90)) {
        fields.add(() -> field("prompt_tokens", this::count));
      }
      if (chance(90)) {
        fields.add(() -> field("completion_tokens", this::count));
      }
      if (chance(50)) {
        fields.add(() -> field("total_tokens", this::count));
      }
      if (chance(15)) {
        fields.add(() -> field(pick(NAMES), this::anyValue));
      }
      members(fields);
      out.append('}');
    }

    void count() {
      if (chance(80)) {
        out.append(random.nextInt(100_000));
      } else if (chance(60)) {
        out.append(pick(NUMBERS));
      } else {
        anyValue();
      }
    }

    void stringOrOther() {
      if (chance(85)) {
        out.append('"').append(pick(STRINGS)).append('"');
      } else {
        anyValue();
      }
    }

    void anyValue() {
      anyValue(0);
    }

    void anyValue(int depth) {
      switch (random.nextInt(depth > 3 ? 6 : 8)) {
        case 0 -> out.append("null");
        case 1 -> out.append(chance(50) ? "true" : "false");
        case 2 -> out.append(pick(NUMBERS));
        case 3, 4 -> out.append('"').append(pick(STRINGS)).append('"');
        case 5 -> out.append(chance(50) ? "[]" : "{}");
        case 6 -> {
          out.append('[');
          int n = random.nextInt(3);
          for (int k = 0; k < n; k++) {
            if (k > 0) {
              out.append(',');
            }
            ws();
            anyValue(depth + 1);
          }
          out.append(']');
        }
        default -> {
          out.append('{');
          int n = random.nextInt(3);
          for (int k = 0; k < n; k++) {
            if (k > 0) {
              out.append(',');
            }
            name(pick(NAMES));
            anyValue(depth + 1);
          }
          out.append('}');
        }
      }
    }
  }

  private static final byte[] NOISE =
      "{}[]:,\"\\ \n\t\r0123456789-+.eEtrufalsn[DONE]u".getBytes(UTF_8);

  /** One byte edit: delete, insert, replace or cut short. */
  private static byte[] mutate(byte[] in, SplittableRandom random) {
    int at = random.nextInt(in.length + 1);
    byte b =
        switch (random.nextInt(5)) {
          case 0 -> (byte) random.nextInt(0x20);
          case 1 -> (byte) (0x80 + random.nextInt(0x80));
          default -> NOISE[random.nextInt(NOISE.length)];
        };
    return switch (random.nextInt(4)) {
      case 0 -> at == in.length ? in : splice(in, at, at + 1, new byte[0]);
      case 1 -> splice(in, at, at, new byte[] {b});
      case 2 -> at == in.length ? in : splice(in, at, at + 1, new byte[] {b});
      default -> splice(in, at, in.length, new byte[0]);
    };
  }

  private static byte[] splice(byte[] in, int from, int to, byte[] with) {
    byte[] out = new byte[in.length - (to - from) + with.length];
    System.arraycopy(in, 0, out, 0, from);
    System.arraycopy(with, 0, out, from, with.length);
    System.arraycopy(in, to, out, from + with.length, in.length - to);
    return out;
  }

  static void assertSameReading(byte[] payload) {
    String expected = JacksonStreamChunk.inspect(new String(payload, UTF_8));
    assertThat(StreamChunk.inspect(Buffer.buffer(payload)).toString())
        .as("payload %s", new String(payload, UTF_8))
        .isEqualTo(expected);
  }

  @Test
  void generatedPayloads() {
    SplittableRandom random = new SplittableRandom(20261129L);
    for (int k = 0; k < 20_000; k++) {
      assertSameReading(payload(random).getBytes(UTF_8));
    }
  }

  @Test
  void mutatedPayloads() {
    SplittableRandom random = new SplittableRandom(7L);
    for (int k = 0; k < 40_000; k++) {
      byte[] payload = payload(random).getBytes(UTF_8);
      int edits = 1 + random.nextInt(3);
      for (int e = 0; e < edits; e++) {
        payload = mutate(payload, random);
      }
      assertSameReading(payload);
    }
  }

  @Test
  void noise() {
    SplittableRandom random = new SplittableRandom(11L);
    for (int k = 0; k < 20_000; k++) {
      byte[] payload = new byte[random.nextInt(24)];
      for (int i = 0; i < payload.length; i++) {
        payload[i] =
            random.nextInt(10) == 0
                ? (byte) random.nextInt(256)
                : NOISE[random.nextInt(NOISE.length)];
      }
      assertSameReading(payload);
    }
  }

  @Test
  void limitsOfJacksonsDefaultConstraints() {
    List<String> payloads =
        List.of(
            "{\"x\":" + "[".repeat(999) + "]".repeat(999) + "}",
            "{\"x\":" + "[".repeat(1000) + "]".repeat(1000) + "}",
            "{\"x\":" + "{\"a\":".repeat(999) + "1" + "}".repeat(999) + "}",
            "{\"x\":" + "{\"a\":".repeat(1000) + "1" + "}".repeat(1000) + "}",
            "{\"x\":" + "1".repeat(1000) + "}",
            "{\"x\":" + "1".repeat(1001) + "}",
            "{\"x\":-" + "1".repeat(1000) + "}",
            "{\"x\":-" + "1".repeat(1001) + "}",
            "{\"x\":" + "1".repeat(500) + "." + "1".repeat(499) + "e1}",
            "{\"x\":" + "1".repeat(500) + "." + "1".repeat(500) + "e1}",
            "{\"x\":1e-" + "1".repeat(999) + "}",
            "{\"x\":1e-" + "1".repeat(1000) + "}",
            "{\"" + "a".repeat(50_000) + "\":1}",
            "{\"" + "a".repeat(50_001) + "\":1}",
            "{\"" + "a".repeat(49_999) + "\\u0041\":1}",
            "{\"" + "\u00e9".repeat(50_000) + "\":1}",
            "{\"" + "\u00e9".repeat(50_001) + "\":1}",
            "{\"" + "\uD83D\uDC4B".repeat(25_000) + "\":1}",
            "{\"" + "\uD83D\uDC4B".repeat(25_001) + "\":1}");
    for (String payload : payloads) {
      assertSameReading(payload.getBytes(UTF_8));
    }
  }

  @Test
  void malformedUtf8InsideAndOutsideStrings() {
    byte[][] payloads = {
      bytes("{\"choices\":[{\"finish_reason\":\"", 0xE4, 0xBD, "\"}]}"),
      bytes("{\"choices\":[{\"finish_reason\":\"", 0xFF, "\"}]}"),
      bytes("{\"choices\":[{\"finish_reason\":\"st", 0xC3, "\"}]}"),
      bytes("{\"choices\":[{\"delta\":{\"content\":\"", 0x80, "\"}}]}"),
      bytes("{\"ch", 0xED, 0xA0, 0x80, "oices\":[]}"),
      bytes("{\"choices\":[]}", 0xC2, 0xA0),
      bytes(0xEF, 0xBB, 0xBF, "{}"),
    };
    for (byte[] payload : payloads) {
      assertSameReading(payload);
    }
  }

  @Test
  void finishReasonOverJacksonsStringLimitIsMalformed() {
    // Jackson refuses a string value over 20,000,000 characters when it is read, as finish_reason
    // is; content is only measured, and passes.
    String longText = "a".repeat(JsonCursor.MAX_STRING_LENGTH + 1);
    assertSameReading(("{\"choices\":[{\"finish_reason\":\"" + longText + "\"}]}").getBytes(UTF_8));
    assertSameReading(("{\"choices\":[{\"text\":\"" + longText + "\"}]}").getBytes(UTF_8));
  }

  @Test
  void eventsThroughTheParserReadAsTheirData() {
    SplittableRandom random = new SplittableRandom(3L);
    SseParser parser = new SseParser(1 << 20);
    for (int k = 0; k < 2_000; k++) {
      String payload = payload(random);
      StringBuilder event = new StringBuilder();
      for (String line : payload.split("\r\n|\r|\n", -1)) {
        event.append("data: ").append(line).append('\n');
      }
      event.append('\n');
      String joined = String.join("\n", payload.split("\r\n|\r|\n", -1));
      List<String> seen = new ArrayList<>();
      parser.feed(
          Buffer.buffer(event.toString()),
          e -> {
            assertThat(e.data()).isEqualTo(joined);
            seen.add(StreamChunk.inspect(e).toString());
          });
      assertThat(seen).containsExactly(JacksonStreamChunk.inspect(joined));
    }
  }

  private static byte[] bytes(Object... parts) {
    Buffer out = Buffer.buffer();
    for (Object part : parts) {
      if (part instanceof String s) {
        out.appendString(s);
      } else {
        out.appendByte((byte) (int) (Integer) part);
      }
    }
    return out.getBytes();
  }
}
