package io.phasemeter.load.workload.replay;

import static io.phasemeter.load.workload.Workload.mix64;

import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.Workload;
import java.util.SplittableRandom;

/**
 * The token ids of a replayed row's prompt, from the run's seed and the trace alone (docs/design.md
 * §7, "Replaying a trace"):
 *
 * <ul>
 *   <li>a hash-id block is 512 pseudo-random ids drawn from {@code mix64(seed ^ mix64(blockId))},
 *       so rows naming the same block send the same 512 tokens at the same place;
 *   <li>a row's prompt is its blocks in order, cut to its input length, then ids of its own (from
 *       the seed and the row's index);
 *   <li>a named prefix ({@code jsonl}) is, in the same way, {@code prefix_length} ids of its own;
 *   <li>a session's turn that names neither is its previous turn's prompt, then as many ids as that
 *       turn's output length standing for its answer, then ids of its own up to its length.
 * </ul>
 *
 * With {@link Replay.Prefixes#DISTINCT} every block is keyed by its row and position instead, and
 * turns and prefixes share nothing: the same lengths, nothing in common. The run's {@link
 * PromptSalt} is mixed into every seed here ({@link PromptSalt#key}): rows share under it exactly
 * what they share without it, and nothing with a run of another salt. Immutable and thread-safe.
 */
final class TracePrompts {
  /** Receives a prompt's token ids in order. */
  interface Sink {
    void token(int id);
  }

  // Domains of the seeds, so that a row's own ids never draw from a block's stream.
  private static final long ROW = 0x52_4f_57_00_00_00_00_01L;
  private static final long ANSWER = 0x41_4e_53_57_00_00_00_02L;
  private static final long NAMED = 0x50_52_45_46_00_00_00_03L;
  private static final long DISTINCT_BLOCK = 0x44_49_53_54_00_00_00_04L;

  private final Trace trace;
  private final long seed;
  private final boolean shared;
  private final PromptSalt salt;

  TracePrompts(Trace trace, long seed, Replay.Prefixes prefixes, PromptSalt salt) {
    this.trace = trace;
    this.seed = seed;
    this.shared = prefixes == Replay.Prefixes.SHARED;
    this.salt = salt;
  }

  /** Row {@code row}'s prompt, {@code trace.input(row)} ids, into {@code sink}. */
  void prompt(int row, Sink sink) {
    if (shared && trace.extendsRow(row) >= 0) {
      extended(row, sink);
      return;
    }
    own(row, sink);
  }

  /** Row {@code row}'s prompt as an array (tests, and nothing hot). */
  int[] prompt(int row) {
    int[] ids = new int[trace.input(row)];
    int[] n = {0};
    prompt(row, id -> ids[n[0]++] = id);
    return ids;
  }

  /**
   * A prompt of row {@code row}'s length that shares nothing with the run's (another seed, every id
   * the row's own): a warm-up's, which must leave nothing in a prefix cache for the run to hit.
   */
  void unrelated(int row, long otherSeed, Sink sink) {
    draw(rng(mix64(otherSeed ^ mix64(ROW + row))), trace.input(row), sink);
  }

  /** A row whose prompt is its own: blocks or a named prefix, then ids of its own. */
  private void own(int row, Sink sink) {
    int in = trace.input(row);
    int covered = 0;
    int blocks = trace.hashIds(row);
    for (int b = 0; b < blocks && covered < in; b++) {
      long key =
          shared
              ? mix64(seed ^ mix64(trace.hashId(row, b)))
              : mix64(seed ^ mix64(DISTINCT_BLOCK + row) ^ b);
      int n = Math.min(Trace.BLOCK_TOKENS, in - covered);
      draw(rng(key), n, sink);
      covered += n;
    }
    int named = trace.prefix(row);
    if (named >= 0 && shared) {
      int n = trace.prefixLength(row);
      draw(rng(mix64(seed ^ mix64(NAMED + named))), n, sink);
      covered += n;
    }
    draw(rng(mix64(seed ^ mix64(ROW + row))), in - covered, sink);
  }

  /**
   * A turn that extends its session: the first self-contained turn of the chain, then each turn's
   * answer and new ids. Walked forward, so a session of thousands of turns needs no recursion.
   */
  private void extended(int row, Sink sink) {
    int depth = 0;
    for (int r = row; trace.extendsRow(r) >= 0; r = trace.extendsRow(r)) {
      depth++;
    }
    int[] chain = new int[depth + 1];
    int r = row;
    for (int i = depth; i >= 0; i--) {
      chain[i] = r;
      r = trace.extendsRow(r);
    }
    own(chain[0], sink);
    long length = trace.input(chain[0]);
    for (int i = 1; i < chain.length; i++) {
      int previous = chain[i - 1];
      int turn = chain[i];
      int answer = trace.output(previous);
      draw(rng(mix64(seed ^ mix64(ANSWER + previous))), answer, sink);
      length += answer;
      int more = (int) (trace.input(turn) - length);
      draw(rng(mix64(seed ^ mix64(ROW + turn))), more, sink);
      length = trace.input(turn);
    }
  }

  /** The ids of the stream whose unsalted seed is {@code key}, under the run's salt. */
  private SplittableRandom rng(long key) {
    return new SplittableRandom(salt.key(key));
  }

  private static void draw(SplittableRandom rng, int n, Sink sink) {
    for (int i = 0; i < n; i++) {
      sink.token(rng.nextInt(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID + 1));
    }
  }
}
