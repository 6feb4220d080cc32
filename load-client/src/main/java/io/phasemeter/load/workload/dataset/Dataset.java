package io.phasemeter.load.workload.dataset;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;

/**
 * A dataset file the requests come from ({@code --dataset sharegpt:FILE}, {@code --dataset
 * jsonl:FILE}; docs/design.md §7, "Datasets"): its kind and path. The user brings the file; nothing
 * is downloaded.
 *
 * <p>The file is read once, on the first {@link #load}, and its entries kept here: a capacity
 * search's probes share the options, and so the entries, instead of reading 670 MB again each.
 * Equal when kind and path are.
 */
public final class Dataset {
  /** The formats {@code --dataset} reads. */
  public enum Kind {
    /**
     * A JSON array of {@code {"id", "conversations": [{"from", "value"}, …]}}: the first human turn
     * answered by a gpt turn gives the prompt and, estimated, the output length.
     */
    SHAREGPT("sharegpt"),
    /** One {@code {"prompt": "…", "output_tokens": N}} a line. */
    JSONL("jsonl");

    private final String key;

    Kind(String key) {
      this.key = key;
    }

    /** The name before the colon: {@code sharegpt}, {@code jsonl}. */
    public String key() {
      return key;
    }
  }

  private final Kind kind;
  private final Path file;

  /** Guarded by this: the entries read, and the {@code --output-tokens} they were read with. */
  private DatasetEntries entries;

  private int entriesOverride;

  private Dataset(Kind kind, Path file) {
    this.kind = Objects.requireNonNull(kind, "kind");
    this.file = Objects.requireNonNull(file, "file");
  }

  /** The dataset {@code kind} in {@code file}. */
  public static Dataset of(Kind kind, Path file) {
    return new Dataset(kind, file);
  }

  /**
   * {@code sharegpt:FILE} or {@code jsonl:FILE}; the file is not read yet.
   *
   * @throws IllegalArgumentException naming {@code flag} and what it takes
   */
  public static Dataset parse(String flag, String value) {
    String v = value == null ? "" : value.trim();
    int colon = v.indexOf(':');
    String name = colon < 0 ? "" : v.substring(0, colon).toLowerCase(Locale.ROOT);
    String path = colon < 0 ? "" : v.substring(colon + 1);
    for (Kind k : Kind.values()) {
      if (k.key.equals(name) && !path.isBlank()) {
        return new Dataset(k, Path.of(path));
      }
    }
    throw new IllegalArgumentException(
        flag + " must be sharegpt:FILE or jsonl:FILE, got '" + value + "'");
  }

  public Kind kind() {
    return kind;
  }

  public Path file() {
    return file;
  }

  /**
   * The usable entries, read on the first call (and again only if {@code outputTokens} changes).
   *
   * @param outputTokens {@code --output-tokens}: every entry's output length, or 0 (or less) for
   *     the file's
   * @throws IllegalArgumentException one line naming the file (and line) and what is wrong: no such
   *     file, a bad line, nothing usable
   */
  public synchronized DatasetEntries load(int outputTokens) {
    int override = Math.max(0, outputTokens);
    if (entries == null || entriesOverride != override) {
      entries = read(Limits.DEFAULT, override);
      entriesOverride = override;
    }
    return entries;
  }

  /** Reads the file within {@code limits}; not kept. */
  DatasetEntries read(Limits limits, int outputOverride) {
    if (!Files.isRegularFile(file)) {
      throw new IllegalArgumentException("--dataset " + file + ": no such file");
    }
    if (!Files.isReadable(file)) {
      throw new IllegalArgumentException("--dataset " + file + ": not readable");
    }
    DatasetEntries.Builder b = new DatasetEntries.Builder(kind, file, limits, outputOverride);
    return switch (kind) {
      case SHAREGPT -> ShareGptReader.read(file, limits, b);
      case JSONL -> JsonlReader.read(file, limits, b);
    };
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Dataset d && d.kind == kind && d.file.equals(file);
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, file);
  }

  /** {@code sharegpt:FILE}, as given. */
  @Override
  public String toString() {
    return kind.key + ":" + file;
  }
}
