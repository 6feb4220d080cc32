package io.phasemeter.load.workload.dataset;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Dataset files for tests, written here (nothing is downloaded), with what a reader must find in
 * them: a ShareGPT file of usable entries and planted ones that must be skipped, for each reason a
 * known number of times.
 */
public final class DatasetFiles {
  private DatasetFiles() {}

  /** A usable entry as written: its prompt and its completion's estimated length. */
  public record Entry(String prompt, int promptTokens, int outputTokens) {}

  /**
   * A planted ShareGPT file.
   *
   * @param file where it is
   * @param usable the usable entries in file order
   * @param skipped how many entries each reason must skip ({@link Skip}'s names, every one)
   * @param entries every entry in the file
   * @param canary a word in every prompt: any trace of it in an output is a leak
   */
  public record Planted(
      Path file, List<Entry> usable, Map<String, Long> skipped, int entries, String canary) {}

  /**
   * Writes {@code usable} usable entries (in varied shapes: a system turn first, the value before
   * its role, more turns after the pair, escapes and characters beyond ASCII in the text) and, in
   * between, 2 malformed entries, 2 without a human turn answered by a gpt turn, 1 whose prompt is
   * longer than 1 MiB, and 1 of each length filter.
   */
  public static Planted shareGpt(Path file, int usable, long seed) throws IOException {
    String canary = "canary" + Long.toHexString(seed * 0x9E3779B97F4A7C15L);
    SplittableRandom rng = new SplittableRandom(seed);
    List<Entry> entries = new ArrayList<>();
    Map<String, Long> skipped = new LinkedHashMap<>();
    for (Skip s : Skip.values()) {
      skipped.put(s.key(), 0L);
    }
    int written = 0;
    try (OutputStream os = Files.newOutputStream(file);
        JsonGenerator g = new JsonFactory().createGenerator(os)) {
      g.useDefaultPrettyPrinter();
      g.writeStartArray();
      for (int i = 0; i < usable; i++) {
        String prompt =
            canary + " \"quoted\" back\\slash\nnew line é 😀 " + "word ".repeat(rng.nextInt(2, 80));
        String completion = "answer ".repeat(rng.nextInt(3, 30));
        writeEntry(g, "u" + i, i, prompt, completion);
        written++;
        entries.add(
            new Entry(
                prompt,
                DatasetEntries.estimateTokens(prompt),
                DatasetEntries.estimateTokens(completion)));
        if (i == Math.min(3, usable - 1)) {
          written += planted(g, skipped);
        }
      }
      g.writeEndArray();
    }
    return new Planted(file, List.copyOf(entries), skipped, written, canary);
  }

  /** One usable entry, in one of four shapes. */
  private static void writeEntry(
      JsonGenerator g, String id, int shape, String prompt, String completion) throws IOException {
    g.writeStartObject();
    g.writeStringField("id", id);
    g.writeArrayFieldStart("conversations");
    if (shape % 5 == 1) {
      turn(g, "system", "You are helpful.", false);
    }
    if (shape % 7 == 2) {
      // A human turn not answered: the pair is the next human turn and its answer.
      turn(g, "human", "unanswered " + prompt, false);
      turn(g, "bing", "another assistant's words", false);
    }
    turn(g, "human", prompt, shape % 4 == 0);
    turn(g, shape % 6 == 5 ? "assistant" : "gpt", completion, shape % 4 == 0);
    if (shape % 3 == 0) {
      turn(g, "human", "a second question, not used", false);
      turn(g, "gpt", "x".repeat(3 * 1024), false);
    }
    g.writeEndArray();
    g.writeStringField("model", "test");
    g.writeEndObject();
  }

  private static void turn(JsonGenerator g, String from, String value, boolean valueFirst)
      throws IOException {
    g.writeStartObject();
    if (valueFirst) {
      g.writeStringField("value", value);
      g.writeStringField("from", from);
    } else {
      g.writeStringField("from", from);
      g.writeStringField("value", value);
    }
    g.writeEndObject();
  }

  /** The entries that must be skipped, each reason's count added to {@code skipped}. */
  private static int planted(JsonGenerator g, Map<String, Long> skipped) throws IOException {
    // Malformed: not an object; no conversations array.
    g.writeString("not an entry");
    g.writeStartObject();
    g.writeStringField("id", "no-conversations");
    g.writeStringField("conversations", "not an array");
    g.writeEndObject();
    skipped.merge(Skip.MALFORMED.key(), 2L, Long::sum);
    // No pair: a human turn alone; a gpt turn before a human one.
    pair(g, List.of("human", "only a question, long enough"));
    pair(g, List.of("gpt", "an answer first, long enough", "human", "then a question, long"));
    skipped.merge(Skip.NO_PAIR.key(), 2L, Long::sum);
    // A prompt over 1 MiB.
    pair(g, List.of("human", "p".repeat(Limits.MIB + 1), "gpt", "a fine answer here"));
    skipped.merge(Skip.VALUE_TOO_LONG.key(), 1L, Long::sum);
    // The length filters: prompt "hi" (1 token); answer "ok" (1); a prompt of 1,250 tokens; 1,000
    // and 1,250 tokens together.
    pair(g, List.of("human", "hi", "gpt", "a fine answer here"));
    pair(g, List.of("human", "a fine question here", "gpt", "ok"));
    pair(g, List.of("human", "q".repeat(5000), "gpt", "a fine answer here"));
    pair(g, List.of("human", "q".repeat(4000), "gpt", "a".repeat(5000)));
    skipped.merge(Skip.PROMPT_SHORT.key(), 1L, Long::sum);
    skipped.merge(Skip.OUTPUT_SHORT.key(), 1L, Long::sum);
    skipped.merge(Skip.PROMPT_LONG.key(), 1L, Long::sum);
    skipped.merge(Skip.TOTAL_LONG.key(), 1L, Long::sum);
    return 9;
  }

  /** An entry of these turns: role, value, role, value… */
  private static void pair(JsonGenerator g, List<String> turns) throws IOException {
    g.writeStartObject();
    g.writeArrayFieldStart("conversations");
    for (int i = 0; i < turns.size(); i += 2) {
      turn(g, turns.get(i), turns.get(i + 1), false);
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /**
   * The bytes {@code value} takes in a file written here, between its quotes: Jackson writes a
   * character beyond the BMP as two escapes, 12 bytes.
   */
  public static int fileBytes(String value) throws IOException {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    try (JsonGenerator g = new JsonFactory().createGenerator(out)) {
      g.writeString(value);
    }
    return out.size() - 2;
  }

  /** A jsonl file of these lines, each ended by {@code \n}. */
  public static Path lines(Path file, List<String> lines) throws IOException {
    return Files.writeString(file, String.join("\n", lines) + "\n");
  }

  /** The SHA-256 of a file, hex. */
  public static String sha256(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
  }
}
