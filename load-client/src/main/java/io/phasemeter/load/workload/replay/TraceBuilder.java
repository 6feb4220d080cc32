package io.phasemeter.load.workload.replay;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Checks a trace's rows one by one, in file order, and keeps those to replay: lengths, time order,
 * hash ids against the input length, sessions and named prefixes, each problem one error naming the
 * line (and the other line when two disagree). Not thread-safe.
 */
final class TraceBuilder {
  private final String name;
  private final Replay.Format format;
  private final long limit;
  private final TraceReader.Limits limits;
  private final String timeField;
  private final String inputField;
  private final String outputField;

  private long fileRows;
  private long skipped;
  private long lastTime = -1;
  private long lastLine;

  private final Columns.Longs times = new Columns.Longs(1024);
  private final Columns.Ints input = new Columns.Ints(1024);
  private final Columns.Ints output = new Columns.Ints(1024);
  private final Columns.Ints hashStart = new Columns.Ints(1024);
  private final Columns.Ints hashRefs = new Columns.Ints(1024);
  private final Columns.Interner hashKeys = new Columns.Interner();
  private final Columns.Sparse session = new Columns.Sparse(-1);
  private final Columns.Sparse turn = new Columns.Sparse(0);
  private final Columns.Sparse extendsRow = new Columns.Sparse(-1);
  private final Columns.Sparse prefix = new Columns.Sparse(-1);

  /** What a session's next turn is checked against. */
  private static final class Session {
    int turns;
    long lastInput;
    long lastOutput;
    long lastLine;

    /** The previous turn's row among those kept, or -1. */
    int lastKept = -1;

    /** Its index among the sessions of kept rows, or -1 while it has none. */
    int keptIndex = -1;
  }

  /** A named prefix: its index and the one length every row naming it must give. */
  private record Prefix(int index, long length, long line) {}

  private final Map<String, Session> sessions = new HashMap<>();
  private final List<String> sessionIds = new ArrayList<>();
  private final Map<String, Prefix> prefixes = new HashMap<>();
  private final Columns.Ints prefixLengths = new Columns.Ints(16);

  TraceBuilder(String name, Replay.Format format, long limit, TraceReader.Limits limits) {
    this.name = name;
    this.format = format;
    this.limit = limit;
    this.limits = limits;
    boolean azure = format == Replay.Format.AZURE;
    this.timeField =
        azure ? "TIMESTAMP" : format == Replay.Format.MOONCAKE ? "timestamp" : "offset_ms";
    this.inputField = azure ? "ContextTokens" : "input_length";
    this.outputField = azure ? "GeneratedTokens" : "output_length";
  }

  /** Rows of the file so far. */
  long fileRows() {
    return fileRows;
  }

  /** Rows kept to replay so far. */
  int kept() {
    return input.size();
  }

  /** Checks one row (fields as read) and keeps it when it is one to replay. */
  void add(TraceReader.Row row, long line) {
    fileRows++;
    if (fileRows > limits.maxRows()) {
      throw error(
          line,
          String.format(
              Locale.ROOT,
              "more than %,d rows (the limit): replay a part of the file (head -n)",
              limits.maxRows()));
    }
    if (lastTime >= 0 && row.timeNanos < lastTime) {
      throw error(
          line,
          String.format(
              Locale.ROOT,
              "%s is earlier than line %d's (by %s ms): rows must be in time order",
              timeField,
              lastLine,
              millis(lastTime - row.timeNanos)));
    }
    lastTime = row.timeNanos;
    lastLine = line;
    if (format == Replay.Format.AZURE && (row.input == 0 || row.output == 0)) {
      // A request that read or wrote no token cannot be replayed with exact lengths.
      skipped++;
      return;
    }
    long in = length(row.input, inputField, line);
    long out = length(row.output, outputField, line);
    int blocks = row.hashIds.size();
    long most = (in + Trace.BLOCK_TOKENS - 1) / Trace.BLOCK_TOKENS;
    if (blocks > most) {
      throw error(
          line,
          "hash_ids names "
              + blocks
              + " blocks, but "
              + inputField
              + " "
              + in
              + " fills at most "
              + most
              + " ("
              + Trace.BLOCK_TOKENS
              + "-token blocks)");
    }
    int prefixIndex = prefix(row, in, blocks, line);
    boolean keep = limit == 0 || input.size() < limit;
    int sessionIndex = -1;
    int turnNumber = 0;
    int extended = -1;
    if (row.session != null) {
      Session s = sessions.get(row.session);
      if (s == null) {
        if (sessions.size() >= limits.maxSessions()) {
          throw error(
              line,
              String.format(
                  Locale.ROOT, "more than %,d sessions (the limit)", limits.maxSessions()));
        }
        s = new Session();
        sessions.put(row.session, s);
      }
      s.turns++;
      if (s.turns > 1 && blocks == 0 && prefixIndex < 0) {
        long need = s.lastInput + s.lastOutput;
        if (in < need) {
          throw error(
              line,
              inputField
                  + " "
                  + in
                  + " is shorter than its session's previous turn with its answer (line "
                  + s.lastLine
                  + ": "
                  + s.lastInput
                  + " in + "
                  + s.lastOutput
                  + " out): a turn without hash_ids"
                  + (format == Replay.Format.JSONL ? " or prefix" : "")
                  + " extends the previous prompt and answer");
        }
        extended = s.lastKept;
      }
      s.lastInput = in;
      s.lastOutput = out;
      s.lastLine = line;
      s.lastKept = keep ? input.size() : -1;
      if (keep) {
        if (s.keptIndex < 0) {
          s.keptIndex = sessionIds.size();
          sessionIds.add(row.session);
        }
        sessionIndex = s.keptIndex;
        turnNumber = s.turns;
      }
    }
    if (!keep) {
      return;
    }
    if (hashRefs.size() + (long) blocks > limits.maxHashIds()) {
      throw error(
          line,
          String.format(
              Locale.ROOT,
              "the rows to replay name more than %,d hash ids together (the limit): replay fewer"
                  + " (--replay-limit)",
              limits.maxHashIds()));
    }
    times.add(row.timeNanos);
    input.add((int) in);
    output.add((int) out);
    hashStart.add(hashRefs.size());
    for (int b = 0; b < blocks; b++) {
      hashRefs.add(hashKeys.intern(row.hashIds.get(b)));
    }
    session.add(sessionIndex);
    turn.add(turnNumber);
    extendsRow.add(extended);
    prefix.add(prefixIndex);
  }

  /** The kept rows. */
  Trace build() {
    long[] offsets = times.toArray();
    long first = offsets[0];
    for (int i = 0; i < offsets.length; i++) {
      offsets[i] -= first;
    }
    hashStart.add(hashRefs.size());
    return new Trace(
        format,
        fileRows,
        skipped,
        offsets,
        input.toArray(),
        output.toArray(),
        hashStart.toArray(),
        hashRefs.toArray(),
        hashKeys.keys(),
        session.toArrayOrNull(),
        turn.toArrayOrNull(),
        extendsRow.toArrayOrNull(),
        sessionIds.toArray(String[]::new),
        sessionIds.size(),
        prefix.toArrayOrNull(),
        prefixLengths.toArray());
  }

  /** A row's named prefix (ours): its index, or -1 without one. */
  private int prefix(TraceReader.Row row, long in, int blocks, long line) {
    if (row.prefix == null) {
      if (row.prefixLength >= 0) {
        throw error(line, "prefix_length needs prefix (the id of what the rows share)");
      }
      return -1;
    }
    if (row.prefixLength < 0) {
      throw error(line, "prefix needs prefix_length (how many of its first tokens it names)");
    }
    if (blocks > 0) {
      throw error(line, "prefix cannot go with hash_ids: each says what the row shares");
    }
    if (row.prefixLength < 1 || row.prefixLength > in) {
      throw error(
          line, "prefix_length must be 1 to input_length (" + in + "), got " + row.prefixLength);
    }
    Prefix p = prefixes.get(row.prefix);
    if (p == null) {
      if (prefixes.size() >= limits.maxPrefixes()) {
        throw error(
            line,
            String.format(Locale.ROOT, "more than %,d prefixes (the limit)", limits.maxPrefixes()));
      }
      p = new Prefix(prefixes.size(), row.prefixLength, line);
      prefixes.put(row.prefix, p);
      prefixLengths.add((int) row.prefixLength);
    } else if (p.length() != row.prefixLength) {
      throw error(
          line,
          "prefix_length "
              + row.prefixLength
              + " differs from line "
              + p.line()
              + "'s "
              + p.length()
              + " for the same prefix: one prefix, one length");
    }
    return p.index();
  }

  private long length(long v, String field, long line) {
    if (v < 1) {
      throw error(line, field + " must be at least 1, got " + v);
    }
    if (v > limits.maxTokens()) {
      throw error(
          line,
          String.format(
              Locale.ROOT, "%s %d is above the limit of %,d tokens", field, v, limits.maxTokens()));
    }
    return v;
  }

  private static String millis(long nanos) {
    return java.math.BigDecimal.valueOf(nanos, 6).stripTrailingZeros().toPlainString();
  }

  private IllegalArgumentException error(long line, String what) {
    return new IllegalArgumentException("--replay " + name + ":" + line + ": " + what);
  }
}
