package io.phasemeter.load.workload.dataset;

/**
 * Why a ShareGPT entry was not used, as the conditions' {@code dataset_skipped} name it. An entry
 * is counted under the first reason that applies, in this order; the length filters are vLLM's
 * ({@code vllm bench serve --dataset-name sharegpt}), on lengths estimated as {@code ceil(chars /
 * 4)}.
 */
enum Skip {
  /** Not an object, no {@code conversations} array, or a turn before the pair that is not one. */
  MALFORMED("malformed_entry"),
  /** No human turn answered by a gpt turn (the next one). */
  NO_PAIR("no_human_gpt_pair"),
  /** The prompt or the completion is longer than 1 MiB in the file ({@link Limits}). */
  VALUE_TOO_LONG("value_over_1_mib"),
  /** Prompt under 4 tokens. */
  PROMPT_SHORT("prompt_under_4_tokens"),
  /** Completion under 4 tokens (not applied when {@code --output-tokens} gives the length). */
  OUTPUT_SHORT("output_under_4_tokens"),
  /** Prompt over 1,024 tokens. */
  PROMPT_LONG("prompt_over_1024_tokens"),
  /** Prompt and output over 2,048 tokens together. */
  TOTAL_LONG("total_over_2048_tokens");

  /** vLLM's bounds ({@code is_valid_sequence}). */
  static final int MIN_TOKENS = 4;

  static final int MAX_PROMPT_TOKENS = 1024;
  static final int MAX_TOTAL_TOKENS = 2048;

  private final String key;

  Skip(String key) {
    this.key = key;
  }

  /** The name in the conditions. */
  String key() {
    return key;
  }

  /**
   * The length filter an entry fails first, or null when it passes.
   *
   * @param outputGiven whether {@code --output-tokens} gave the output length (then a short
   *     completion in the file does not matter, as in vLLM with {@code --sharegpt-output-len})
   */
  static Skip lengths(int promptTokens, int outputTokens, boolean outputGiven) {
    if (promptTokens < MIN_TOKENS) {
      return PROMPT_SHORT;
    }
    if (!outputGiven && outputTokens < MIN_TOKENS) {
      return OUTPUT_SHORT;
    }
    if (promptTokens > MAX_PROMPT_TOKENS) {
      return PROMPT_LONG;
    }
    if ((long) promptTokens + outputTokens > MAX_TOTAL_TOKENS) {
      return TOTAL_LONG;
    }
    return null;
  }
}
