package io.phasemeter.load.workload;

import java.time.Duration;

/**
 * One arrival-rate step of a stepped run.
 *
 * @param ratePerSec offered requests per second
 * @param duration how long the step lasts
 */
public record Step(double ratePerSec, Duration duration) {
  public Step {
    if (!(ratePerSec > 0) || !Double.isFinite(ratePerSec)) {
      throw new IllegalArgumentException("--steps rates must be positive, got " + ratePerSec);
    }
    if (duration == null || duration.isNegative() || duration.isZero()) {
      throw new IllegalArgumentException("--step-duration must be positive, got " + duration);
    }
  }
}
