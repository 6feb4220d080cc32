package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class AnswerTextTest {

  private static String chunk(String content) {
    return "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
        + content
        + "\"},\"finish_reason\":null}]}";
  }

  /** The answer kept, in UTF-8 bytes. */
  private static int utf8(AnswerText a) {
    return a.text().getBytes(StandardCharsets.UTF_8).length;
  }

  @Test
  void aStreamsDeltasAreKeptInOrder() {
    AnswerText a = new AnswerText(1024);
    a.event("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}");
    a.event(chunk("Hello"));
    a.event(chunk(", \\\"world\\\"\\n"));
    // Reasoning, a second choice and usage are not part of the answer's text.
    a.event(
        "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}},"
            + "{\"index\":1,\"delta\":{\"content\":\"other\"}}],\"usage\":null}");
    assertThat(a.text()).isEqualTo("Hello, \"world\"\n");
    assertThat(utf8(a)).isEqualTo(15);
    assertThat(a.truncated()).isFalse();
  }

  @Test
  void aWholeBodysMessageIsKept() {
    AnswerText a = new AnswerText(1024);
    a.body(
        ("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"caf\u00e9\"},"
                + "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3}}")
            .getBytes(StandardCharsets.UTF_8));
    assertThat(a.text()).isEqualTo("caf\u00e9");
    assertThat(utf8(a)).isEqualTo(5);
  }

  @Test
  void whatIsNotJsonOrHasNoContentAddsNothing() {
    AnswerText a = new AnswerText(1024);
    a.event("not json");
    a.event("{\"choices\":[]}");
    a.body(new byte[] {'{'});
    assertThat(a.text()).isEmpty();
    assertThat(a.truncated()).isFalse();
  }

  @Test
  void theAnswerIsKeptUpToItsLimitInWholeCharacters() {
    AnswerText exact = new AnswerText(6);
    exact.event(chunk("abcd"));
    exact.event(chunk("\u00e9")); // 2 bytes: exactly 6
    assertThat(exact.text()).isEqualTo("abcd\u00e9");
    assertThat(exact.truncated()).isFalse();

    AnswerText over = new AnswerText(6);
    over.event(chunk("abcde"));
    over.event(chunk("\u00e9x")); // the 2-byte character would make 7: cut before it
    over.event(chunk("y"));
    assertThat(over.text()).isEqualTo("abcde");
    assertThat(utf8(over)).isEqualTo(5);
    assertThat(over.truncated()).isTrue();
  }

  @Test
  void aHugeWholeAnswerIsCutWithoutKeepingIt() {
    String big = "x".repeat(200_000);
    AnswerText a = new AnswerText(64 * 1024);
    a.body(
        ("{\"choices\":[{\"message\":{\"content\":\"" + big + "\"}}]}")
            .getBytes(StandardCharsets.UTF_8));
    assertThat(utf8(a)).isEqualTo(64 * 1024);
    assertThat(a.truncated()).isTrue();
  }

  @Test
  void itsTextNeverShowsInItsToString() {
    AnswerText a = new AnswerText(100);
    a.event(chunk("private words"));
    assertThat(a.toString()).doesNotContain("private").contains("bytes=13");
  }
}
