package io.phasemeter.load.workload;

import java.math.BigDecimal;
import java.time.Duration;

/**
 * The multi-turn load shape ({@code --sessions N --turns T --think-time D}, docs/design.md §7
 * "Sessions"): N conversations at once, each sending T turns one after the other, turn k + 1
 * intended to start the think time after turn k's last byte.
 *
 * @param count sessions at once ({@code --sessions})
 * @param turns turns per session ({@code --turns}, {@value #DEFAULT_TURNS} when not given, at most
 *     {@value #MAX_TURNS})
 * @param thinkTime between a turn's last byte and the next turn's intended start ({@code
 *     --think-time}, zero when not given)
 * @param maxTokens a completions session ends, not failed, before a turn whose prompt plus {@code
 *     max_tokens} would pass this many tokens ({@code --session-max-tokens}, {@value
 *     #DEFAULT_MAX_TOKENS} when not given)
 */
public record SessionSpec(int count, int turns, Duration thinkTime, int maxTokens) {
  /** {@code --turns} when not given. */
  public static final int DEFAULT_TURNS = 3;

  /** The most turns a session may have: each turn's state is kept for the session's life. */
  public static final int MAX_TURNS = 10_000;

  /** {@code --session-max-tokens} when not given: a 32k context. */
  public static final int DEFAULT_MAX_TOKENS = 32_768;

  public SessionSpec {
    if (count < 1) {
      throw new IllegalArgumentException("--sessions must be at least 1, got " + count);
    }
    if (turns < 1 || turns > MAX_TURNS) {
      throw new IllegalArgumentException(
          "--turns must be between 1 and " + MAX_TURNS + ", got " + turns);
    }
    thinkTime = thinkTime == null ? Duration.ZERO : thinkTime;
    if (thinkTime.isNegative()) {
      throw new IllegalArgumentException("--think-time must not be negative, got " + thinkTime);
    }
    if (maxTokens < 1) {
      throw new IllegalArgumentException(
          "--session-max-tokens must be at least 1, got " + maxTokens);
    }
  }

  /** The think time in seconds, as the conditions give it. */
  public double thinkTimeSeconds() {
    return thinkTime.toNanos() / 1e9;
  }

  /** The shape in words: {@code sessions: 4 × 3 turns, think 0.5 s}. */
  public String describe() {
    String think =
        BigDecimal.valueOf(thinkTime.toNanos())
            .movePointLeft(9)
            .stripTrailingZeros()
            .toPlainString();
    return "sessions: " + count + " × " + turns + " turns, think " + think + " s";
  }
}
