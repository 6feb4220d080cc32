package io.phasemeter.load.workload;

import io.phasemeter.core.Durations;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Parses {@code --steps 2,4,8 --step-duration 10s} into the steps of a stepped run. */
public final class Steps {
  private Steps() {}

  /**
   * @param rates comma-separated positive rates, requests per second ({@code --steps})
   * @param stepDuration how long each step lasts ({@code --step-duration}, e.g. {@code 10s})
   * @return the steps in the order given
   * @throws IllegalArgumentException naming the flag at fault
   */
  public static List<Step> parse(String rates, String stepDuration) {
    if (rates == null || rates.isBlank()) {
      throw new IllegalArgumentException("--steps must list at least one rate, e.g. 2,4,8");
    }
    Duration duration = Durations.parsePositive("--step-duration", stepDuration);
    List<Step> steps = new ArrayList<>();
    for (String part : rates.split(",", -1)) {
      String p = part.trim();
      double rate;
      try {
        rate = Double.parseDouble(p);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--steps must be comma-separated positive rates such as 2,4,8, got '" + rates + "'");
      }
      if (!(rate > 0) || !Double.isFinite(rate)) {
        throw new IllegalArgumentException(
            "--steps rates must be positive numbers, got '" + p + "' in '" + rates + "'");
      }
      steps.add(new Step(rate, duration));
    }
    return List.copyOf(steps);
  }
}
