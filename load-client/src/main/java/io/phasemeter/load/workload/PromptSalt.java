package io.phasemeter.load.workload;

import java.security.SecureRandom;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * A run's prompt salt ({@code --prompt-salt}, docs/design.md §7 "Prompt salt"): a 64-bit value
 * mixed into every stream of token ids the client draws (the synthetic prompts and inputs, shared
 * prefixes, a replayed trace's blocks, sessions' turns) and into the free text of chat and
 * responses, so that two runs with the same seed send prompts that share nothing, and a server's
 * prefix cache does not serve the second run's prefills from the first's. Within a run sharing is
 * unchanged: whatever one run shares (a block, a prefix, a session's history) it shares under the
 * one salt. The lengths, the shape picks, the arrivals and a dataset's text are never salted.
 *
 * <p>{@link #NONE} (0) salts nothing: the prompts are exactly those of the seed alone, built with
 * the same draws as before salts existed. A salt {@linkplain #fresh() drawn} for the run (the
 * default) says so, so that a capacity search draws another for each probe; one the user gave is
 * kept. Immutable.
 *
 * @param value the salt; 0 for none
 * @param drawn whether it was drawn for the run rather than given
 */
public record PromptSalt(long value, boolean drawn) {
  /** No salt: the prompts of the seed alone. */
  public static final PromptSalt NONE = new PromptSalt(0, false);

  private static final SecureRandom RANDOM = new SecureRandom();

  /** A salt given by the user ({@code --prompt-salt}): kept for every run that takes the flags. */
  public static PromptSalt of(long value) {
    return value == 0 ? NONE : new PromptSalt(value, false);
  }

  /** A fresh random salt, never 0: the default of a run. */
  public static PromptSalt fresh() {
    long v;
    do {
      v = RANDOM.nextLong();
    } while (v == 0);
    return new PromptSalt(v, true);
  }

  /**
   * {@code --prompt-salt}'s value: {@code none} or {@code 0} for no salt, else up to 16 hex digits
   * (an optional {@code 0x}), as {@link #hex()} writes it in the conditions.
   */
  public static PromptSalt parse(String flag, String text) {
    String t = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
    if (t.equals("none")) {
      return NONE;
    }
    String digits = t.startsWith("0x") ? t.substring(2) : t;
    if (!digits.matches("[0-9a-f]{1,16}")) {
      throw new IllegalArgumentException(
          flag
              + " must be up to 16 hex digits (as the conditions' prompt_salt records it), or none"
              + " (0) for no salt, got '"
              + text
              + "'");
    }
    return of(Long.parseUnsignedLong(digits, 16));
  }

  /** Whether this salts nothing. */
  public boolean none() {
    return value == 0;
  }

  /**
   * The conditions' {@code prompt_salt}: 16 hex digits, or {@code none}; {@link #parse} reads it
   * back.
   */
  public String hex() {
    return none() ? "none" : String.format(Locale.ROOT, "%016x", value);
  }

  /**
   * The seed of a stream of token ids whose unsalted seed is {@code key} (a block's, a prefix's, a
   * turn's): {@code key} itself without a salt. Equal keys stay equal under one salt, so what a run
   * shares it still shares.
   */
  public long key(long key) {
    return none() ? key : Workload.mix64(key ^ Workload.mix64(value));
  }

  /**
   * The generator of a request's token ids, once its picks (shape, prefix) were drawn from {@code
   * picks}: {@code picks} itself without a salt (the draws of before salts), else a generator of
   * its own, seeded from {@code picks}' next value and the salt. The picks never see the salt.
   */
  public SplittableRandom ids(SplittableRandom picks) {
    return none() ? picks : new SplittableRandom(key(picks.nextLong()));
  }

  /**
   * Free text's mark of the salt (chat, responses): empty without one, else {@code " (run HEX)"},
   * which the text puts after its request number, so that the prompts of two runs part there and
   * those of one run part no later than without it.
   */
  public String text() {
    return none() ? "" : " (run " + hex() + ")";
  }

  @Override
  public String toString() {
    return hex() + (drawn ? " (drawn)" : "");
  }
}
