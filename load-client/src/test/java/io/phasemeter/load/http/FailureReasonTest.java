package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

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
}
