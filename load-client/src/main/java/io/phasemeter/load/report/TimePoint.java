package io.phasemeter.load.report;

import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import java.util.ArrayList;
import java.util.List;

/**
 * One interval of the run, by intended start: how many requests were scheduled in it and, over its
 * joined successful requests, the mean of each part of the client total. The parts stack exactly to
 * the mean client total: envelope + gateway + (receive + unattributed) + queue + generation +
 * write.
 *
 * @param startSeconds the interval's start, seconds since the run began
 * @param widthSeconds the interval's width
 * @param started requests scheduled in the interval
 * @param failed of those, how many failed
 * @param joinedOk of those, how many succeeded and joined (the population of the means)
 * @param clientTotalMs mean client total over {@code joinedOk}; NaN when none
 */
public record TimePoint(
    double startSeconds,
    double widthSeconds,
    long started,
    long failed,
    long joinedOk,
    double clientTotalMs,
    double networkEnvelopeMs,
    double gatewayMs,
    double receiveAndUnattributedMs,
    double queueMs,
    double generationMs,
    double writeMs) {

  /** At most this many intervals; the width grows from one second to keep to it. */
  static final int MAX_POINTS = 600;

  /** Builds the series over {@code [runStart, runEnd)}. */
  public static List<TimePoint> series(List<Pair> pairs, long runStartNanos, long runEndNanos) {
    long span = Math.max(1, runEndNanos - runStartNanos);
    long width = 1_000_000_000L;
    while (span / width >= MAX_POINTS) {
      width *= 2;
    }
    int n = (int) (span / width) + 1;
    long[] started = new long[n];
    long[] failed = new long[n];
    long[] joined = new long[n];
    double[][] sums = new double[7][n];
    for (Pair p : pairs) {
      long offset = p.client().intendedNanos() - runStartNanos;
      if (offset < 0) {
        continue;
      }
      int i = (int) Math.min(n - 1, offset / width);
      started[i]++;
      if (!p.client().ok()) {
        failed[i]++;
        continue;
      }
      ServerRecord s = p.server();
      if (s == null || p.client().totalNanos() < 0) {
        continue;
      }
      double[] parts = {
        p.client().totalNanos() / 1e6,
        p.networkEnvelopeMs(),
        SlowRequest.orNaN(s.gatewayMs()),
        SlowRequest.phase(s, "receive") + SlowRequest.orNaN(s.unattributedMs()),
        SlowRequest.phase(s, "queue"),
        SlowRequest.phase(s, "generation"),
        SlowRequest.phase(s, "write")
      };
      boolean complete = true;
      for (double v : parts) {
        complete &= Double.isFinite(v);
      }
      if (!complete) {
        continue; // a record without every phase cannot be stacked
      }
      joined[i]++;
      for (int k = 0; k < parts.length; k++) {
        sums[k][i] += parts[k];
      }
    }
    List<TimePoint> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      double[] mean = new double[7];
      for (int k = 0; k < 7; k++) {
        mean[k] = joined[i] == 0 ? Double.NaN : sums[k][i] / joined[i];
      }
      out.add(
          new TimePoint(
              i * width / 1e9,
              width / 1e9,
              started[i],
              failed[i],
              joined[i],
              mean[0],
              mean[1],
              mean[2],
              mean[3],
              mean[4],
              mean[5],
              mean[6]));
    }
    return out;
  }
}
