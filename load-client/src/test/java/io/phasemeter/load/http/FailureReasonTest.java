package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.buffer.Buffer;
import org.junit.jupiter.api.Test;

/** What a reason may hold: one bounded line, no control or format character, no key. */
class FailureReasonTest {

  @Test
  void aCutNeverSplitsACharacterAndCountsCodePoints() {
    String emoji = "\uD83D\uDE00"; // one code point, two chars
    String reason = FailureReason.clean(emoji.repeat(300));
    assertThat(reason).isEqualTo(emoji.repeat(FailureReason.MAX_CHARS) + "\u2026");
  }

  @Test
  void separatorsLoneSurrogatesAndFormatCharactersBecomeOneSpace() {
    assertThat(FailureReason.clean(" a\u2028b\u2029c\uD800d\u200Be\u0085f\u007Fg \t"))
        .isEqualTo("a b c d e f g");
    assertThat(FailureReason.clean("\u001b\u0000\r\n")).isEmpty();
    assertThat(FailureReason.withMessage("HTTP 500", "\u001b[0m\r\n")).isEqualTo("HTTP 500");
    assertThat(FailureReason.clean(null)).isNull();
  }

  @Test
  void keyShapedTokensAreReplaced() {
    assertThat(FailureReason.clean("bad key sk-abc123DEF456ghi and Bearer eyJhbGciOi.x.y, sk-no"))
        .isEqualTo("bad key sk-[key] and Bearer [key], sk-no");
    assertThat(FailureReason.redact("quoted k3y-0123456789", "k3y-0123456789"))
        .isEqualTo("quoted [key]");
    assertThat(FailureReason.redact("short", "short")).isEqualTo("short");
  }

  @Test
  void ansiCsiSequencesGoWhole() {
    assertThat(FailureReason.clean("\u001b[1;31merror\u001b[0m: slot\u001b[2K gone\u009b33m!"))
        .isEqualTo("error: slot gone!");
    // An escape that starts no CSI sequence is a control character like any other: a blank.
    assertThat(FailureReason.clean("a\u001b]0;title\u0007b")).isEqualTo("a ]0;title b");
    assertThat(FailureReason.clean("cut\u001b[12")).isEqualTo("cut");
  }

  @Test
  void quotedSpansLongerThan32CharactersGo() {
    String long33 = "x".repeat(33);
    assertThat(FailureReason.clean("diff: '" + long33 + "' not found at start of 'abc'"))
        .isEqualTo("diff: '\u2026' not found at start of 'abc'");
    assertThat(FailureReason.clean("input_value=\"" + long33 + "\", type=str"))
        .isEqualTo("input_value=\"\u2026\", type=str");
    // 32 characters stay; an apostrophe inside a word neither opens nor closes a span.
    String long32 = "y".repeat(32);
    assertThat(FailureReason.clean("kept '" + long32 + "'")).isEqualTo("kept '" + long32 + "'");
    assertThat(FailureReason.clean("it isn't '" + "don't ".repeat(8) + "' done"))
        .isEqualTo("it isn't '\u2026' done");
    // A span cut before its closing quote goes to the end.
    assertThat(FailureReason.clean("value '" + "z".repeat(5000))).isEqualTo("value '\u2026'");
  }

  @Test
  void runsOfTheRequestsOwnTextBecomePrompt() {
    Buffer body =
        Buffer.buffer(
            "{\"model\":\"a-model-name-of-some-length\",\"messages\":[{\"role\":\"user\","
                + "\"content\":\"Summarise:\\n\\tthe quarterly\\u0020report  for ACME\"}]}");
    assertThat(
            PromptEcho.scrub(
                "a-model-name-of-some-length says: bad input 'Summarise: the quarterly report for"
                    + " ACME' (15 chars: the quarterly)",
                body))
        .isEqualTo(
            "a-model-name-of-some-length says: bad input '[prompt]' (15 chars: the quarterly)");
    // Not JSON: read as text.
    assertThat(PromptEcho.scrub("echo: 0123456789abcdef!", Buffer.buffer("x0123456789abcdefx")))
        .isEqualTo("echo: [prompt]!");
    String none = "nothing of the request in here at all";
    assertThat(PromptEcho.scrub(none, body)).isSameAs(none);
  }

  @Test
  void reasonsAreInternedUpToTheBound() {
    Reasons reasons = new Reasons(3);
    String a = reasons.intern(new String("HTTP 500: slot crashed"));
    assertThat(reasons.intern(new String("HTTP 500: slot crashed"))).isSameAs(a);
    reasons.intern("b");
    reasons.intern("c");
    String d = new String("d");
    assertThat(reasons.intern(d)).isSameAs(d);
    assertThat(reasons.intern(new String("d"))).isNotSameAs(d).isEqualTo("d");
    assertThat(reasons.size()).isEqualTo(3);
    assertThat(reasons.intern(null)).isNull();
    assertThat(new Reasons().intern("x")).isEqualTo("x");
    assertThat(Reasons.MAX_ENTRIES).isEqualTo(1024);
  }
}
