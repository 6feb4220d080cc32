package io.phasemeter.sim;

import java.util.SplittableRandom;

/**
 * What one request will generate, decided up front from the seed and the request: the number of
 * completion tokens, the finish reason and the text of each token.
 *
 * <p>With {@code ignore_eos} the plan is exactly {@code maxTokens} tokens ending in {@code length}.
 * Otherwise an EOS position {@code e} is drawn uniformly from {@code [max(minTokens, 1),
 * maxTokens]}: if {@code e == maxTokens} the plan is {@code maxTokens} content tokens ending in
 * {@code length}; else it is {@code e} content tokens followed by the EOS token, which (as in vLLM)
 * is counted in {@code completion_tokens} and streamed as an empty-content chunk carrying {@code
 * finish_reason: "stop"}.
 */
record TokenPlan(long textSeed, int contentTokens, int completionTokens, String finishReason) {

  private static final String[] WORDS = {
    "the", "model", "token", "latency", "batch", "queue", "slot", "phase", "stream", "request",
    "answer", "signal", "prefill", "decode", "cache", "budget", "of", "and", "to", "in", "is", "a",
    "fast", "slow", "quiet", "bright", "river", "stone", "cloud", "north", "measure", "trace",
    "owner", "gateway", "network", "server", "client", "window", "time", "first", "last", "every",
    "small", "large", "clear", "steady", "early", "late", "green", "amber"
  };

  static TokenPlan create(
      long seed, long requestHash, int maxTokens, int minTokens, boolean ignoreEos) {
    long textSeed = mix(seed ^ mix(requestHash));
    if (ignoreEos) {
      return new TokenPlan(textSeed, maxTokens, maxTokens, "length");
    }
    int low = Math.min(Math.max(minTokens, 1), maxTokens);
    SplittableRandom rng = new SplittableRandom(textSeed ^ 0x5DEECE66DL);
    int eos = low + rng.nextInt(maxTokens - low + 1);
    if (eos >= maxTokens) {
      return new TokenPlan(textSeed, maxTokens, maxTokens, "length");
    }
    return new TokenPlan(textSeed, eos, eos + 1, "stop");
  }

  /** A pooling request's plan: one engine step (the prefill), no text, finishing {@code stop}. */
  static TokenPlan pooling() {
    return new TokenPlan(0, 0, 1, "stop");
  }

  /** Text of completion token {@code index}; the EOS token (if any) has empty text. */
  String text(int index) {
    if (index >= contentTokens) {
      return "";
    }
    String word = WORDS[(int) Long.remainderUnsigned(mix(textSeed + index), WORDS.length)];
    return index == 0 ? word : " " + word;
  }

  /** A vocabulary word for a token id the tokenizer did not make: {@code " " + word}. */
  static String word(long id) {
    return " " + WORDS[(int) Long.remainderUnsigned(id, WORDS.length)];
  }

  /** The whole completion text. */
  String fullText() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < contentTokens; i++) {
      sb.append(text(i));
    }
    return sb.toString();
  }

  /** SplitMix64's finaliser: a cheap, well-mixed 64-bit hash. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
