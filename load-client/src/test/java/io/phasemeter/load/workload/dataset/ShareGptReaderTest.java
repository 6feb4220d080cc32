package io.phasemeter.load.workload.dataset;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A ShareGPT file read as a stream: the usable entries in file order with their estimated lengths,
 * each skipped entry counted under its reason, the file's SHA-256, the limits met exactly, and one
 * error line naming the file and line for a file that is not ShareGPT.
 */
class ShareGptReaderTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  private static DatasetEntries read(Path file, Limits limits, int outputOverride) {
    return Dataset.of(Dataset.Kind.SHAREGPT, file).read(limits, outputOverride);
  }

  private static String text(DatasetEntries e, int i) throws Exception {
    return JSON.readValue(e.promptJson(i), String.class);
  }

  @Test
  void readsEveryUsableEntryAndCountsEachSkippedOneUnderItsReason() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sg.json"), 40, 7);
    DatasetEntries e = read(p.file(), Limits.DEFAULT, 0);

    assertThat(e.size()).isEqualTo(40);
    assertThat(e.entriesRead()).isEqualTo(p.entries());
    assertThat(e.skipped()).isEqualTo(p.skipped());
    assertThat(e.sha256()).isEqualTo(DatasetFiles.sha256(p.file()));
    assertThat(e.stoppedAt()).isNull();
    for (int i = 0; i < e.size(); i++) {
      DatasetFiles.Entry want = p.usable().get(i);
      assertThat(text(e, i)).isEqualTo(want.prompt());
      assertThat(e.promptTokensEst(i)).isEqualTo(want.promptTokens());
      assertThat(e.outputTokens(i)).isEqualTo(want.outputTokens());
    }
    // The conditions: lengths and the hash, never the text.
    Map<String, Object> c = e.conditions();
    assertThat(c.get("dataset_entries")).isEqualTo(40L);
    assertThat(c.get("dataset_sha256")).isEqualTo(DatasetFiles.sha256(p.file()));
    assertThat(c.get("dataset_output_tokens_from")).isEqualTo("estimate");
    assertThat(c.toString()).doesNotContain(p.canary());
    assertThat(String.join("\n", e.lines())).doesNotContain(p.canary());
  }

  @Test
  void outputTokensReplaceEveryLengthAndLiftTheShortOutputFilterAsInVllm() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sg.json"), 12, 3);
    DatasetEntries e = read(p.file(), Limits.DEFAULT, 64);

    // "ok" (1 token) is no longer too short, and 1,000 + 64 tokens is no longer too long.
    Map<String, Long> skipped = new LinkedHashMap<>(p.skipped());
    skipped.put(Skip.OUTPUT_SHORT.key(), 0L);
    skipped.put(Skip.TOTAL_LONG.key(), 0L);
    assertThat(e.skipped()).isEqualTo(skipped);
    assertThat(e.size()).isEqualTo(14);
    for (int i = 0; i < e.size(); i++) {
      assertThat(e.outputTokens(i)).isEqualTo(64);
    }
    assertThat(e.conditions().get("dataset_output_tokens_from")).isEqualTo("--output-tokens");
  }

  @Test
  void stopsAtTheEntryLimitExactlyAndSaysSoButHashesTheWholeFile() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sg.json"), 20, 5);
    Limits at = new Limits(20, Limits.DEFAULT.maxPromptBytes(), Limits.MIB, Limits.MIB);
    DatasetEntries all = read(p.file(), at, 0);
    assertThat(all.size()).isEqualTo(20);
    assertThat(all.stoppedAt()).isNull();

    Limits under = new Limits(19, Limits.DEFAULT.maxPromptBytes(), Limits.MIB, Limits.MIB);
    DatasetEntries cut = read(p.file(), under, 0);
    assertThat(cut.size()).isEqualTo(19);
    assertThat(cut.stoppedAt()).startsWith("stopped reading at 19 usable entries, the limit");
    assertThat(cut.entriesRead()).isEqualTo(p.entries());
    assertThat(cut.sha256()).isEqualTo(DatasetFiles.sha256(p.file()));
    assertThat(cut.lines()).anyMatch(l -> l.startsWith("note: --dataset "));
    assertThat(cut.conditions().get("dataset_stopped_at")).isEqualTo(cut.stoppedAt());
  }

  @Test
  void stopsAtThePromptTextLimitExactly() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sg.json"), 10, 9);
    DatasetEntries all = read(p.file(), Limits.DEFAULT, 0);
    long bytes = 0;
    for (int i = 0; i < all.size(); i++) {
      bytes += all.promptJson(i).length;
    }
    DatasetEntries at = read(p.file(), new Limits(100, bytes, Limits.MIB, Limits.MIB), 0);
    assertThat(at.size()).isEqualTo(10);
    assertThat(at.stoppedAt()).isNull();

    DatasetEntries under = read(p.file(), new Limits(100, bytes - 1, Limits.MIB, Limits.MIB), 0);
    assertThat(under.size()).isEqualTo(9);
    assertThat(under.stoppedAt()).contains("bytes of prompt text, the limit of");
  }

  @Test
  void aValueOverTheLimitSkipsItsEntryOnlyAndIsNeverHeldWhole() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sg.json"), 30, 11);
    int limit = 250;
    long longPrompts = 0;
    for (DatasetFiles.Entry u : p.usable()) {
      longPrompts += DatasetFiles.fileBytes(u.prompt()) > limit ? 1 : 0;
    }
    assertThat(longPrompts).isPositive().isLessThan(30);
    DatasetEntries e = read(p.file(), new Limits(100, Limits.MIB, limit, Limits.MIB), 0);

    // The 1 MiB prompt, the two planted long prompts (5,000 and 4,000 bytes), and the usable
    // prompts over 250 bytes (the answers are shorter); the 3 KiB answers after the pairs are
    // skipped unread.
    assertThat(e.skipped().get(Skip.VALUE_TOO_LONG.key())).isEqualTo(3 + longPrompts);
    assertThat(e.skipped().get(Skip.PROMPT_LONG.key())).isZero();
    assertThat(e.skipped().get(Skip.TOTAL_LONG.key())).isZero();
    assertThat(e.size()).isEqualTo(30 - longPrompts);
  }

  private Path file(String content) throws Exception {
    return Files.writeString(dir.resolve("bad.json"), content);
  }

  @Test
  void aFileThatIsNotShareGptIsOneLineNamingTheFileAndLine() throws Exception {
    Path f = file("");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + f + ": the file is empty");
    file("\n{\"conversations\": []}\n");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage(
            "--dataset "
                + f
                + ":2: not a ShareGPT file: the top level is not a JSON array of"
                + " entries");
    String canary = "canary-in-a-broken-file";
    file(
        "[\n{\"conversations\": []},\n{\"conversations\": [{\"value\": \"" + canary + "\" x}]}\n]");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + f + ":3: not valid JSON")
        .message()
        .doesNotContain(canary);
    file("[\n{\"conversations\": []},\n{\"conversations\": [{\"from\": \"human\", \"value\": \"a");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessageStartingWith("--dataset " + f + ":3: ");
    file("[]\n[]\n");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + f + ":2: more after the array of entries");
  }

  @Test
  void aFileWithNothingUsableSaysWhatWasSkipped() throws Exception {
    Path f =
        file(
            "[{\"conversations\": \"no\"},"
                + " {\"conversations\": [{\"from\": \"human\", \"value\": \"a question\"}]},"
                + " {\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"},"
                + " {\"from\": \"gpt\", \"value\": \"a long enough answer\"}]}]");
    assertThatThrownBy(() -> read(f, Limits.DEFAULT, 0))
        .hasMessage(
            "--dataset "
                + f
                + ": no usable entry (3 read; malformed_entry 1; no_human_gpt_pair 1;"
                + " prompt_under_4_tokens 1)");
    Path missing = dir.resolve("missing.json");
    assertThatThrownBy(() -> read(missing, Limits.DEFAULT, 0))
        .hasMessage("--dataset " + missing + ": no such file");
  }

  @Test
  void theDefaultLimitsAreTheDocumentedOnes() {
    assertThat(Limits.DEFAULT.maxEntries()).isEqualTo(1_000_000);
    assertThat(Limits.DEFAULT.maxPromptBytes()).isEqualTo(512L * 1024 * 1024);
    assertThat(Limits.DEFAULT.maxValueBytes()).isEqualTo(1024 * 1024);
    assertThat(Limits.DEFAULT.maxLineBytes()).isEqualTo(1024 * 1024);
  }
}
