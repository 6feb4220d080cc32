package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class HashKeyMainTest {
  static final String ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

  final StringWriter out = new StringWriter();
  final StringWriter err = new StringWriter();

  @Test
  void printsTheSha256OfTheKeyWithoutItsTrailingNewline() {
    assertThat(run("abc")).isZero();
    assertThat(out.toString().strip()).isEqualTo(ABC);

    out.getBuffer().setLength(0);
    assertThat(run("abc\n")).isZero();
    assertThat(out.toString().strip()).isEqualTo(ABC);

    out.getBuffer().setLength(0);
    assertThat(run("abc\r\n")).isZero();
    assertThat(out.toString().strip()).isEqualTo(ABC);
  }

  @Test
  void anEmptyKeyExitsTwo() {
    assertThat(run("")).isEqualTo(2);
    assertThat(run("\n")).isEqualTo(2);
    assertThat(out.toString()).isEmpty();
    assertThat(err.toString()).contains("no key on standard input");
  }

  @Test
  void aKeyThatCannotTravelInAHeaderExitsTwo() {
    assertThat(run("abc def")).isEqualTo(2);
    assertThat(run("abc\n\n")).isEqualTo(2);
    assertThat(out.toString()).isEmpty();
    assertThat(err.toString()).doesNotContain("abc");
  }

  @Test
  void newPrintsAFreshKeyAndTheHashThatMatchesIt() {
    assertThat(run("", "--new")).isZero();

    String[] lines = out.toString().strip().split("\\R");
    assertThat(lines).hasSize(2);
    assertThat(lines[0]).startsWith("key:    pm-");
    assertThat(lines[1]).startsWith("sha256: ");
    String key = lines[0].substring("key:    ".length());
    String hash = lines[1].substring("sha256: ".length());
    assertThat(key).matches("pm-[A-Za-z0-9_-]{43}");
    assertThat(hash).isEqualTo(HashKeyMain.hash(key));
    assertThat(err.toString().strip())
        .startsWith("add to the keys file: - {name: NAME, sha256: \"" + hash + "\"")
        .doesNotContain("\n");
  }

  private int run(String stdin, String... args) {
    return HashKeyMain.commandLine(
            new PrintWriter(out, true),
            new PrintWriter(err, true),
            new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)))
        .execute(args);
  }
}
