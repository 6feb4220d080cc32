package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;

/**
 * The one hook a phase has into its own timing, for the phase whose end is not the moment its
 * future completes: {@link PhaseChain} opens the phase's span, hands the phase this timer, and ends
 * the span when the phase's future completes, at the instant marked here if the phase marked one,
 * else then.
 *
 * <p>Only generation takes one. Its end is the upstream's last byte; for a whole response the clock
 * is read as the last byte arrives, before the body is inspected and the response prepared, and a
 * streamed response's relay to the client continues past it into phase {@code write}. A phase never
 * opens or closes a span itself.
 */
final class PhaseTimer {
  private final Span span;
  private long endAt = -1;

  PhaseTimer(Span span) {
    this.span = span;
  }

  /** The phase's span, for its attributes and events. */
  Span span() {
    return span;
  }

  /** The phase ends at {@code at} (the proxy clock), whenever its future completes. */
  void endAt(long at) {
    this.endAt = at;
  }

  /** The marked end, or {@code now} when none was marked. */
  long endOr(long now) {
    return endAt >= 0 ? endAt : now;
  }
}
