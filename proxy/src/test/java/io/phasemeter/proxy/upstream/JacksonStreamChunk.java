package io.phasemeter.proxy.upstream;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.phasemeter.proxy.upstream.StreamChunk.Kind;
import java.io.IOException;

/**
 * The reference for {@link StreamChunk}: the Jackson-based scan it replaced (commit 12cbc83), kept
 * as it was, answering with {@link StreamChunk#toString()}'s summary of every field. Differential
 * tests check that the byte scan reads every payload as this reads the payload decoded to a String.
 */
final class JacksonStreamChunk {

  private static final JsonFactory JSON = JsonFactory.builder().build();

  private JacksonStreamChunk() {}

  /** The summary {@link StreamChunk#toString()} gives for the same payload. */
  static String inspect(String data) {
    if (data == null) {
      return summary(Kind.EMPTY, false, null, -1, -1, false, false);
    }
    if (data.trim().equals("[DONE]")) {
      return summary(Kind.DONE, false, null, -1, -1, false, false);
    }
    if (nonHexUnicodeEscape(data)) {
      return summary(Kind.MALFORMED, false, null, -1, -1, false, false);
    }
    try (JsonParser parser = JSON.createParser(data)) {
      return new Scan(parser).chunk();
    } catch (IOException e) {
      return summary(Kind.MALFORMED, false, null, -1, -1, false, false);
    }
  }

  /**
   * Whether a {@code \\u} escape has a character other than an ASCII hex digit among its four.
   * Jackson's reader takes only the low byte of such a character ({@code CharTypes.charToHex} masks
   * with 0xFF), so it reads U+0663 as 'c' and calls {@code \\u00e\u0663} valid; JSON allows only
   * 0-9, a-f, A-F there, and the proxy's inspector says malformed (a fuzz finding, kept as the
   * regression input jackson-hex-mask).
   */
  private static boolean nonHexUnicodeEscape(String data) {
    for (int i = 0; i < data.length() - 1; i++) {
      if (data.charAt(i) != '\\') {
        continue;
      }
      if (data.charAt(i + 1) == 'u') {
        for (int k = i + 2; k < i + 6 && k < data.length(); k++) {
          if (Character.digit(data.charAt(k), 16) < 0 || data.charAt(k) > 0x7f) {
            return true;
          }
        }
      }
      i++;
    }
    return false;
  }

  private static String summary(
      Kind kind,
      boolean hasContent,
      String finishReason,
      long promptTokens,
      long completionTokens,
      boolean hasUsage,
      boolean choicesEmpty) {
    return summary(
        kind,
        hasContent,
        finishReason,
        promptTokens,
        completionTokens,
        hasUsage,
        choicesEmpty,
        null);
  }

  private static String summary(
      Kind kind,
      boolean hasContent,
      String finishReason,
      long promptTokens,
      long completionTokens,
      boolean hasUsage,
      boolean choicesEmpty,
      String errorType) {
    return "StreamChunk{"
        + kind
        + (hasContent ? ", content" : "")
        + (finishReason != null ? ", finish_reason=" + finishReason : "")
        + (hasUsage ? ", usage=" + promptTokens + "/" + completionTokens : "")
        + (choicesEmpty ? ", choices=[]" : "")
        + (errorType != null ? ", error=" + errorType : "")
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
    private boolean error;
    private String errorType;

    Scan(JsonParser parser) {
      this.parser = parser;
    }

    String chunk() throws IOException {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return summary(Kind.MALFORMED, false, null, -1, -1, false, false);
      }
      JsonToken token;
      while ((token = next()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken value = next();
        switch (name) {
          case "choices" -> choices(value);
          case "usage" -> usage(value);
          case "error" -> error(value);
          default -> parser.skipChildren();
        }
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
        return summary(Kind.MALFORMED, false, null, -1, -1, false, false);
      }
      boolean noChoices = choices == 0;
      if (error) {
        return summary(
            Kind.ERROR,
            content,
            finishReason,
            promptTokens,
            completionTokens,
            usage,
            choicesPresent && noChoices,
            StreamChunk.safeErrorType(errorType));
      }
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
      return summary(
          kind,
          content,
          finishReason,
          promptTokens,
          completionTokens,
          usage,
          choicesPresent && noChoices);
    }

    private void error(JsonToken value) throws IOException {
      if (value == JsonToken.VALUE_NULL) {
        return;
      }
      error = true;
      if (value != JsonToken.START_OBJECT) {
        parser.skipChildren();
        return;
      }
      while (next() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken v = next();
        if (name.equals("type") && errorType == null && v == JsonToken.VALUE_STRING) {
          errorType = parser.getText();
        } else {
          parser.skipChildren();
        }
      }
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
