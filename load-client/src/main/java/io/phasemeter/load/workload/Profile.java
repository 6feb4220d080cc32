package io.phasemeter.load.workload;

import java.util.List;
import java.util.Locale;

/**
 * A request shape: exact input and output token counts.
 *
 * @param name the profile's name ({@code single-1k}, …) or the bucket of a custom shape
 * @param inputTokens prompt tokens sent
 * @param outputTokens completion tokens asked for (and forced with {@code min_tokens}, {@code
 *     ignore_eos})
 */
public record Profile(String name, int inputTokens, int outputTokens) {
  /** 1,024 tokens in, 512 out. */
  public static final Profile SINGLE_1K = new Profile("single-1k", 1024, 512);

  /** 8,192 tokens in, 512 out. */
  public static final Profile SINGLE_8K = new Profile("single-8k", 8192, 512);

  /** 32,768 tokens in, 512 out. */
  public static final Profile SINGLE_32K = new Profile("single-32k", 32768, 512);

  /** Document question answering: 4,096 tokens in, 300 out. */
  public static final Profile DOC_QA = new Profile("doc-qa", 4096, 300);

  private static final List<Profile> NAMED = List.of(SINGLE_1K, SINGLE_8K, SINGLE_32K, DOC_QA);

  public Profile {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("profile name must not be empty");
    }
    if (inputTokens < 1) {
      throw new IllegalArgumentException("--input-tokens must be at least 1, got " + inputTokens);
    }
    if (outputTokens < 1) {
      throw new IllegalArgumentException("--output-tokens must be at least 1, got " + outputTokens);
    }
  }

  /**
   * A named profile.
   *
   * @throws IllegalArgumentException listing the known names
   */
  public static Profile named(String name) {
    String n = name == null ? "" : name.trim().toLowerCase(Locale.ROOT);
    for (Profile p : NAMED) {
      if (p.name.equals(n)) {
        return p;
      }
    }
    throw new IllegalArgumentException(
        "--profile must be one of "
            + String.join(", ", names())
            + " (or give --input-tokens and --output-tokens), got '"
            + name
            + "'");
  }

  /** A custom shape, named by its bucket tag (e.g. {@code 4k-300}). */
  public static Profile custom(int inputTokens, int outputTokens) {
    return new Profile(bucketOf(inputTokens, outputTokens), inputTokens, outputTokens);
  }

  /** The names {@link #named} accepts. */
  public static List<String> names() {
    return NAMED.stream().map(Profile::name).toList();
  }

  /**
   * The low-cardinality tag of a shape: input in {@code k} when it is a whole multiple of 1,024,
   * then the output, e.g. {@code 1k-512}, {@code 1000-64}.
   */
  public static String bucketOf(int inputTokens, int outputTokens) {
    return Mix.tokens(inputTokens) + "-" + Mix.tokens(outputTokens);
  }
}
