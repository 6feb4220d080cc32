package io.phasemeter.core.slo;

import java.util.List;

/**
 * Whether one request was good, and if not, why.
 *
 * @param good succeeded and every objective held
 * @param firstMissed the key of the first objective (in the objectives' order) that did not hold,
 *     missed or unjudged; {@link #ERROR} for a request that failed; null when good
 * @param missed every objective whose figure was above its limit, in order
 * @param unjudged every objective whose figure was absent (a server-side or joined figure of a
 *     request that was not joined), in order; such a request is never good
 */
public record Verdict(
    boolean good, String firstMissed, List<Objective> missed, List<Objective> unjudged) {

  /** {@link #firstMissed()} of a request that failed: no objective was judged. */
  public static final String ERROR = "error";

  static final Verdict GOOD = new Verdict(true, null, List.of(), List.of());
  static final Verdict FAILED = new Verdict(false, ERROR, List.of(), List.of());

  public Verdict {
    missed = List.copyOf(missed);
    unjudged = List.copyOf(unjudged);
  }
}
