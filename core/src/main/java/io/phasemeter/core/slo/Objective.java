package io.phasemeter.core.slo;

import io.phasemeter.core.Phases;
import java.util.Objects;

/**
 * One per-request service-level objective: a figure of the catalogue and the most it may take for
 * the request to be good. The objective holds when the request's value is at or below the limit
 * (vLLM's {@code --goodput}: {@code value <= slo}).
 *
 * @param phase the figure, a canonical reported phase of {@link Phases} ({@link
 *     Objectives#accepts})
 * @param limitNanos the limit in whole nanoseconds, above zero
 */
public record Objective(Phases phase, long limitNanos) {

  public Objective {
    Objects.requireNonNull(phase, "phase");
    if (!Objectives.accepts(phase)) {
      throw new IllegalArgumentException(
          phase.key() + ": not a per-request figure an objective can be set on");
    }
    if (limitNanos <= 0) {
      throw new IllegalArgumentException(phase.key() + ": the limit must be above zero");
    }
  }

  /** The catalogue name ({@code client_ttft}, {@code queue}, …). */
  public String key() {
    return phase.key();
  }

  /** The limit in milliseconds. */
  public double limitMs() {
    return limitNanos / 1e6;
  }

  /** Whether {@code valueNanos} holds: at or below the limit. NaN never holds. */
  public boolean holds(double valueNanos) {
    return valueNanos <= limitNanos;
  }
}
