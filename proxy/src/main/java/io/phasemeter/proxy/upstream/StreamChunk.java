package io.phasemeter.proxy.upstream;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;

/**
 * What one {@code data} payload of an OpenAI-compatible stream ({@code chat.completion.chunk} or
 * {@code text_completion}, as vLLM sends them) carries: generated content, a finish reason, token
 * usage, or the {@code [DONE]} sentinel.
 *
 * <p>Reads the JSON with a streaming parser and builds no tree. Never throws on bad input: a
 * payload that is not one complete JSON object is {@link Kind#MALFORMED}.
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
    /** A JSON object with none of the above (for example an error object, or an empty delta). */
    EMPTY,
    /** Not a single complete JSON object: truncated, not JSON, or another JSON value. */
    MALFORMED
  }

  // Thread-safe once built; parsers made from it are not, and each call makes its own.
  private static final JsonFactory JSON = JsonFactory.builder().build();

  private static final StreamChunk DONE = new StreamChunk(Kind.DONE);
  private static final StreamChunk MALFORMED = new StreamChunk(Kind.MALFORMED);
  private static final StreamChunk NO_DATA = new StreamChunk(Kind.EMPTY);

  private final Kind kind;
  private final boolean hasContent;
  private final String finishReason;
  private final long promptTokens;
  private final long completionTokens;
  private final boolean hasUsage;
  private final boolean choicesEmpty;

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
    this.kind = kind;
    this.hasContent = hasContent;
    this.finishReason = finishReason;
    this.promptTokens = promptTokens;
    this.completionTokens = completionTokens;
    this.hasUsage = hasUsage;
    this.choicesEmpty = choicesEmpty;
  }

  /**
   * Classifies the {@code data} of one event ({@link SseEvent#data()}); {@code null} (an event
   * without data) is {@link Kind#EMPTY}.
   */
  public static StreamChunk inspect(String data) {
    if (data == null) {
      return NO_DATA;
    }
    if (data.trim().equals("[DONE]")) {
      return DONE;
    }
    try (JsonParser parser = JSON.createParser(data)) {
      return new Scan(parser).chunk();
    } catch (IOException e) {
      // Jackson's parse, end-of-input, number-range and nesting-limit errors are all IOExceptions.
      return MALFORMED;
    }
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

  @Override
  public String toString() {
    return "StreamChunk{"
        + kind
        + (hasContent ? ", content" : "")
        + (finishReason != null ? ", finish_reason=" + finishReason : "")
        + (hasUsage ? ", usage=" + promptTokens + "/" + completionTokens : "")
        + (choicesEmpty ? ", choices=[]" : "")
        + "}";
  }

  /** One pass over one payload; reads only the fields it needs and skips the rest unparsed. */
  private static final class Scan {
    private final JsonParser parser;
    private boolean content;
    private boolean role;
    private String finishReason;
    private boolean usage;
    private long promptTokens = -1;
    private long completionTokens = -1;
    private boolean choicesPresent;
    private int choices;

    Scan(JsonParser parser) {
      this.parser = parser;
    }

    StreamChunk chunk() throws IOException {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return MALFORMED;
      }
      JsonToken token;
      while ((token = next()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken value = next();
        switch (name) {
          case "choices" -> choices(value);
          case "usage" -> usage(value);
          default -> parser.skipChildren();
        }
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
        return MALFORMED;
      }
      boolean noChoices = choices == 0;
      Kind kind;
      if (content) {
        kind = Kind.CONTENT;
      } else if (finishReason != null) {
        kind = Kind.FINISH_ONLY;
      } else if (role) {
        kind = Kind.ROLE_ONLY;
      } else if (usage && noChoices) {
        kind = Kind.USAGE_ONLY;
      } else {
        kind = Kind.EMPTY;
      }
      return new StreamChunk(
          kind,
          content,
          finishReason,
          promptTokens,
          completionTokens,
          usage,
          choicesPresent && noChoices);
    }

    private void choices(JsonToken value) throws IOException {
      if (value != JsonToken.START_ARRAY) {
        parser.skipChildren();
        return;
      }
      choicesPresent = true;
      JsonToken token;
      while ((token = next()) != JsonToken.END_ARRAY) {
        choices++;
        if (token == JsonToken.START_OBJECT) {
          choice();
        } else {
          parser.skipChildren();
        }
      }
    }

    private void choice() throws IOException {
      while (next() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken value = next();
        switch (name) {
          case "delta" -> delta(value);
          case "text" -> content |= nonEmptyString(value);
          case "finish_reason" -> {
            if (finishReason == null && value == JsonToken.VALUE_STRING) {
              finishReason = parser.getText();
            } else {
              parser.skipChildren();
            }
          }
          default -> parser.skipChildren();
        }
      }
    }

    private void delta(JsonToken value) throws IOException {
      if (value != JsonToken.START_OBJECT) {
        parser.skipChildren();
        return;
      }
      while (next() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken field = next();
        switch (name) {
          case "content", "reasoning_content", "reasoning" -> content |= nonEmptyString(field);
          case "tool_calls" -> content |= nonEmptyArray(field);
          case "role" -> {
            role |= field == JsonToken.VALUE_STRING;
            parser.skipChildren();
          }
          default -> parser.skipChildren();
        }
      }
    }

    private void usage(JsonToken value) throws IOException {
      if (value != JsonToken.START_OBJECT) {
        parser.skipChildren();
        return;
      }
      usage = true;
      while (next() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken field = next();
        switch (name) {
          case "prompt_tokens" -> promptTokens = count(field);
          case "completion_tokens" -> completionTokens = count(field);
          default -> parser.skipChildren();
        }
      }
    }

    private boolean nonEmptyString(JsonToken value) throws IOException {
      if (value == JsonToken.VALUE_STRING) {
        return parser.getTextLength() > 0;
      }
      parser.skipChildren();
      return false;
    }

    private boolean nonEmptyArray(JsonToken value) throws IOException {
      if (value != JsonToken.START_ARRAY) {
        parser.skipChildren();
        return false;
      }
      boolean any = false;
      while (next() != JsonToken.END_ARRAY) {
        any = true;
        parser.skipChildren();
      }
      return any;
    }

    private long count(JsonToken value) throws IOException {
      if (value == JsonToken.VALUE_NUMBER_INT) {
        return parser.getLongValue();
      }
      parser.skipChildren();
      return -1;
    }

    /** The next token; the end of input inside the object is an error, never a null. */
    private JsonToken next() throws IOException {
      JsonToken token = parser.nextToken();
      if (token == null) {
        throw new JsonParseException(parser, "unexpected end of input");
      }
      return token;
    }
  }
}
