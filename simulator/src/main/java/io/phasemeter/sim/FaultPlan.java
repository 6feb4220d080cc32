package io.phasemeter.sim;

import io.vertx.core.MultiMap;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * The fault, if any, injected into one request: asked for by the {@code x-sim-fault} header or
 * drawn from the configured rates.
 */
record FaultPlan(Kind kind, int afterTokens, long stallMs) {
  static final String FAULT = "x-sim-fault";
  static final String AFTER_TOKENS = "x-sim-fault-after-tokens";
  static final String STALL_MS = "x-sim-stall-ms";
  static final String TTFT_MS = "x-sim-ttft-ms";
  static final String DECODE_STEP_MS = "x-sim-decode-step-ms";
  static final String REASONING_TOKENS = "x-sim-reasoning-tokens";

  enum Kind {
    NONE,
    /**
     * The engine fails: a 500 before any byte; on a Responses stream, a {@code response.failed}
     * event after {@code x-sim-fault-after-tokens} deltas.
     */
    ERROR,
    /**
     * The engine fails after {@code x-sim-fault-after-tokens} tokens and says so in-band: vLLM's
     * {@code data: {"error": …}} then {@code [DONE]} on a chat or completion stream, a bare {@code
     * error} event on a Responses stream, a 500 for a whole response.
     */
    ERROR_EVENT,
    RESET,
    STALL,
    DISCONNECT,
    MALFORMED
  }

  /** The header values, in the order the help lists them. */
  static final String NAMES = "error, error_event, reset, stall, disconnect, malformed";

  static final FaultPlan NONE = new FaultPlan(Kind.NONE, 0, -1);

  /**
   * Reads the fault headers; without {@code x-sim-fault} one uniform draw from {@code rng} picks a
   * fault by the configured rates (the draw happens for every request so that the sequence of
   * faults depends only on the seed and the arrival order).
   */
  static FaultPlan choose(MultiMap headers, SimulatorConfig config, SplittableRandom rng) {
    double draw = rng.nextDouble();
    String fault = headers.get(FAULT);
    if (fault == null || fault.isBlank()) {
      if (draw < config.errorRate()) {
        return new FaultPlan(Kind.ERROR, 0, -1);
      }
      draw -= config.errorRate();
      if (draw < config.stallRate()) {
        return new FaultPlan(Kind.STALL, 1, config.stallMs());
      }
      draw -= config.stallRate();
      if (draw < config.disconnectRate()) {
        return new FaultPlan(Kind.DISCONNECT, 1, -1);
      }
      return NONE;
    }
    Kind kind;
    try {
      kind = Kind.valueOf(fault.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      kind = Kind.NONE;
    }
    if (kind == Kind.NONE && !fault.trim().equalsIgnoreCase("none")) {
      throw ApiError.badRequest(FAULT + " must be one of " + NAMES + "; got " + fault, null);
    }
    int after = (int) headerLong(headers, AFTER_TOKENS, 1, 1);
    long stall = headerLong(headers, STALL_MS, -1, 0);
    return new FaultPlan(kind, after, stall);
  }

  /** The {@code x-sim-ttft-ms} hold in nanoseconds, 0 when absent. */
  static long holdNanos(MultiMap headers) {
    return Math.round(headerDouble(headers, TTFT_MS, 0) * 1e6);
  }

  /**
   * {@code x-sim-reasoning-tokens}: how many of the first generated tokens a Responses request
   * streams as reasoning; 0 when absent.
   */
  static int reasoningTokens(MultiMap headers) {
    return (int) Math.min(Integer.MAX_VALUE, headerLong(headers, REASONING_TOKENS, 0, 0));
  }

  /** The {@code x-sim-decode-step-ms} override, negative when absent. */
  static double decodeStepOverrideMs(MultiMap headers) {
    return headerDouble(headers, DECODE_STEP_MS, -1);
  }

  private static long headerLong(MultiMap headers, String name, long absent, long min) {
    String value = headers.get(name);
    if (value == null || value.isBlank()) {
      return absent;
    }
    try {
      long v = Long.parseLong(value.trim());
      if (v >= min) {
        return v;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw ApiError.badRequest(
        name + " must be an integer of at least " + min + ", got " + value, null);
  }

  private static double headerDouble(MultiMap headers, String name, double absent) {
    String value = headers.get(name);
    if (value == null || value.isBlank()) {
      return absent;
    }
    try {
      double v = Double.parseDouble(value.trim());
      if (v >= 0 && Double.isFinite(v)) {
        return v;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw ApiError.badRequest(name + " must be a number of at least 0, got " + value, null);
  }
}
