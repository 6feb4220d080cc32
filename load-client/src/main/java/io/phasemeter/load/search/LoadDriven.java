package io.phasemeter.load.search;

import java.util.Map;

/**
 * Whether a failure eases with the load: compared between a failing probe and one at four times its
 * load (two halvings up). A budget no load meets (a TTFT limit below the model's unloaded TTFT, a
 * slow dependency on every request) fails as much at a quarter of the load; halving on to the floor
 * would cost the longest probes of the search (a slow rate needs long probes for its requests) and
 * end the same way.
 */
final class LoadDriven {
  private LoadDriven() {}

  /** The figure must fall below this share of what it was to count as easing. */
  static final double FELL = 0.9;

  /** The margin must rise by more than this. */
  static final double ROSE = 0.02;

  /** Said in the search's notes when the halving stops on it. */
  static final String NOT_LOAD_DRIVEN =
      "at a quarter of the load the failing figure fell by less than "
          + Math.round((1 - FELL) * 100)
          + " % and the margin did not rise, so a lower load would fail the same way";

  /** Whether {@code lower}'s failure eased compared with {@code higher}'s. */
  static boolean eased(Probe lower, Probe higher) {
    if (Double.isFinite(lower.margin())
        && Double.isFinite(higher.margin())
        && lower.margin() > higher.margin() + ROSE) {
      return true;
    }
    double before = figure(higher, higher);
    double after = figure(lower, higher);
    if (!Double.isFinite(before) || !Double.isFinite(after)) {
      // Nothing to compare: a breach the lower probe did not have eased; otherwise unknown,
      // and unknown halves on.
      return !higher.breaches().isEmpty() || !Double.isFinite(lower.margin());
    }
    return after < FELL * before;
  }

  /**
   * The figure {@code higher} failed on, read in {@code p}: its largest breach's observed value, or
   * the p95 of the objective it missed most; NaN without one.
   */
  private static double figure(Probe p, Probe higher) {
    if (!higher.breaches().isEmpty()) {
      Probe.Breach top = higher.breaches().get(0);
      return p.breaches().stream()
          .filter(b -> b.budget().equals(top.budget()) && b.phase().equals(top.phase()))
          .mapToDouble(Probe.Breach::observedMs)
          .findFirst()
          .orElse(Double.NaN);
    }
    String objective =
        higher.missed().entrySet().stream()
            .filter(e -> e.getValue() > 0)
            .max(Map.Entry.comparingByValue())
            .map(Map.Entry::getKey)
            .orElse(null);
    return objective == null ? Double.NaN : p.p95(objective);
  }
}
