package io.phasemeter.sim;

/**
 * The timing arithmetic of continuous batching, kept free of clocks and timers so it can be tested
 * exactly. All results are in nanoseconds so that fractional milliseconds accumulate without drift.
 */
final class CostModel {
  private final double prefillTokensPerSecond;
  private final double decodeStepMs;
  private final double decodeStepGrowth;

  CostModel(double prefillTokensPerSecond, double decodeStepMs, double decodeStepGrowth) {
    this.prefillTokensPerSecond = prefillTokensPerSecond;
    this.decodeStepMs = decodeStepMs;
    this.decodeStepGrowth = decodeStepGrowth;
  }

  static CostModel of(SimulatorConfig config) {
    return new CostModel(
        config.prefillTokensPerSecond(), config.decodeStepMs(), config.decodeStepGrowth());
  }

  /** Time to process {@code promptTokens} before the first output token. */
  long prefillNanos(int promptTokens) {
    return Math.round(promptTokens / prefillTokensPerSecond * 1e9);
  }

  /**
   * One decode step while {@code running} sequences share the batch: {@code decodeStepMs * (1 +
   * growth * (running - 1))}. A positive {@code overrideMs} (the {@code x-sim-decode-step-ms}
   * header) replaces the whole step, batch growth included, so a test can predict it.
   */
  long decodeStepNanos(int running, double overrideMs) {
    if (overrideMs >= 0) {
      return Math.round(overrideMs * 1e6);
    }
    int batch = Math.max(1, running);
    return Math.round(decodeStepMs * (1 + decodeStepGrowth * (batch - 1)) * 1e6);
  }

  /**
   * Milliseconds to hand to a millisecond timer so that it fires no earlier than {@code dueNanos};
   * 0 means "due now".
   */
  static long timerDelayMs(long nowNanos, long dueNanos) {
    long remaining = dueNanos - nowNanos;
    if (remaining <= 0) {
      return 0;
    }
    return (remaining + 999_999) / 1_000_000;
  }
}
