package io.phasemeter.load.workload.dataset;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A jsonl dataset: every line checked, the first bad one an error naming the file, the line and the
 * field (never the text); the line-length limit met exactly without holding a longer line.
 */
class JsonlReaderTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  private DatasetEntries read(Path file, Limits limits, int outputOverride) {
    return Dataset.of(Dataset.Kind.JSONL, file).read(limits, outputOverride);
  }

  @Test
  void readsPromptsAndLengthsSkippingBlankLinesAndOtherFields() throws Exception {
    Path f =
        Files.writeString(
            dir.resolve("d.jsonl"),
            "{\"prompt\": \"first \\\"one\\\" é\", \"output_tokens\": 7, \"id\": [1, {\"x\": 2}]}\r\n"
                + "\n"
                + "   \n"
                + "{\"output_tokens\": 300, \"prompt\": \"second\"}");
    DatasetEntries e = read(f, Limits.DEFAULT, 0);
    assertThat(e.size()).isEqualTo(2);
    assertThat(e.entriesRead()).isEqualTo(2);
    assertThat(JSON.readValue(e.promptJson(0), String.class)).isEqualTo("first \"one\" é");
    assertThat(e.outputTokens(0)).isEqualTo(7);
    assertThat(e.promptTokensEst(0)).isEqualTo(4); // 13 characters
    assertThat(JSON.readValue(e.promptJson(1), String.class)).isEqualTo("second");
    assertThat(e.outputTokens(1)).isEqualTo(300);
    assertThat(e.skipped()).isEmpty();
    assertThat(e.sha256()).isEqualTo(DatasetFiles.sha256(f));
    assertThat(e.describe()).isEqualTo("jsonl " + f + " (2 entries)");
    assertThat(e.conditions().get("dataset_output_tokens_from")).isEqualTo("file");
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '`',
      value = {
        "invalid JSON | {\"prompt\": \"canary\", | not valid JSON",
        "two values | {\"prompt\": \"canary\", \"output_tokens\": 2} {} | more than one JSON value"
            + " on the line",
        "an array | [\"canary\"] | not a JSON object",
        "no prompt | {\"output_tokens\": 3} | no \"prompt\"",
        "an empty prompt | {\"prompt\": \"\", \"output_tokens\": 3} | \"prompt\" is empty",
        "a numeric prompt | {\"prompt\": 12, \"output_tokens\": 3} | \"prompt\" must be a string,"
            + " got a number",
        "no output_tokens | {\"prompt\": \"canary\"} | no \"output_tokens\" (give it on every"
            + " line, or --output-tokens N for all)",
        "zero | {\"prompt\": \"canary\", \"output_tokens\": 0} | \"output_tokens\" must be an"
            + " integer from 1 to 2147483647, got 0",
        "negative | {\"prompt\": \"canary\", \"output_tokens\": -5} | \"output_tokens\" must be an"
            + " integer from 1 to 2147483647, got -5",
        "too large | {\"prompt\": \"canary\", \"output_tokens\": 2147483648} | \"output_tokens\""
            + " must be an integer from 1 to 2147483647, got 2147483648",
        "a fraction | {\"prompt\": \"canary\", \"output_tokens\": 2.5} | \"output_tokens\" must be"
            + " an integer from 1 to 2147483647, got a fraction",
        "a string | {\"prompt\": \"canary\", \"output_tokens\": \"12\"} | \"output_tokens\" must be"
            + " an integer from 1 to 2147483647, got a string",
      })
  void aBadLineIsOneErrorNamingTheFileTheLineAndTheField(String name, String bad, String why)
      throws Exception {
    Path f =
        DatasetFiles.lines(
            dir.resolve("d.jsonl"),
            List.of("{\"prompt\": \"fine\", \"output_tokens\": 4}", "", bad.trim()));
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + f + ":3: " + why.trim())
        .message()
        .doesNotContain("canary");
  }

  @Test
  void outputTokensMayBeLeftOutWhenTheFlagGivesThemButAreStillChecked() throws Exception {
    Path f = DatasetFiles.lines(dir.resolve("d.jsonl"), List.of("{\"prompt\": \"a b c d\"}"));
    assertThat(read(f, Limits.DEFAULT, 9).outputTokens(0)).isEqualTo(9);
    Path g =
        DatasetFiles.lines(
            dir.resolve("e.jsonl"), List.of("{\"prompt\": \"a\", \"output_tokens\": -1}"));
    assertThatThrownBy(() -> read(g, Limits.DEFAULT, 9)).hasMessageContaining(":1: ");
  }

  /** A line of exactly {@code bytes} bytes. */
  private static String lineOf(int bytes) {
    String head = "{\"prompt\": \"";
    String tail = "\", \"output_tokens\": 5}";
    return head + "a".repeat(bytes - head.length() - tail.length()) + tail;
  }

  @Test
  void aLineOfExactlyOneMebibyteIsReadAndOneByteMoreIsAnError() throws Exception {
    String at = lineOf(Limits.MIB);
    assertThat(at.getBytes(StandardCharsets.UTF_8)).hasSize(Limits.MIB);
    Path ok = Files.writeString(dir.resolve("ok.jsonl"), at + "\r\n" + at);
    assertThat(read(ok, Limits.DEFAULT, 0).size()).isEqualTo(2);

    Path over = Files.writeString(dir.resolve("over.jsonl"), at + "\n" + lineOf(Limits.MIB + 1));
    assertThatThrownBy(() -> read(over, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + over + ":2: the line is longer than 1,048,576 bytes, the limit");
  }

  @Test
  void aLineFarOverTheLimitFailsWithoutReadingItAll() throws Exception {
    Limits small = new Limits(10, Limits.MIB, Limits.MIB, 64);
    // 8 MiB on one line: the error comes at byte 65, whatever follows.
    Path f =
        Files.writeString(
            dir.resolve("long.jsonl"), "{\"prompt\": \"" + "x".repeat(8 * Limits.MIB));
    assertThatThrownBy(() -> read(f, small, 0))
        .hasMessage("--dataset " + f + ":1: the line is longer than 64 bytes, the limit");
  }

  @Test
  void anEmptyFileOrOneOfBlankLinesHasNoEntry() throws Exception {
    Path empty = Files.writeString(dir.resolve("empty.jsonl"), "");
    assertThatThrownBy(() -> read(empty, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + empty + ": the file is empty");
    Path blank = Files.writeString(dir.resolve("blank.jsonl"), "\n  \n\r\n");
    assertThatThrownBy(() -> read(blank, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + blank + ": no usable entry (0 read)");
  }

  @Test
  void stopsAtTheEntryLimitWithANote() throws Exception {
    Path f =
        DatasetFiles.lines(
            dir.resolve("d.jsonl"),
            List.of(
                "{\"prompt\": \"one\", \"output_tokens\": 1}",
                "{\"prompt\": \"two\", \"output_tokens\": 2}",
                "{\"prompt\": \"three\", \"output_tokens\": 3}"));
    DatasetEntries at = read(f, new Limits(3, Limits.MIB, Limits.MIB, Limits.MIB), 0);
    assertThat(at.size()).isEqualTo(3);
    assertThat(at.stoppedAt()).isNull();
    DatasetEntries under = read(f, new Limits(2, Limits.MIB, Limits.MIB, Limits.MIB), 0);
    assertThat(under.size()).isEqualTo(2);
    assertThat(under.stoppedAt()).contains("entry 3 of the file and after are not used");
    assertThat(under.sha256()).isEqualTo(DatasetFiles.sha256(f));
  }
}
