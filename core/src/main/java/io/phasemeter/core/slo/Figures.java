package io.phasemeter.core.slo;

import io.phasemeter.core.Phases;

/**
 * One request's figures, as the side that judges it observed them: the load client (its own figures
 * and, joined, the proxy's record) or the proxy (its spans).
 */
@FunctionalInterface
public interface Figures {
  /**
   * The request's value of {@code phase} in nanoseconds, or NaN when it is absent: a server-side or
   * joined figure of a request that was not joined, a phase the request did not pass through. A
   * request with at most one output token has a TPOT of 0 (vLLM's convention: there is no gap to
   * average), not an absent one; an envelope may be negative.
   */
  double nanos(Phases phase);
}
