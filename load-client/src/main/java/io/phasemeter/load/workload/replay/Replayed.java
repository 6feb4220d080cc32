package io.phasemeter.load.workload.replay;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.Workload;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A trace read for a run, and what the run takes from it: its requests ({@link #workload}), its
 * times (row {@code i} due {@code offset_i / speed} after the clock starts, a later turn of a
 * session not before its previous turn's answer: {@link #due}), how long its one step lasts, the
 * rate its warm-up offers, and the conditions it is recorded under. Immutable.
 */
public final class Replayed {
  /**
   * The longest a replay may last: the replayed rows' span divided by {@code --replay-speed} (30
   * days). A longer one is refused before anything is sent, and every time in nanoseconds stays far
   * from overflowing.
   */
  public static final Duration MAX_SPAN = Duration.ofDays(30);

  private final Replay replay;
  private final Trace trace;
  private final String sha256;

  /**
   * Each row's time after the clock, in nanoseconds: its offset divided by the speed. For a later
   * turn of a session, the earliest it can leave.
   */
  private final long[] scaled;

  /** The span divided by the speed, in nanoseconds. */
  private final long spanScaled;

  /** The rows the clock paces (outside sessions and first turns), in time order; null: all. */
  private final int[] paced;

  /** Their times ({@link #scaled}), in the same order. */
  private final long[] pacedScaled;

  Replayed(Replay replay, Trace trace, String sha256) {
    this.replay = replay;
    this.trace = trace;
    this.sha256 = sha256;
    double span = trace.spanNanos() / replay.speed();
    if (!(span <= MAX_SPAN.toNanos())) {
      throw new IllegalArgumentException(
          String.format(
              Locale.ROOT,
              "--replay-speed %s stretches the trace's %s s to %.3g days: more than %d (the"
                  + " limit); replay faster or fewer rows (--replay-limit)",
              number(replay.speed()),
              number(trace.spanNanos() / 1e9),
              span / 86_400e9,
              MAX_SPAN.toDays()));
    }
    long[] offsets = trace.offsets();
    if (replay.speed() == 1.0) {
      this.scaled = offsets;
    } else {
      this.scaled = new long[offsets.length];
      for (int i = 0; i < offsets.length; i++) {
        scaled[i] = scale(offsets[i]);
      }
    }
    this.spanScaled = scale(trace.spanNanos());
    int n = 0;
    for (int i = 0; i < trace.rows(); i++) {
      n += trace.turn(i) <= 1 ? 1 : 0;
    }
    if (n == trace.rows()) {
      this.paced = null;
      this.pacedScaled = scaled;
    } else {
      this.paced = new int[n];
      this.pacedScaled = new long[n];
      for (int i = 0, j = 0; i < trace.rows(); i++) {
        if (trace.turn(i) <= 1) {
          paced[j] = i;
          pacedScaled[j++] = scaled[i];
        }
      }
    }
  }

  /** The options it was read with. */
  public Replay replay() {
    return replay;
  }

  /** The rows. */
  public Trace trace() {
    return trace;
  }

  /** The file's SHA-256, in hex. */
  public String sha256() {
    return sha256;
  }

  /**
   * The requests: row {@code seq - 1} for request {@code seq}, on {@code /v1/completions}, their
   * token ids from the seed and {@code salt} ({@link PromptSalt#NONE}: the seed alone).
   */
  public Workload workload(String model, boolean stream, long seed, PromptSalt salt) {
    return Workload.from(
        model,
        Api.COMPLETIONS,
        stream,
        seed,
        new ReplaySource(trace, replay.prefixes(), model, stream, seed, salt));
  }

  /** How many rows the clock paces: those outside sessions and every session's first turn. */
  public int pacedRows() {
    return paced == null ? scaled.length : paced.length;
  }

  /** The row of the {@code j}-th paced arrival ({@link #arrivals}), in time order. */
  public int pacedRow(int j) {
    return paced == null ? j : paced[j];
  }

  /**
   * When row {@code row}, a later turn of a session, is due (client clock): as AIPerf's fixed
   * schedule sends it, once its previous turn has ended at {@code previousEndNanos}: at its time
   * ({@code startNanos} plus its offset ÷ speed) or at that end when it is later; a turn without a
   * time of its own at that end plus its delay ÷ speed.
   */
  public long due(int row, long startNanos, long previousEndNanos) {
    long delay = trace.delayNanos(row);
    if (delay >= 0) {
      return previousEndNanos + scale(delay);
    }
    return Math.max(startNanos + scaled[row], previousEndNanos);
  }

  /**
   * The session labels of this run: what pairs.csv writes for each row's session instead of its id
   * (which may be a user's).
   *
   * @param salt the run's trace-id prefix
   */
  public SessionLabels sessionLabels(String salt) {
    return new SessionLabels(trace, salt);
  }

  /**
   * How long the run's one step is planned to last: the latest row's time and 1 ms, or {@code cut}
   * ({@code --duration}) when that is shorter (rows due at or after it are not sent). A session's
   * later turns wait for answers, so they may end it later ({@code StepRunner.replay}).
   *
   * @param cut {@code --duration}, or null
   */
  public Duration stepDuration(Duration cut) {
    Duration whole = Duration.ofNanos(spanScaled + 1_000_000);
    return cut != null && cut.compareTo(whole) < 0 ? cut : whole;
  }

  /**
   * How long the clock paces rows: the last paced row's time and 1 ms, or {@code cut} when that is
   * shorter.
   */
  public Duration pacedDuration(Duration cut) {
    Duration whole = Duration.ofNanos(pacedScaled[pacedScaled.length - 1] + 1_000_000);
    return cut != null && cut.compareTo(whole) < 0 ? cut : whole;
  }

  /**
   * Rows that can leave within the step ({@link #stepDuration}): the most the run can send (a later
   * turn may still wait past the end for an answer).
   */
  public int rowsSentMax(Duration cut) {
    long end = stepDuration(cut).toNanos();
    int n = 0;
    for (long t : scaled) {
      n += t < end ? 1 : 0;
    }
    return n;
  }

  /** The mean rate the step offers, requests a second: its rows over its length. */
  public double meanRate(Duration cut) {
    return rowsSentMax(cut) / (stepDuration(cut).toNanos() / 1e9);
  }

  /** The paced rows' arrivals ({@link #pacedRow}): their intended starts, exactly. */
  public Arrivals arrivals(Duration cut) {
    return Arrivals.trace(pacedScaled, meanRate(cut));
  }

  /** The arrivals in words, for the start line and the conditions. */
  public String arrivalText(Duration cut) {
    return String.format(
        Locale.ROOT,
        "open model, trace replay at speed %s (%.2f req/s on average)%s",
        number(replay.speed()),
        meanRate(cut),
        paced == null ? "" : "; a session's later turns after its previous answer");
  }

  /** The workload in words, for the start line and the conditions. */
  public String workloadText(boolean stream) {
    return "replay of "
        + replay.file()
        + " ("
        + trace.format().key()
        + ", "
        + trace.rows()
        + " rows, "
        + (trace.skipped() > 0 ? trace.skipped() + " without tokens left out, " : "")
        + "prefixes "
        + replay.prefixes().key()
        + (trace.sessions() > 0 ? ", " + trace.sessions() + " sessions" : "")
        + "), exact lengths"
        + (stream ? ", streamed" : ", whole responses");
  }

  /**
   * The conditions of summary.json: {@code replay_file}, {@code replay_sha256}, {@code
   * replay_format}, {@code replay_rows} (in the file), {@code replay_rows_skipped} (Azure rows with
   * a length of 0), {@code replay_limit}, {@code replay_rows_sent_max} (after the limit and {@code
   * --duration}), {@code replay_speed}, {@code replay_span_s} (the replayed rows' span in trace
   * time, a later turn at the earliest it can leave), {@code replay_prefixes}, {@code
   * replay_sessions}, {@code replay_hash_ids} (distinct).
   */
  public Map<String, Object> conditions(Duration cut) {
    Map<String, Object> c = new LinkedHashMap<>();
    c.put("replay_file", replay.file().toString());
    c.put("replay_sha256", sha256);
    c.put("replay_format", trace.format().key());
    c.put("replay_rows", trace.fileRows());
    c.put("replay_rows_skipped", trace.skipped());
    c.put("replay_limit", replay.limit() == 0 ? null : replay.limit());
    c.put("replay_rows_sent_max", (long) rowsSentMax(cut));
    c.put("replay_speed", replay.speed());
    c.put("replay_span_s", trace.spanNanos() / 1e9);
    c.put("replay_prefixes", replay.prefixes().key());
    c.put("replay_sessions", (long) trace.sessions());
    c.put("replay_hash_ids", (long) trace.distinctHashIds());
    return c;
  }

  /** Nanoseconds of trace time at the speed; below {@link #MAX_SPAN} for any time of the trace. */
  private long scale(long traceNanos) {
    return replay.speed() == 1.0 ? traceNanos : Math.round(traceNanos / replay.speed());
  }

  private static String number(double d) {
    return d == Math.rint(d) && Math.abs(d) < 1e15
        ? Long.toString((long) d)
        : java.math.BigDecimal.valueOf(d).stripTrailingZeros().toPlainString();
  }
}
