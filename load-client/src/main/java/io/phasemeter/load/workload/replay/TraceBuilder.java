package io.phasemeter.load.workload.replay;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Checks a trace's rows one by one, in file order, and keeps those to replay (up to {@code
 * --replay-limit}): lengths, time order, hash ids against the input length, sessions and named
 * prefixes, each problem one error naming the line (and the other line when two disagree). Not
 * thread-safe.
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

  /** Each kept row's time: its own, or for a later turn the earliest it can leave (below). */
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
  private final Columns.SparseLongs delay = new Columns.SparseLongs(-1);

  /** What a session's next turn is checked against. */
  private static final class Session {
    final int index;
    int turns;
    long lastInput;
    long lastOutput;
    long lastLine;

    /** The previous turn's row. */
    int lastRow;

    /** The previous turn's time: the earliest it could leave. */
    long lastTime;

    Session(int index) {
      this.index = index;
    }
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

  /** Whether {@code --replay-limit} rows are kept: the rest of the file is not parsed. */
  boolean full() {
    return limit > 0 && input.size() >= limit;
  }

  /** {@code rows} more rows of the file, past the limit, counted but not parsed. */
  void notParsed(long rows) {
    fileRows += rows;
  }

  /**
   * Checks one row (fields as read) and keeps it, unless it is an Azure row without tokens.
   *
   * <p>A Mooncake row may have no {@code timestamp} when it is a later turn of a session (AIPerf's
   * multi-turn form): it leaves its {@code delay} (0 without one) after its previous turn's answer.
   * Its time here is the earliest it can leave, its previous turn's time plus the delay; a later
   * turn with a timestamp earlier than its previous turn's time has that time too. The replay waits
   * for the answer in any case ({@link Replayed#due}).
   */
  void add(TraceReader.Row row, long line) {
    fileRows++;
    boolean timed = row.timeNanos >= 0;
    if (timed) {
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
    }
    if (format == Replay.Format.AZURE && (row.input == 0 || row.output == 0)) {
      // A request that read or wrote no token cannot be replayed with exact lengths.
      skipped++;
      return;
    }
    if (input.size() >= limits.maxRows()) {
      throw error(
          line,
          String.format(
              Locale.ROOT,
              "more than %,d rows to replay (the limit): replay fewer (--replay-limit)",
              limits.maxRows()));
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
    Session s = row.session == null ? null : sessions.get(row.session);
    if (!timed && s == null) {
      throw error(
          line,
          timeField
              + " is missing"
              + (row.session != null || row.delayNanos >= 0
                  ? " (only a later turn of a session, after its first, may go without: it"
                      + " follows its previous turn's answer)"
                  : ""));
    }
    long time = row.timeNanos;
    long delayNanos = -1;
    int extended = -1;
    if (row.session != null) {
      if (s == null) {
        if (sessions.size() >= limits.maxSessions()) {
          throw error(
              line,
              String.format(
                  Locale.ROOT, "more than %,d sessions (the limit)", limits.maxSessions()));
        }
        s = new Session(sessionIds.size());
        sessions.put(row.session, s);
        sessionIds.add(row.session);
      } else {
        if (timed) {
          // It cannot leave before its previous turn has.
          time = Math.max(time, s.lastTime);
        } else {
          delayNanos = Math.max(0, row.delayNanos);
          time =
              s.lastTime > Long.MAX_VALUE - delayNanos ? Long.MAX_VALUE : s.lastTime + delayNanos;
        }
        if (blocks == 0 && prefixIndex < 0) {
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
          extended = s.lastRow;
        }
      }
      s.turns++;
      s.lastInput = in;
      s.lastOutput = out;
      s.lastLine = line;
      s.lastRow = input.size();
      s.lastTime = time;
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
    times.add(time);
    input.add((int) in);
    output.add((int) out);
    hashStart.add(hashRefs.size());
    for (int b = 0; b < blocks; b++) {
      hashRefs.add(hashKeys.intern(row.hashIds.get(b)));
    }
    session.add(s == null ? -1 : s.index);
    turn.add(s == null ? 0 : s.turns);
    extendsRow.add(extended);
    prefix.add(prefixIndex);
    delay.add(delayNanos);
  }

  /** The kept rows. */
  Trace build() {
    long[] offsets = times.toArray();
    // The first row is no later turn: it has its own time, and no row's is earlier.
    long first = offsets[0];
    long span = 0;
    for (int i = 0; i < offsets.length; i++) {
      offsets[i] -= first;
      span = Math.max(span, offsets[i]);
    }
    hashStart.add(hashRefs.size());
    int[] sessionOf = session.toArrayOrNull();
    int[] next = null;
    if (sessionOf != null) {
      // Each turn's next turn in its session: rows are in file order.
      next = new int[sessionOf.length];
      java.util.Arrays.fill(next, -1);
      int[] last = new int[sessionIds.size()];
      java.util.Arrays.fill(last, -1);
      for (int i = 0; i < sessionOf.length; i++) {
        int s = sessionOf[i];
        if (s >= 0) {
          if (last[s] >= 0) {
            next[last[s]] = i;
          }
          last[s] = i;
        }
      }
    }
    return new Trace(
        format,
        fileRows,
        skipped,
        offsets,
        span,
        input.toArray(),
        output.toArray(),
        hashStart.toArray(),
        hashRefs.toArray(),
        hashKeys.keys(),
        sessionOf,
        turn.toArrayOrNull(),
        extendsRow.toArrayOrNull(),
        next,
        delay.toArrayOrNull(),
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
