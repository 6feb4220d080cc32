package io.phasemeter.proxy.telemetry;

import java.util.Arrays;
import java.util.stream.DoubleStream;

/**
 * Histogram boundaries (seconds) from the OpenTelemetry GenAI semantic conventions, extended at the
 * top so a ten-minute generation still lands in a finite bucket, and at the bottom for the proxy's
 * own sub-millisecond phases.
 */
final class Buckets {
  private Buckets() {}

  /** gen_ai.server.request.duration, extended to 655 s. */
  static final double[] REQUEST = {
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
    327.68, 655.36
  };

  /** gen_ai.server.time_to_first_token, extended to 640 s. */
  static final double[] TTFT = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 320.0, 640.0
  };

  /** gen_ai.server.time_per_output_token, extended to 10 s. */
  static final double[] TPOT = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0
  };

  /** Inter-token gaps: TPOT's boundaries plus a few below 10 ms. */
  static final double[] ITL = concat(new double[] {0.001, 0.0025, 0.005}, TPOT);

  /** Phases: sub-millisecond gateway work up to the longest generation. */
  static final double[] PHASE =
      concat(new double[] {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005}, REQUEST);

  private static double[] concat(double[] a, double[] b) {
    return DoubleStream.concat(Arrays.stream(a), Arrays.stream(b)).sorted().distinct().toArray();
  }
}
