package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class Utf8Test {

  @Test
  void wellFormedBytesOnly() {
    assertThat(Utf8.valid(new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, 3))
        .as("a surrogate")
        .isFalse();
    assertThat(Utf8.valid(new byte[] {(byte) 0xC0, (byte) 0x80}, 2)).as("an overlong").isFalse();
    assertThat(Utf8.valid("\uD83D\uDE00é".getBytes(StandardCharsets.UTF_8), 6)).isTrue();
    assertThat(Utf8.valid(new byte[] {(byte) 0xC3}, 1)).as("cut in a character").isFalse();
  }

  @Test
  void lengthsCountSurrogatePairsAsFourBytes() {
    String s = "a\u00e9\u20ac\uD83D\uDE00"; // 1 + 2 + 3 + 4
    assertThat(Utf8.length(s)).isEqualTo(10);
    assertThat(Utf8.length(s)).isEqualTo(s.getBytes(StandardCharsets.UTF_8).length);
    assertThat(Utf8.prefix(s, 9)).isEqualTo(3); // the pair is not split
    assertThat(Utf8.prefix(s, 10)).isEqualTo(5);
    assertThat(Utf8.prefix(s, 0)).isZero();
  }
}
