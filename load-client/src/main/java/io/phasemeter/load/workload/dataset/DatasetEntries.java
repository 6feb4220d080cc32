package io.phasemeter.load.workload.dataset;

import io.phasemeter.load.report.LengthStats;
import io.phasemeter.load.workload.Workload;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The usable entries of a dataset file, read once: each one's prompt (kept as it is sent: a quoted,
 * escaped JSON string in UTF-8), its estimated prompt length and its output length; and what the
 * reading found (the file's SHA-256, the entries skipped and why, whether it stopped at a limit).
 * The prompts never leave this class but in request bodies: nothing here names or logs them.
 *
 * <p>Immutable once built, and so thread-safe.
 */
public final class DatasetEntries {
  private final Dataset.Kind kind;
  private final Path file;
  private final String sha256;
  private final long entriesRead;
  private final Map<String, Long> skipped;
  private final String stoppedAt;
  private final byte[][] prompts;
  private final int[] promptTokensEst;
  private final int[] outputTokens;
  private final long promptBytes;
  private final int outputOverride;

  private DatasetEntries(Builder b, String sha256) {
    this.kind = b.kind;
    this.file = b.file;
    this.sha256 = sha256;
    this.entriesRead = b.entriesRead;
    this.skipped = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(b.skipped));
    this.stoppedAt = b.stoppedAt;
    this.prompts = b.prompts.toArray(byte[][]::new);
    this.promptTokensEst = Arrays.copyOf(b.promptTokensEst, b.size);
    this.outputTokens = Arrays.copyOf(b.outputTokens, b.size);
    this.promptBytes = b.promptBytes;
    this.outputOverride = b.outputOverride;
  }

  /** How many entries are usable. */
  public int size() {
    return prompts.length;
  }

  /** The file's format. */
  public Dataset.Kind kind() {
    return kind;
  }

  /** Entry {@code i}'s prompt as a quoted JSON string, UTF-8: for request bodies only. */
  byte[] promptJson(int i) {
    return prompts[i];
  }

  /** Entry {@code i}'s output length: the file's, or {@code --output-tokens}. */
  int outputTokens(int i) {
    return outputTokens[i];
  }

  /** Entry {@code i}'s estimated prompt length, {@code ceil(chars / 4)}. */
  int promptTokensEst(int i) {
    return promptTokensEst[i];
  }

  /** The whole file's SHA-256, hex. */
  public String sha256() {
    return sha256;
  }

  /** Entries skipped, by reason ({@link Skip}'s names; empty for jsonl, which skips none). */
  public Map<String, Long> skipped() {
    return skipped;
  }

  /** Why reading stopped before the end of the file (a limit), or null when it read it all. */
  public String stoppedAt() {
    return stoppedAt;
  }

  /** How many entries were read, usable or not. */
  public long entriesRead() {
    return entriesRead;
  }

  /** {@code sharegpt FILE (n entries)}: for the workload's description. */
  public String describe() {
    return kind.key() + " " + file + " (" + String.format(Locale.ROOT, "%,d", size()) + " entries)";
  }

  /**
   * The conditions of a run from this file: {@code dataset}, {@code dataset_file}, {@code
   * dataset_sha256}, {@code dataset_entries} (usable), {@code dataset_entries_read}, {@code
   * dataset_skipped}, {@code dataset_stopped_at} (null when the whole file was read), {@code
   * dataset_output_tokens_from}, {@code dataset_prompt_tokens_est} and {@code
   * dataset_output_tokens}. Lengths and hashes only, never text.
   */
  public Map<String, Object> conditions() {
    Map<String, Object> c = new LinkedHashMap<>();
    c.put("dataset", kind.key());
    c.put("dataset_file", file.toString());
    c.put("dataset_sha256", sha256);
    c.put("dataset_entries", (long) size());
    c.put("dataset_entries_read", entriesRead);
    c.put("dataset_skipped", new LinkedHashMap<>(skipped));
    c.put("dataset_stopped_at", stoppedAt);
    c.put(
        "dataset_output_tokens_from",
        outputOverride > 0 ? "--output-tokens" : kind == Dataset.Kind.JSONL ? "file" : "estimate");
    c.put("dataset_prompt_tokens_est", LengthStats.of(promptTokensEst).asMap());
    c.put("dataset_output_tokens", LengthStats.of(outputTokens).asMap());
    return c;
  }

  /** What reading found, in lines for the console: the counts, and a note when it stopped early. */
  public List<String> lines() {
    List<String> lines = new ArrayList<>();
    StringBuilder sb =
        new StringBuilder("--dataset ")
            .append(kind.key())
            .append(' ')
            .append(file)
            .append(": ")
            .append(String.format(Locale.ROOT, "%,d", size()))
            .append(" usable entries of ")
            .append(String.format(Locale.ROOT, "%,d", entriesRead))
            .append(" read");
    long skips = skipped.values().stream().mapToLong(Long::longValue).sum();
    if (skips > 0) {
      sb.append(" (skipped:");
      skipped.forEach(
          (k, v) -> {
            if (v > 0) {
              sb.append(' ').append(k).append(' ').append(v);
            }
          });
      sb.append(')');
    }
    lines.add(sb.append(", sha256 ").append(sha256, 0, 12).append('…').toString());
    if (stoppedAt != null) {
      lines.add("note: --dataset " + file + ": " + stoppedAt);
    }
    return lines;
  }

  /** The estimate of a text's tokens, the simulator's rule: {@code ceil(chars / 4)}. */
  static int estimateTokens(String text) {
    return (int) ((text.length() + 3L) / 4);
  }

  /** Collects entries as a reader finds them, within {@link Limits}. Not thread-safe. */
  static final class Builder {
    private final Dataset.Kind kind;
    private final Path file;
    private final Limits limits;
    private final int outputOverride;
    private final Map<String, Long> skipped = new LinkedHashMap<>();
    private final List<byte[]> prompts = new ArrayList<>();
    private int[] promptTokensEst = new int[1024];
    private int[] outputTokens = new int[1024];
    private int size;
    private long promptBytes;
    private long entriesRead;
    private String stoppedAt;

    /**
     * @param outputOverride {@code --output-tokens} (every entry's output length), or 0: the file's
     */
    Builder(Dataset.Kind kind, Path file, Limits limits, int outputOverride) {
      this.kind = kind;
      this.file = file;
      this.limits = limits;
      this.outputOverride = outputOverride;
      if (kind == Dataset.Kind.SHAREGPT) {
        for (Skip s : Skip.values()) {
          skipped.put(s.key(), 0L);
        }
      }
    }

    int outputOverride() {
      return outputOverride;
    }

    /** One more entry read from the file, usable or not. */
    void read() {
      entriesRead++;
    }

    void skip(Skip why) {
      skipped.merge(why.key(), 1L, Long::sum);
    }

    /**
     * Keeps an entry, unless a limit is reached: then nothing is kept, {@link #stoppedAt} says why,
     * and the reader stops.
     *
     * @return false when the entry did not fit: stop reading
     */
    boolean add(String prompt, int promptTokens, int output) {
      if (size == limits.maxEntries()) {
        stoppedAt =
            String.format(
                Locale.ROOT,
                "stopped reading at %,d usable entries, the limit (entry %,d of the file and"
                    + " after are not used)",
                size,
                entriesRead);
        return false;
      }
      StringBuilder sb = new StringBuilder(prompt.length() + 16);
      Workload.appendString(sb, prompt);
      byte[] json = sb.toString().getBytes(StandardCharsets.UTF_8);
      if (promptBytes + json.length > limits.maxPromptBytes()) {
        stoppedAt =
            String.format(
                Locale.ROOT,
                "stopped reading at %,d bytes of prompt text, the limit of %,d (entry %,d of the"
                    + " file and after are not used)",
                promptBytes,
                limits.maxPromptBytes(),
                entriesRead);
        return false;
      }
      if (size == promptTokensEst.length) {
        int grown = (int) Math.min((long) size * 2, Integer.MAX_VALUE - 8);
        promptTokensEst = Arrays.copyOf(promptTokensEst, grown);
        outputTokens = Arrays.copyOf(outputTokens, grown);
      }
      prompts.add(json);
      promptTokensEst[size] = promptTokens;
      outputTokens[size] = outputOverride > 0 ? outputOverride : output;
      size++;
      promptBytes += json.length;
      return true;
    }

    /** The entries, or an error when none is usable. */
    DatasetEntries build(String sha256) {
      if (size == 0) {
        StringBuilder why =
            new StringBuilder("--dataset ")
                .append(file)
                .append(": no usable entry (")
                .append(entriesRead)
                .append(" read");
        skipped.forEach(
            (k, v) -> {
              if (v > 0) {
                why.append("; ").append(k).append(' ').append(v);
              }
            });
        throw new IllegalArgumentException(why.append(')').toString());
      }
      return new DatasetEntries(this, sha256);
    }
  }
}
