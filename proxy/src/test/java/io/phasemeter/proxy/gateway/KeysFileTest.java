package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import org.junit.jupiter.api.Test;

class KeysFileTest {
  static final String HASH_A = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  static final String HASH_B = "a".repeat(64);

  @Test
  void parsesEveryFieldAndNormalisesTheHash() {
    KeysFile f =
        KeysFile.parse(
            "keys:\n"
                + "  - {name: team-a, sha256: \""
                + HASH_A.toUpperCase()
                + "\", rpm: 600, tpm: 200000, priority: high, allow_priority_header: true}\n"
                + "  - {name: team.b_2, sha256: \""
                + HASH_B
                + "\"}\n"
                + "...\n",
            "keys.yaml");

    assertThat(f.keys())
        .containsExactly(
            new ApiKey("team-a", HASH_A, 600, 200_000, Priority.HIGH, true),
            new ApiKey("team.b_2", HASH_B, 0, 0, Priority.NORMAL, false));
    assertThat(f.refusesEveryone()).isFalse();
  }

  @Test
  void anEmptyListIsAllowedAndSaysItRefusesEveryone() {
    KeysFile f = KeysFile.parse("keys: []\n...\n", "keys.yaml");

    assertThat(f.keys()).isEmpty();
    assertThat(f.refusesEveryone()).isTrue();
  }

  @Test
  void errorsNameTheFileAndTheKeyPathOnOneLine() {
    assertError(entries(ok("a", HASH_A), ok("b", HASH_B), "{name: c, sha256: \"xyz\"}"))
        .isEqualTo(
            "keys.yaml: keys[2].sha256: must be 64 hex characters (the output of 'phasemeter"
                + " hash-key')");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", burst: 3}"))
        .startsWith("keys.yaml: keys[0].burst: unknown key (known: name, sha256,");
    assertError(entries(ok("a", HASH_A), ok("a", HASH_B)))
        .isEqualTo("keys.yaml: keys[1].name: 'a' is already used by keys[0]");
    assertError(entries(ok("a", HASH_A), ok("b", HASH_A.toUpperCase())))
        .isEqualTo("keys.yaml: keys[1].sha256: the same key hash as keys[0]; use one entry");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", priority: urgent}"))
        .isEqualTo(
            "keys.yaml: keys[0].priority: 'urgent' is not a priority (use high, normal or low)");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", rpm: -1}"))
        .startsWith("keys.yaml: keys[0].rpm: must be between 0 (unlimited) and");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", tpm: 1.5}"))
        .isEqualTo("keys.yaml: keys[0].tpm: expected a whole number (0 = unlimited), got '1.5'");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", allow_priority_header: sometimes}"))
        .isEqualTo("keys.yaml: keys[0].allow_priority_header: expected true or false");
    assertError(entries("{sha256: \"" + HASH_A + "\"}"))
        .isEqualTo("keys.yaml: keys[0].name: missing");
    assertError(entries("{name: \"a b\", sha256: \"" + HASH_A + "\"}"))
        .startsWith("keys.yaml: keys[0].name: must be 1 to 64 characters");
    assertError(entries("{name: a, sha256: 1234}"))
        .isEqualTo("keys.yaml: keys[0].sha256: expected a string (quote it)");
    assertError("").startsWith("keys.yaml: empty;");
    assertError("keys:\n...\n").startsWith("keys.yaml: keys: expected a list");
    assertError("users: []\n...\n").isEqualTo("keys.yaml: users: unknown key (known: keys)");
    assertError("keys: [\n...\n").startsWith("keys.yaml: not valid YAML at line");
  }

  @Test
  void aFieldWrittenWithNoValueIsAnErrorNotItsDefault() {
    String head = "keys:\n  - name: a\n    sha256: \"" + HASH_A + "\"\n";

    assertError(head + "    rpm:\n...\n")
        .isEqualTo("keys.yaml: keys[0].rpm: has no value (write 0 for unlimited)");
    assertError(head + "    tpm: ~\n...\n")
        .isEqualTo("keys.yaml: keys[0].tpm: has no value (write 0 for unlimited)");
    assertError(head + "    priority:\n...\n")
        .isEqualTo("keys.yaml: keys[0].priority: has no value (write high, normal or low)");
    assertError(head + "    allow_priority_header: null\n...\n")
        .isEqualTo("keys.yaml: keys[0].allow_priority_header: has no value (write true or false)");
    assertError("keys:\n  - name:\n    sha256: \"" + HASH_A + "\"\n...\n")
        .isEqualTo("keys.yaml: keys[0].name: has no value");
    // Left out, rpm and tpm still mean unlimited.
    assertThat(KeysFile.parse(head + "...\n", "keys.yaml").keys().get(0).rpm()).isZero();
  }

  @Test
  void aFileWithoutItsLastLineLooksHalfWritten() {
    String complete = entries(ok("a", HASH_A));
    String message =
        "keys.yaml: does not end with the line '...' and a newline, so it looks half-written;"
            + " write the file elsewhere and rename it into place (e.g. write keys.yaml.tmp, then"
            + " mv)";

    // Cut after a whole line (valid YAML on its own), within the last line, before its newline.
    assertError(complete.substring(0, complete.indexOf("...\n"))).isEqualTo(message);
    assertError(complete.substring(0, complete.length() - 2)).isEqualTo(message);
    assertError(complete.substring(0, complete.length() - 1)).isEqualTo(message);
    assertError("keys: []\n").isEqualTo(message);
    assertError("keys: []\n...\n# a comment after the end\n").isEqualTo(message);
    // Trailing blank lines and Windows line ends are fine.
    assertThat(KeysFile.parse(complete + "\n  \n", "keys.yaml").keys()).hasSize(1);
    assertThat(KeysFile.parse(complete.replace("\n", "\r\n"), "keys.yaml").keys()).hasSize(1);
  }

  @Test
  void toStringListsNoHashes() {
    KeysFile f = KeysFile.parse(entries(ok("a", HASH_A)), "keys.yaml");

    assertThat(f.toString()).doesNotContain(HASH_A);
    assertThat(f.keys().get(0).toString()).contains("name=a").doesNotContain(HASH_A);
  }

  @Test
  void priorityParsesItsLabels() {
    assertThat(Priority.parse(" HIGH ")).isEqualTo(Priority.HIGH);
    assertThat(Priority.parse("low").label()).isEqualTo("low");
    assertThatThrownBy(() -> Priority.parse("")).isInstanceOf(IllegalArgumentException.class);
  }

  static String ok(String name, String hash) {
    return "{name: " + name + ", sha256: \"" + hash + "\", rpm: 60, tpm: 1000}";
  }

  static String entries(String... entries) {
    StringBuilder sb = new StringBuilder("keys:\n");
    for (String e : entries) {
      sb.append("  - ").append(e).append('\n');
    }
    return sb.append("...\n").toString();
  }

  private static org.assertj.core.api.AbstractStringAssert<?> assertError(String yaml) {
    Throwable t =
        org.assertj.core.api.Assertions.catchThrowable(() -> KeysFile.parse(yaml, "keys.yaml"));
    assertThat(t).isInstanceOf(ConfigException.class);
    assertThat(t.getMessage()).doesNotContain("\n");
    return assertThat(t.getMessage());
  }

  @Test
  void theShippedExampleParses() {
    java.nio.file.Path example = java.nio.file.Path.of("../config/keys.example.yaml");

    KeysFile f = KeysFile.load(example);

    assertThat(f.keys()).extracting(ApiKey::name).containsExactly("team-chat", "nightly-batch");
    assertThat(f.keys().get(0).priority()).isEqualTo(Priority.HIGH);
    assertThat(f.keys().get(1).tpm()).isEqualTo(1_000_000);
    assertThat(f.keys().get(0).tenantMetrics()).isTrue();
    assertThat(f.keys().get(1).tenantMetrics()).isFalse();
  }

  @Test
  void tenantMetricsAndSloOverrideParseWithTheirDefaultsAndOtherIsReserved() {
    KeysFile f =
        KeysFile.parse(
            entries(
                "{name: a, sha256: \"" + HASH_A + "\", tenant_metrics: true, slo_override: false}",
                ok("b", HASH_B)),
            "keys.yaml");

    assertThat(f.keys().get(0).tenantMetrics()).isTrue();
    assertThat(f.keys().get(0).sloOverride()).isFalse();
    assertThat(f.keys().get(1).tenantMetrics()).isFalse();
    assertThat(f.keys().get(1).sloOverride()).isTrue();
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", tenant_metrics: yes please}"))
        .isEqualTo("keys.yaml: keys[0].tenant_metrics: expected true or false");
    assertError(entries("{name: a, sha256: \"" + HASH_A + "\", slo_override: 0}"))
        .isEqualTo("keys.yaml: keys[0].slo_override: expected true or false");
    assertError(
            entries(
                ok("a", HASH_A), "{name: other, sha256: \"" + HASH_B + "\", tenant_metrics: true}"))
        .startsWith("keys.yaml: keys[1].tenant_metrics: the name 'other' is reserved");
  }
}
