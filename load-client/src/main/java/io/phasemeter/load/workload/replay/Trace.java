package io.phasemeter.load.workload.replay;

/**
 * The rows of a trace file that a run replays, checked ({@link TraceReader}) and held in primitive
 * columns: about 20 bytes a row, 4 a hash id and 8 a distinct one. Row {@code i} is the {@code
 * i}-th replayed row of the file. Immutable once read.
 */
public final class Trace {
  /** Tokens in one hash-id block (Mooncake's, 512). */
  public static final int BLOCK_TOKENS = 512;

  private final Replay.Format format;
  private final long fileRows;
  private final long skipped;

  /**
   * Row {@code i}'s time after the first row's, in nanoseconds of trace time: its own, or for a
   * later turn of a session the earliest it can leave (its previous turn's time, plus its delay
   * when it has no time of its own).
   */
  private final long[] offsetsNanos;

  private final long spanNanos;
  private final int[] input;
  private final int[] output;

  /** Row {@code i}'s hash ids are {@code hashKeys[hashRefs[hashStart[i] .. hashStart[i + 1])]}. */
  private final int[] hashStart;

  private final int[] hashRefs;
  private final long[] hashKeys;

  /** Session index per row (-1: none), or null when no row has one. */
  private final int[] session;

  /** Turn per row (0: none), or null without sessions. */
  private final int[] turn;

  /** The row whose prompt and answer a turn extends (-1: none), or null without sessions. */
  private final int[] extendsRow;

  /** The row of the same session's next turn (-1: none), or null without sessions. */
  private final int[] nextTurn;

  /**
   * Per row, its wait after its previous turn's answer in nanoseconds (a Mooncake later turn
   * without a timestamp: AIPerf's {@code delay}, 0 without one), or -1 for a row with its own time;
   * null when every row has its own.
   */
  private final long[] delayNanos;

  private final String[] sessionIds;

  /** Named prefix per row (-1: none), or null when no row has one. */
  private final int[] prefix;

  /** Named prefix index to its length in tokens. */
  private final int[] prefixLengths;

  private final int sessions;

  Trace(
      Replay.Format format,
      long fileRows,
      long skipped,
      long[] offsetsNanos,
      long spanNanos,
      int[] input,
      int[] output,
      int[] hashStart,
      int[] hashRefs,
      long[] hashKeys,
      int[] session,
      int[] turn,
      int[] extendsRow,
      int[] nextTurn,
      long[] delayNanos,
      String[] sessionIds,
      int sessions,
      int[] prefix,
      int[] prefixLengths) {
    this.format = format;
    this.fileRows = fileRows;
    this.skipped = skipped;
    this.offsetsNanos = offsetsNanos;
    this.spanNanos = spanNanos;
    this.input = input;
    this.output = output;
    this.hashStart = hashStart;
    this.hashRefs = hashRefs;
    this.hashKeys = hashKeys;
    this.session = session;
    this.turn = turn;
    this.extendsRow = extendsRow;
    this.nextTurn = nextTurn;
    this.delayNanos = delayNanos;
    this.sessionIds = sessionIds;
    this.sessions = sessions;
    this.prefix = prefix;
    this.prefixLengths = prefixLengths;
  }

  /** The file's format (given, or told from the file). */
  public Replay.Format format() {
    return format;
  }

  /**
   * Rows the file holds (blank lines and an Azure header not counted), replayed or not; past {@code
   * --replay-limit}, the lines that are not blank (they are not parsed).
   */
  public long fileRows() {
    return fileRows;
  }

  /** Rows of the file left out because they carry no tokens (Azure rows with a 0 length). */
  public long skipped() {
    return skipped;
  }

  /** Rows to replay. */
  public int rows() {
    return input.length;
  }

  /**
   * Every row's time after the first row's, in nanoseconds of trace time: its own, or for a later
   * turn the earliest it can leave; not a copy, not to be changed.
   */
  long[] offsets() {
    return offsetsNanos;
  }

  /** The latest row's offset: the trace's span in trace time. */
  public long spanNanos() {
    return spanNanos;
  }

  /** Row {@code i}'s prompt tokens. */
  public int input(int i) {
    return input[i];
  }

  /** Row {@code i}'s output tokens. */
  public int output(int i) {
    return output[i];
  }

  /** How many hash-id blocks row {@code i} names. */
  public int hashIds(int i) {
    return hashStart[i + 1] - hashStart[i];
  }

  /** Row {@code i}'s {@code b}-th hash id, as the file gave it. */
  public long hashId(int i, int b) {
    return hashKeys[hashRefs[hashStart[i] + b]];
  }

  /** Distinct hash ids among the replayed rows. */
  public int distinctHashIds() {
    return hashKeys.length;
  }

  /** Row {@code i}'s session id, or null outside any session. */
  public String sessionId(int i) {
    return session == null || session[i] < 0 ? null : sessionIds[session[i]];
  }

  /** Row {@code i}'s turn in its session (1 for the first), 0 outside any session. */
  public int turn(int i) {
    return turn == null ? 0 : turn[i];
  }

  /**
   * The row whose prompt and answer row {@code i}'s prompt starts with (its session's previous
   * turn, when row {@code i} names no blocks or prefix of its own), or -1.
   */
  public int extendsRow(int i) {
    return extendsRow == null ? -1 : extendsRow[i];
  }

  /** Row {@code i}'s session (an index from 0, in the order sessions first appear), or -1. */
  public int session(int i) {
    return session == null ? -1 : session[i];
  }

  /** The row of row {@code i}'s session's next turn, or -1 (its last turn, or no session). */
  public int nextTurn(int i) {
    return nextTurn == null ? -1 : nextTurn[i];
  }

  /**
   * Row {@code i}'s wait after its previous turn's answer, in nanoseconds of trace time (a later
   * turn without a time of its own); -1 for a row with its own time.
   */
  public long delayNanos(int i) {
    return delayNanos == null ? -1 : delayNanos[i];
  }

  /** Sessions among the replayed rows. */
  public int sessions() {
    return sessions;
  }

  /** Row {@code i}'s named prefix (an index, the same for every row naming it), or -1. */
  public int prefix(int i) {
    return prefix == null ? -1 : prefix[i];
  }

  /** The length of row {@code i}'s named prefix, in tokens; 0 without one. */
  public int prefixLength(int i) {
    int p = prefix(i);
    return p < 0 ? 0 : prefixLengths[p];
  }
}
