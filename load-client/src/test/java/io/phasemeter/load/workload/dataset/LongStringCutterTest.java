package io.phasemeter.load.workload.dataset;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The cutter keeps every string of at most its limit whole, cuts a longer one at a character
 * boundary, keeps the JSON valid, and says which strings it cut at the offset Jackson reports after
 * reading them.
 */
class LongStringCutterTest {
  private static final JsonFactory JSON = new JsonFactory();

  /** Each string value of {@code json} read through a cutter of {@code limit}, and whether cut. */
  private static List<String> strings(String json, int limit) throws IOException {
    LongStringCutter cutter =
        new LongStringCutter(
            new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8)), limit);
    List<String> out = new ArrayList<>();
    try (JsonParser p = JSON.createParser(cutter)) {
      JsonToken t;
      while ((t = p.nextToken()) != null) {
        if (t == JsonToken.VALUE_STRING) {
          String text = p.getText();
          out.add((cutter.wasCut(p.currentLocation().getByteOffset()) ? "CUT:" : "") + text);
        }
      }
    }
    return out;
  }

  @Test
  void aStringOfExactlyTheLimitIsWholeAndOneByteMoreIsCut() throws Exception {
    String at = "a".repeat(16);
    String over = "b".repeat(17);
    assertThat(strings("[\"" + at + "\",\"" + over + "\",\"c\"]", 16))
        .containsExactly(at, "CUT:" + "b".repeat(16), "c");
  }

  @Test
  void cutsInAnObjectWhereverTheValueIsAndSkippedStringsNeedNoReading() throws Exception {
    String json =
        "{\"id\":\""
            + "x".repeat(100)
            + "\",\n \"value\" : \""
            + "y".repeat(100)
            + "\", \"from\":\"human\", \"short\":\"ok\"}";
    assertThat(strings(json, 10))
        .containsExactly("CUT:" + "x".repeat(10), "CUT:" + "y".repeat(10), "human", "ok");
  }

  @Test
  void neverCutsInsideAnEscapeOrAMultiByteCharacter() throws Exception {
    // Limit 3: the escape \u00e9 and the 3-byte € start at byte 2 and are kept whole.
    assertThat(strings("[\"ab\\u00e9cdef\",\"ab€cd\"]", 3)).containsExactly("CUT:abé", "CUT:ab€");
    // Limit 2: the escaped quote starts at byte 1 and is kept whole.
    assertThat(strings("[\"a\\\"bcd\"]", 2)).containsExactly("CUT:a\"");
  }

  @Test
  void quotesAndBackslashesInsideTheDroppedPartDoNotEndTheString() throws Exception {
    String json = "[\"abcdef\\\"gh\\\\\",\"next\"]";
    assertThat(strings(json, 4)).containsExactly("CUT:abcd", "next");
  }

  @Test
  void aHugeStringPassesInBoundedReads() throws Exception {
    StringBuilder sb = new StringBuilder("[\"");
    sb.append("z".repeat(3 * 64 * 1024 + 17));
    sb.append("\",\"tail\"]");
    assertThat(strings(sb.toString(), 1024)).containsExactly("CUT:" + "z".repeat(1024), "tail");
  }
}
