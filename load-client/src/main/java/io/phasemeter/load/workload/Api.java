package io.phasemeter.load.workload;

import io.phasemeter.core.Phases;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The OpenAI-compatible API a run speaks ({@code --api}, plan key {@code api}): where requests go,
 * how the answer is read, and which figures exist for it.
 *
 * <p>Embeddings generate no tokens: no first token, no time per token, no gaps between tokens.
 * Those figures are not applicable to them ({@link #notApplicable()}): reports leave them out or
 * write null, and budgets on them are neither held nor breached.
 */
public enum Api {
  /** {@code /v1/chat/completions}: free-text messages. */
  CHAT("chat", "/v1/chat/completions", "chat", true),
  /** {@code /v1/completions}: token-id prompts of exact length (the default). */
  COMPLETIONS("completions", "/v1/completions", "text_completion", true),
  /** {@code /v1/responses}: free-text input; the stream is typed events without {@code [DONE]}. */
  RESPONSES("responses", "/v1/responses", "responses", true),
  /** {@code /v1/embeddings}: token-id input of exact length; never streamed, no output tokens. */
  EMBEDDINGS("embeddings", "/v1/embeddings", "embeddings", false);

  /** The figures that need generated tokens: not applicable to an API that generates none. */
  private static final List<String> TOKEN_FIGURES =
      List.of(
          Phases.CLIENT_TTFT.key(),
          Phases.TTFT_ENVELOPE.key(),
          Phases.SERVER_TTFT.key(),
          Phases.TPOT.key(),
          Phases.ITL.key());

  private final String key;
  private final String path;
  private final String operation;
  private final boolean generates;

  Api(String key, String path, String operation, boolean generates) {
    this.key = key;
    this.path = path;
    this.operation = operation;
    this.generates = generates;
  }

  /** The name {@code --api} and the plan take: {@code chat}, {@code completions}, … */
  public String key() {
    return key;
  }

  /** The request path, e.g. {@code /v1/responses}. */
  public String path() {
    return path;
  }

  /**
   * The proxy record's {@code operation} for this API ({@code gen_ai.operation.name}): {@code
   * chat}, {@code text_completion}, {@code responses}, {@code embeddings}.
   */
  public String operation() {
    return operation;
  }

  /** Whether the API generates tokens (and so may stream, and has TTFT, TPOT and ITL). */
  public boolean generates() {
    return generates;
  }

  /**
   * The phase keys (canonical, as {@code PhaseStats} names them) that do not exist for this API, in
   * report order; empty for the APIs that generate tokens.
   */
  public List<String> notApplicable() {
    return generates ? List.of() : TOKEN_FIGURES;
  }

  /** Why {@link #notApplicable()} figures are missing, in words for reports. */
  public String notApplicableReason() {
    return generates ? null : key + " generate no tokens: there is no first token, TPOT or ITL";
  }

  /**
   * The API named {@code value}.
   *
   * @param where what to name in the error: {@code --api}, or a plan's file and key
   * @throws IllegalArgumentException naming {@code where}, the value and the known names
   */
  public static Api parse(String where, String value) {
    String v = value == null ? "" : value.trim().toLowerCase(Locale.ROOT);
    for (Api a : values()) {
      if (a.key.equals(v)) {
        return a;
      }
    }
    throw new IllegalArgumentException(
        where + " must be one of " + String.join(", ", keys()) + ", got '" + value + "'");
  }

  /** Every name {@link #parse} accepts. */
  public static List<String> keys() {
    return Arrays.stream(values()).map(Api::key).toList();
  }

  /**
   * The API a request path belongs to; the chat and completion formats for any other path (the
   * runner reads those alike).
   */
  public static Api ofPath(String path) {
    for (Api a : values()) {
      if (a.path.equals(path)) {
        return a;
      }
    }
    return COMPLETIONS;
  }
}
