package io.phasemeter.load.join;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.workload.TraceIds;
import java.util.ArrayList;
import java.util.List;

/**
 * Every pair of a run, kept until the report, as columns of numbers rather than objects.
 *
 * <p>Why: a run keeps every result for {@code pairs.csv} and the report, and a young collection
 * copies each one it finds still alive. Kept as objects (a {@code Pair}, a {@link ClientResult} and
 * its trace-id string: four objects, ~240 B a request) the results of the last 17 s at 5,000 req/s
 * made each young pause of the load client 52–62 ms on a 2-core VM, and every request due during a
 * pause left late. Here a client result is one row across primitive arrays allocated {@link #CHUNK}
 * rows at a time: keeping it allocates nothing, and a collection copies a few large arrays instead
 * of hundreds of thousands of small objects. A trace id of 32 hex digits is kept as two longs;
 * strings that come from the workload (the bucket) are kept by reference, and so are failure
 * reasons: the runner hands every failure with the same reason the same String (the client's own
 * phrases are constants, an engine's cleaned messages are interned per run, up to 1,024 distinct
 * ones), so a run of failures keeps one reason object, not one per request. Strings made per
 * request (a {@code Server-Timing} header, a trace id of another shape, a reason past that bound)
 * and the proxy's records stay objects, in columns that stay empty when there are none.
 *
 * <p>Rows are rebuilt into {@link Pair}s only when {@link #pairs()} is called (once, for the
 * report). Not thread-safe: the {@link Joiner} guards it.
 */
final class PairColumns {
  /** Rows per chunk: ~1.3 MB of arrays, allocated when the previous chunk is full. */
  static final int CHUNK = 8192;

  private static final ErrorClass[] ERRORS = ErrorClass.values();

  private final List<Chunk> chunks = new ArrayList<>();
  private int size;

  /** One chunk of rows. */
  private static final class Chunk {
    final long[] seq = new long[CHUNK];
    final long[] traceHi = new long[CHUNK];
    final long[] traceLo = new long[CHUNK];
    final long[] intended = new long[CHUNK];
    final long[] actual = new long[CHUNK];
    final long[] transportSetup = new long[CHUNK];
    final long[] ttfb = new long[CHUNK];
    final long[] ttft = new long[CHUNK];
    final long[] total = new long[CHUNK];
    final long[] tpot = new long[CHUNK];
    final long[] itlCount = new long[CHUNK];
    final long[] usagePrompt = new long[CHUNK];
    final long[] usageCompletion = new long[CHUNK];
    final int[] step = new int[CHUNK];
    final int[] status = new int[CHUNK];
    final int[] promptTokens = new int[CHUNK];
    final int[] maxTokens = new int[CHUNK];
    final byte[] error = new byte[CHUNK];
    final boolean[] retried = new boolean[CHUNK];
    final String[] bucket = new String[CHUNK];
    // dns, connect, tls of requests that opened a connection (3 a row), allocated only when a
    // chunk has any: most requests go on a reused connection.
    long[] connectionSetup;
    // Per-request objects, allocated only when a chunk has any.
    String[] traceIdText;
    String[] invalidReason;
    String[] serverTiming;
    ServerRecord[] server;
    // A session's turn and id, allocated only when a chunk has a request of a session; the id is
    // one String per session, shared by its turns.
    int[] turn;
    String[] session;
  }

  /** Keeps one pair: a client result, and the proxy's record or null. */
  void add(ClientResult c, ServerRecord s) {
    int row = size % CHUNK;
    if (row == 0) {
      chunks.add(new Chunk());
    }
    Chunk k = chunks.get(chunks.size() - 1);
    k.seq[row] = c.seq();
    String id = c.traceId();
    if (isHex32(id)) {
      k.traceHi[row] = hex16(id, 0);
      k.traceLo[row] = hex16(id, 16);
    } else {
      if (k.traceIdText == null) {
        k.traceIdText = new String[CHUNK];
      }
      k.traceIdText[row] = id;
    }
    k.intended[row] = c.intendedNanos();
    k.actual[row] = c.actualNanos();
    k.transportSetup[row] = c.transportSetupNanos();
    if (k.connectionSetup != null
        || c.dnsNanos() >= 0
        || c.connectNanos() >= 0
        || c.tlsNanos() >= 0) {
      if (k.connectionSetup == null) {
        k.connectionSetup = new long[3 * CHUNK];
        java.util.Arrays.fill(k.connectionSetup, -1);
      }
      k.connectionSetup[3 * row] = c.dnsNanos();
      k.connectionSetup[3 * row + 1] = c.connectNanos();
      k.connectionSetup[3 * row + 2] = c.tlsNanos();
    }
    k.ttfb[row] = c.ttfbNanos();
    k.ttft[row] = c.ttftNanos();
    k.total[row] = c.totalNanos();
    k.tpot[row] = c.tpotNanos();
    k.itlCount[row] = c.itlCount();
    k.usagePrompt[row] = c.usagePromptTokens();
    k.usageCompletion[row] = c.usageCompletionTokens();
    k.step[row] = c.step();
    k.status[row] = c.status();
    k.promptTokens[row] = c.promptTokens();
    k.maxTokens[row] = c.maxTokens();
    k.error[row] = (byte) c.error().ordinal();
    k.retried[row] = c.retried();
    k.bucket[row] = c.bucket();
    if (c.invalidReason() != null) {
      if (k.invalidReason == null) {
        k.invalidReason = new String[CHUNK];
      }
      k.invalidReason[row] = c.invalidReason();
    }
    if (c.serverTiming() != null) {
      if (k.serverTiming == null) {
        k.serverTiming = new String[CHUNK];
      }
      k.serverTiming[row] = c.serverTiming();
    }
    if (c.turn() != 0 || c.session() != null) {
      if (k.turn == null) {
        k.turn = new int[CHUNK];
        k.session = new String[CHUNK];
      }
      k.turn[row] = c.turn();
      k.session[row] = c.session();
    }
    if (s != null) {
      if (k.server == null) {
        k.server = new ServerRecord[CHUNK];
      }
      k.server[row] = s;
    }
    size++;
  }

  /** Pairs kept so far. */
  int size() {
    return size;
  }

  /** Every pair, in the order kept, rebuilt as objects. */
  List<Pair> pairs() {
    List<Pair> out = new ArrayList<>(size);
    for (int i = 0; i < size; i++) {
      Chunk k = chunks.get(i / CHUNK);
      int row = i % CHUNK;
      String traceId =
          k.traceIdText != null && k.traceIdText[row] != null
              ? k.traceIdText[row]
              : TraceIds.traceId(k.traceHi[row], k.traceLo[row]);
      ClientResult c =
          new ClientResult(
              k.seq[row],
              traceId,
              k.bucket[row],
              k.step[row],
              k.intended[row],
              k.actual[row],
              k.transportSetup[row],
              k.ttfb[row],
              k.ttft[row],
              k.total[row],
              k.tpot[row],
              k.itlCount[row],
              k.status[row],
              ERRORS[k.error[row]],
              k.invalidReason == null ? null : k.invalidReason[row],
              k.promptTokens[row],
              k.maxTokens[row],
              k.usagePrompt[row],
              k.usageCompletion[row],
              k.serverTiming == null ? null : k.serverTiming[row],
              k.retried[row],
              k.turn == null ? 0 : k.turn[row],
              k.session == null ? null : k.session[row],
              k.connectionSetup == null ? -1 : k.connectionSetup[3 * row],
              k.connectionSetup == null ? -1 : k.connectionSetup[3 * row + 1],
              k.connectionSetup == null ? -1 : k.connectionSetup[3 * row + 2]);
      out.add(new Pair(c, k.server == null ? null : k.server[row]));
    }
    return out;
  }

  /**
   * Whether {@code s} is exactly 32 lowercase hex digits (what {@link TraceIds#traceId(long, long)}
   * gives back).
   */
  static boolean isHex32(String s) {
    if (s == null || s.length() != 32) {
      return false;
    }
    for (int i = 0; i < 32; i++) {
      char ch = s.charAt(i);
      if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
        return false;
      }
    }
    return true;
  }

  private static long hex16(String s, int at) {
    long v = 0;
    for (int i = at; i < at + 16; i++) {
      char ch = s.charAt(i);
      v = (v << 4) | (ch <= '9' ? ch - '0' : ch - 'a' + 10);
    }
    return v;
  }
}
