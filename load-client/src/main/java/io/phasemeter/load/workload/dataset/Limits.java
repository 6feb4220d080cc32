package io.phasemeter.load.workload.dataset;

/**
 * How much of a dataset file is read and kept (docs/design.md §7, "Datasets"); tests make them
 * small to reach them.
 *
 * @param maxEntries usable entries kept; reading stops at the first one past it (a note, not an
 *     error)
 * @param maxPromptBytes prompt text kept, counted as sent (UTF-8, JSON-escaped, quoted); reading
 *     stops at the first entry that would pass it (a note, not an error)
 * @param maxValueBytes a ShareGPT string longer than this in the file (its bytes between the
 *     quotes) is cut while reading, and an entry whose prompt or completion it is is skipped
 *     ({@link Skip#VALUE_TOO_LONG})
 * @param maxLineBytes a jsonl line longer than this (without its line end) is an error
 */
record Limits(int maxEntries, long maxPromptBytes, int maxValueBytes, int maxLineBytes) {
  /** 1 MiB. */
  static final int MIB = 1024 * 1024;

  /** The limits of a run: 1,000,000 entries, 512 MiB of prompt text, 1 MiB a value and a line. */
  static final Limits DEFAULT = new Limits(1_000_000, 512L * MIB, MIB, MIB);

  Limits {
    if (maxEntries < 1 || maxPromptBytes < 1 || maxValueBytes < 1 || maxLineBytes < 1) {
      throw new IllegalArgumentException("dataset limits must be positive");
    }
  }
}
