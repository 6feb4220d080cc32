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
 * arrivals (row {@code i} due {@code offset_i / speed} after the clock starts, {@link #arrivals}),
 * how long its one step lasts, the rate its warm-up offers, and the conditions it is recorded
 * under. Immutable.
 */
public final class Replayed {
  private final Replay replay;
  private final Trace trace;
  private final String sha256;

  /** Each row's intended start after the clock, in nanoseconds: its offset divided by the speed. */
  private final long[] scaled;

  Replayed(Replay replay, Trace trace, String sha256) {
    this.replay = replay;
    this.trace = trace;
    this.sha256 = sha256;
    long[] offsets = trace.offsets();
    if (replay.speed() == 1.0) {
      this.scaled = offsets;
    } else {
      this.scaled = new long[offsets.length];
      for (int i = 0; i < offsets.length; i++) {
        scaled[i] = Math.round(offsets[i] / replay.speed());
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

  /** Row {@code i}'s intended start after the clock starts, in nanoseconds. */
  public long intendedNanos(int i) {
    return scaled[i];
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

  /**
   * How long the run's one step lasts: the last row's intended start and 1 ms, or {@code cut}
   * ({@code --duration}) when that is shorter (rows due at or after it are not sent).
   *
   * @param cut {@code --duration}, or null
   */
  public Duration stepDuration(Duration cut) {
    Duration whole = Duration.ofNanos(scaled[scaled.length - 1] + 1_000_000);
    return cut != null && cut.compareTo(whole) < 0 ? cut : whole;
  }

  /** Rows due within the step ({@link #stepDuration}): the most the run can send. */
  public int rowsSentMax(Duration cut) {
    long end = stepDuration(cut).toNanos();
    // The first row at or after the end; rows are in time order.
    int lo = 0;
    int hi = scaled.length;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (scaled[mid] < end) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** The mean rate the step offers, requests a second: its rows over its length. */
  public double meanRate(Duration cut) {
    return rowsSentMax(cut) / (stepDuration(cut).toNanos() / 1e9);
  }

  /** The step's arrivals: the rows' intended starts, exactly. */
  public Arrivals arrivals(Duration cut) {
    return Arrivals.trace(scaled, meanRate(cut));
  }

  /** The arrivals in words, for the start line and the conditions. */
  public String arrivalText(Duration cut) {
    return String.format(
        Locale.ROOT,
        "open model, trace replay at speed %s (%.2f req/s on average)",
        number(replay.speed()),
        meanRate(cut));
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
   * time), {@code replay_prefixes}, {@code replay_sessions}, {@code replay_hash_ids} (distinct).
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

  private static String number(double d) {
    return d == Math.rint(d) && Math.abs(d) < 1e15
        ? Long.toString((long) d)
        : java.math.BigDecimal.valueOf(d).stripTrailingZeros().toPlainString();
  }
}
