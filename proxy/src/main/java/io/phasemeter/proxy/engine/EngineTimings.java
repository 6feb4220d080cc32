package io.phasemeter.proxy.engine;

/**
 * One request as the inference engine timed it (vLLM's {@code llm_request} span), in nanoseconds;
 * -1 where the span did not say. {@code queue} is the engine's own scheduler queue, {@code prefill}
 * scheduled → first token, {@code decode} first → last token, {@code e2e} the engine's arrival →
 * finish. These durations come from the engine's clock and are never mixed with the proxy's
 * timestamps: only durations are compared.
 */
public record EngineTimings(
    long queueNanos, long prefillNanos, long decodeNanos, long ttftNanos, long e2eNanos) {

  /** Whether the span carried at least one of queue, prefill or decode. */
  public boolean splitsGeneration() {
    return queueNanos >= 0 || prefillNanos >= 0 || decodeNanos >= 0;
  }
}
