package io.phasemeter.proxy.upstream;

import io.phasemeter.proxy.upstream.JsonCursor.MalformedJson;
import io.vertx.core.buffer.Buffer;

/**
 * What one {@code data} payload of an OpenAI-compatible stream ({@code chat.completion.chunk} or
 * {@code text_completion}, as vLLM sends them) carries: generated content, a finish reason, token
 * usage, or the {@code [DONE]} sentinel.
 *
 * <p>Scans the payload's UTF-8 bytes, building no String and no tree, and reads only the fields it
 * needs, with a tokenizer as strict as Jackson's defaults ({@link JsonCursor}). It allocates
 * nothing for the chunks of a stream: their results are shared instances, and a finish reason of
 * the usual few is a constant. A chunk with usage numbers, or an unusual finish reason, gets a
 * result of its own. Never throws on bad input: a payload that is not one complete JSON object is
 * {@link Kind#MALFORMED}.
 */
public final class StreamChunk {

  /** The class of a chunk, by what it carries; the first that applies wins. */
  public enum Kind {
    /**
     * At least one choice carries generated output: a non-empty {@code delta.content}, {@code
     * delta.reasoning_content} or {@code delta.reasoning}, a non-empty {@code delta.tool_calls}, or
     * (completions) a non-empty {@code text}; whatever else the chunk also carries.
     */
    CONTENT,
    /** A choice has a {@code delta.role} and nothing is generated: the opening chat chunk. */
    ROLE_ONLY,
    /** No content, but a choice has a non-null {@code finish_reason}. */
    FINISH_ONLY,
    /** A {@code usage} object and no choices ({@code "choices": []} or none at all). */
    USAGE_ONLY,
    /** The {@code [DONE]} sentinel that ends the stream. */
    DONE,
    /** A JSON object with none of the above (for example an empty delta). */
    EMPTY,
    /**
     * A top-level {@code error} that is not null: vLLM's stream generator sends {@code data:
     * {"error": {...}}} (then {@code [DONE]}) when generation fails mid-stream. Wins over every
     * other kind: whatever else the chunk carries, the request failed.
     */
    ERROR,
    /** Not a single complete JSON object: truncated, not JSON, or another JSON value. */
    MALFORMED
  }

  private static final StreamChunk DONE = new StreamChunk(Kind.DONE);
  private static final StreamChunk MALFORMED = new StreamChunk(Kind.MALFORMED);
  private static final StreamChunk NO_DATA = new StreamChunk(Kind.EMPTY);

  /** The finish reasons OpenAI and vLLM send; these come back as these very Strings. */
  private static final String[] FINISH_REASONS = {
    "stop", "length", "tool_calls", "content_filter", "function_call", "abort", "error"
  };

  // The results without usage: by kind, finish reason (0 none, k + 1 FINISH_REASONS[k]) and
  // choicesEmpty. Built for every combination, though some (ROLE_ONLY with a reason) never occur.
  private static final StreamChunk[] SHARED = new StreamChunk[sharedIndex(Kind.MALFORMED, 0, 0)];

  static {
    for (Kind kind : Kind.values()) {
      if (kind == Kind.MALFORMED) {
        continue;
      }
      for (int reason = 0; reason <= FINISH_REASONS.length; reason++) {
        for (int empty = 0; empty <= 1; empty++) {
          SHARED[sharedIndex(kind, reason, empty)] =
              new StreamChunk(
                  kind,
                  kind == Kind.CONTENT,
                  reason == 0 ? null : FINISH_REASONS[reason - 1],
                  -1,
                  -1,
                  false,
                  empty == 1);
        }
      }
    }
  }

  // The scan's state, reused: inspect is called for every relayed event, on event-loop threads,
  // and never re-entered.
  private static final ThreadLocal<Scan> SCANS = ThreadLocal.withInitial(Scan::new);

  private final Kind kind;
  private final boolean hasContent;
  private final String finishReason;
  private final long promptTokens;
  private final long completionTokens;
  private final boolean hasUsage;
  private final boolean choicesEmpty;
  private final String errorType;

  private StreamChunk(Kind kind) {
    this(kind, false, null, -1, -1, false, false);
  }

  private StreamChunk(
      Kind kind,
      boolean hasContent,
      String finishReason,
      long promptTokens,
      long completionTokens,
      boolean hasUsage,
      boolean choicesEmpty) {
    this(
        kind,
        hasContent,
        finishReason,
        promptTokens,
        completionTokens,
        hasUsage,
        choicesEmpty,
        null);
  }

  private StreamChunk(
      Kind kind,
      boolean hasContent,
      String finishReason,
      long promptTokens,
      long completionTokens,
      boolean hasUsage,
      boolean choicesEmpty,
      String errorType) {
    this.kind = kind;
    this.errorType = errorType;
    this.hasContent = hasContent;
    this.finishReason = finishReason;
    this.promptTokens = promptTokens;
    this.completionTokens = completionTokens;
    this.hasUsage = hasUsage;
    this.choicesEmpty = choicesEmpty;
  }

  /**
   * Classifies the {@code data} payload of one event; an event without data is {@link Kind#EMPTY}.
   */
  public static StreamChunk inspect(SseEvent event) {
    Buffer data = event.dataBuffer();
    return data == null ? NO_DATA : inspect(data, event.dataStart(), event.dataEnd());
  }

  /** Classifies one whole payload, such as the body of a response that was not streamed. */
  public static StreamChunk inspect(Buffer payload) {
    return inspect(payload, 0, payload.length());
  }

  private static StreamChunk inspect(Buffer in, int from, int to) {
    if (isDone(in, from, to)) {
      return DONE;
    }
    Scan scan = SCANS.get();
    try {
      return scan.chunk(in, from, to);
    } catch (MalformedJson e) {
      return MALFORMED;
    } finally {
      scan.json.release();
    }
  }

  /** {@code [DONE]}, give or take leading and trailing bytes up to space (String.trim()'s). */
  static boolean isDone(Buffer in, int from, int to) {
    while (from < to && (in.getByte(from) & 0xff) <= ' ') {
      from++;
    }
    while (to > from && (in.getByte(to - 1) & 0xff) <= ' ') {
      to--;
    }
    if (to - from != 6) {
      return false;
    }
    for (int k = 0; k < 6; k++) {
      if (in.getByte(from + k) != "[DONE]".charAt(k)) {
        return false;
      }
    }
    return true;
  }

  private static int sharedIndex(Kind kind, int reason, int choicesEmpty) {
    return (kind.ordinal() * (FINISH_REASONS.length + 1) + reason) * 2 + choicesEmpty;
  }

  /** The class of this chunk. */
  public Kind kind() {
    return kind;
  }

  /** Whether at least one choice carries generated output (see {@link Kind#CONTENT}). */
  public boolean hasContent() {
    return hasContent;
  }

  /** The first non-null {@code choices[].finish_reason}, or {@code null}. */
  public String finishReason() {
    return finishReason;
  }

  /** {@code usage.prompt_tokens}, or -1 if there is no usage object or no such integer in it. */
  public long promptTokens() {
    return promptTokens;
  }

  /**
   * {@code usage.completion_tokens}, or -1 if there is no usage object or no such integer in it.
   */
  public long completionTokens() {
    return completionTokens;
  }

  /** Whether the chunk has a {@code usage} object (not {@code null}). */
  public boolean hasUsage() {
    return hasUsage;
  }

  /** Whether the chunk has {@code "choices": []}, present and empty. */
  public boolean choicesEmpty() {
    return choicesEmpty;
  }

  /**
   * For {@link Kind#ERROR}: the error's {@code type} when it is one of vLLM's or OpenAI's ({@code
   * BadRequestError}, {@code InternalServerError}, {@code server_error}, …), {@code other} for any
   * other, {@code unknown} when there is none (the type reaches spans, never free text). Null for
   * other kinds.
   */
  public String errorType() {
    return errorType;
  }

  @Override
  public String toString() {
    return "StreamChunk{"
        + kind
        + (hasContent ? ", content" : "")
        + (finishReason != null ? ", finish_reason=" + finishReason : "")
        + (hasUsage ? ", usage=" + promptTokens + "/" + completionTokens : "")
        + (choicesEmpty ? ", choices=[]" : "")
        + (errorType != null ? ", error=" + errorType : "")
        + "}";
  }

  /**
   * The error types kept as they came: vLLM's exception names and OpenAI's types. Anything else
   * becomes {@code other}: the type reaches spans, and an upstream must not be able to put free
   * text (a prompt, a key) there.
   */
  private static final java.util.Set<String> KNOWN_ERROR_TYPES =
      java.util.Set.of(
          "BadRequestError",
          "NotFoundError",
          "InternalServerError",
          "ServiceUnavailableError",
          "NotImplementedError",
          "UnprocessableEntityError",
          "TimeoutError",
          "RateLimitError",
          "invalid_request_error",
          "not_found_error",
          "server_error",
          "api_error",
          "rate_limit_error",
          "overloaded_error",
          "timeout_error",
          // The Responses API's error codes (response.failed, error events).
          "rate_limit_exceeded",
          "invalid_prompt",
          "invalid_request",
          "context_length_exceeded",
          "internal_error",
          "vector_store_timeout");

  /** {@code type} if it is a known error type, {@code unknown} when missing, else {@code other}. */
  static String safeErrorType(String type) {
    if (type == null || type.isEmpty()) {
      return "unknown";
    }
    return KNOWN_ERROR_TYPES.contains(type) ? type : "other";
  }

  /**
   * One pass over one payload; reads only the fields it needs and skips the rest. Follows the
   * Jackson-based scan it replaced call for call, so that duplicate and misplaced fields count as
   * they did.
   */
  private static final class Scan {
    final JsonCursor json = new JsonCursor();
    private boolean content;
    private boolean role;
    // 0 none; k + 1: FINISH_REASONS[k]; -1: another, in finishReason.
    private int reason;
    private String finishReason;
    private boolean usage;
    private long promptTokens;
    private long completionTokens;
    private boolean choicesPresent;
    private int choices;
    private boolean error;
    private String errorType;

    StreamChunk chunk(Buffer in, int from, int to) throws MalformedJson {
      json.reset(in, from, to);
      content = false;
      role = false;
      reason = 0;
      finishReason = null;
      usage = false;
      promptTokens = -1;
      completionTokens = -1;
      choicesPresent = false;
      choices = 0;
      error = false;
      errorType = null;
      if (json.next() != JsonCursor.START_OBJECT) {
        return MALFORMED;
      }
      int token;
      while ((token = json.next()) == JsonCursor.FIELD_NAME) {
        boolean isChoices = json.nameIs("choices");
        boolean isUsage = !isChoices && json.nameIs("usage");
        boolean isError = !isChoices && !isUsage && json.nameIs("error");
        int value = json.next();
        if (isChoices) {
          choices(value);
        } else if (isUsage) {
          usage(value);
        } else if (isError) {
          error(value);
        } else {
          json.skipChildren();
        }
      }
      if (token != JsonCursor.END_OBJECT || json.next() != JsonCursor.END) {
        return MALFORMED;
      }
      boolean noChoices = choices == 0;
      boolean choicesEmpty = choicesPresent && noChoices;
      if (error) {
        return new StreamChunk(
            Kind.ERROR,
            content,
            reason > 0 ? FINISH_REASONS[reason - 1] : finishReason,
            promptTokens,
            completionTokens,
            usage,
            choicesEmpty,
            safeErrorType(errorType));
      }
      Kind kind;
      if (content) {
        kind = Kind.CONTENT;
      } else if (reason != 0) {
        kind = Kind.FINISH_ONLY;
      } else if (role) {
        kind = Kind.ROLE_ONLY;
      } else if (usage && noChoices) {
        kind = Kind.USAGE_ONLY;
      } else {
        kind = Kind.EMPTY;
      }
      if (!usage && reason >= 0) {
        return SHARED[sharedIndex(kind, reason, choicesEmpty ? 1 : 0)];
      }
      return new StreamChunk(
          kind,
          content,
          reason > 0 ? FINISH_REASONS[reason - 1] : finishReason,
          promptTokens,
          completionTokens,
          usage,
          choicesEmpty);
    }

    private void choices(int value) throws MalformedJson {
      if (value != JsonCursor.START_ARRAY) {
        json.skipChildren();
        return;
      }
      choicesPresent = true;
      int token;
      while ((token = json.next()) != JsonCursor.END_ARRAY) {
        choices++;
        if (token == JsonCursor.START_OBJECT) {
          choice();
        } else {
          json.skipChildren();
        }
      }
    }

    private void choice() throws MalformedJson {
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("delta")) {
          delta(json.next());
        } else if (json.nameIs("text")) {
          content |= nonEmptyString(json.next());
        } else if (json.nameIs("finish_reason")) {
          if (json.next() == JsonCursor.STRING && reason == 0) {
            finishReason();
          } else {
            json.skipChildren();
          }
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    private void finishReason() throws MalformedJson {
      for (int k = 0; k < FINISH_REASONS.length; k++) {
        if (json.textIs(FINISH_REASONS[k])) {
          reason = k + 1;
          return;
        }
      }
      String text = json.readText();
      for (int k = 0; k < FINISH_REASONS.length; k++) {
        if (text.equals(FINISH_REASONS[k])) {
          reason = k + 1;
          return;
        }
      }
      reason = -1;
      finishReason = text;
    }

    private void delta(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("content")
            || json.nameIs("reasoning_content")
            || json.nameIs("reasoning")) {
          content |= nonEmptyString(json.next());
        } else if (json.nameIs("tool_calls")) {
          content |= nonEmptyArray(json.next());
        } else if (json.nameIs("role")) {
          role |= json.next() == JsonCursor.STRING;
          json.skipChildren();
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    /** A top-level {@code error}: any value but null; its {@code type} when it is an object. */
    private void error(int value) throws MalformedJson {
      if (value == JsonCursor.NULL) {
        return;
      }
      error = true;
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("type") && errorType == null) {
          if (json.next() == JsonCursor.STRING) {
            errorType = json.readText();
          } else {
            json.skipChildren();
          }
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    private void usage(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      usage = true;
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("prompt_tokens")) {
          promptTokens = json.count(json.next());
        } else if (json.nameIs("completion_tokens")) {
          completionTokens = json.count(json.next());
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    private boolean nonEmptyString(int value) throws MalformedJson {
      if (value == JsonCursor.STRING) {
        return !json.textEmpty();
      }
      json.skipChildren();
      return false;
    }

    private boolean nonEmptyArray(int value) throws MalformedJson {
      if (value != JsonCursor.START_ARRAY) {
        json.skipChildren();
        return false;
      }
      boolean any = false;
      while (json.next() != JsonCursor.END_ARRAY) {
        any = true;
        json.skipChildren();
      }
      return any;
    }
  }
}
