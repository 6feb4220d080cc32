package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import java.io.IOException;

/**
 * What the runner needs from one OpenAI response object (a streamed chunk or a whole body): whether
 * it carries generated content, its usage, whether it is an error and the error's message. Nothing
 * of the generated text is kept.
 *
 * <p>Read with Jackson's streaming parser, field by field, without building a tree: the tree of
 * every response was the load client's largest cost of its own on the event loop (JFR at 2,000
 * req/s: a map per object, a node per value). Unknown fields are skipped but still checked, so a
 * malformed body is still refused.
 */
final class ResponseJson {

  final boolean content;
  final boolean error;
  final long promptTokens;
  final long completionTokens;

  /**
   * The error's message, or null: {@code error.message} (OpenAI, vLLM, llama.cpp), an {@code error}
   * that is a string, else the object's own {@code message} (vLLM's older error body, llama.cpp's
   * {@code error:} field) or FastAPI's {@code detail} string. At most {@link
   * FailureReason#MAX_READ_CHARS} characters, not yet cleaned.
   */
  final String message;

  private ResponseJson(
      boolean content, boolean error, long promptTokens, long completionTokens, String message) {
    this.content = content;
    this.error = error;
    this.promptTokens = promptTokens;
    this.completionTokens = completionTokens;
    this.message = message;
  }

  /** Whether a usage object was present. */
  boolean hasUsage() {
    return completionTokens >= 0 || promptTokens >= 0;
  }

  /**
   * Reads one JSON object.
   *
   * @return null when the text is not a JSON object
   */
  static ResponseJson parse(String json) {
    return JsonObjects.parse(json, ResponseJson::read);
  }

  /** Like {@link #parse(String)}, for a whole body. */
  static ResponseJson parse(byte[] json) {
    return JsonObjects.parse(json, ResponseJson::read);
  }

  /** The root object's fields; a field given twice counts as its last value, as in a tree. */
  private static ResponseJson read(JsonParser p) throws IOException {
    boolean error = false;
    boolean content = false;
    long prompt = -1;
    long completion = -1;
    String errorMessage = null;
    String ownMessage = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken value = p.nextToken();
      switch (name) {
        case "error" -> {
          error = value != JsonToken.VALUE_NULL;
          errorMessage = null;
          if (value == JsonToken.START_OBJECT) {
            errorMessage = errorMessage(p);
          } else if (value == JsonToken.VALUE_STRING) {
            errorMessage = JsonObjects.boundedText(p);
          } else {
            p.skipChildren();
          }
        }
        case "message", "detail" -> {
          if (value == JsonToken.VALUE_STRING && (ownMessage == null || name.equals("message"))) {
            ownMessage = JsonObjects.boundedText(p);
          } else {
            p.skipChildren();
          }
        }
        case "choices" -> content = value == JsonToken.START_ARRAY ? choices(p) : skip(p);
        case "usage" -> {
          prompt = -1;
          completion = -1;
          if (value == JsonToken.START_OBJECT) {
            while (p.nextToken() == JsonToken.FIELD_NAME) {
              String field = p.currentName();
              JsonToken v = p.nextToken();
              if (field.equals("prompt_tokens")) {
                prompt = count(p, v);
              } else if (field.equals("completion_tokens")) {
                completion = count(p, v);
              } else {
                p.skipChildren();
              }
            }
          } else {
            p.skipChildren();
          }
        }
        default -> p.skipChildren();
      }
    }
    return new ResponseJson(
        content, error, prompt, completion, errorMessage != null ? errorMessage : ownMessage);
  }

  /** At the start of an {@code error} object: its {@code message} string, or null. */
  private static String errorMessage(JsonParser p) throws IOException {
    String message = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if (name.equals("message") && v == JsonToken.VALUE_STRING) {
        message = JsonObjects.boundedText(p);
      } else {
        p.skipChildren();
      }
    }
    return message;
  }

  /** At the start of {@code choices}: whether any choice, or its delta, carries content. */
  private static boolean choices(JsonParser p) throws IOException {
    boolean any = false;
    JsonToken t;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t == JsonToken.START_OBJECT) {
        any |= carriesContent(p, true);
      } else {
        p.skipChildren();
      }
    }
    return any;
  }

  /**
   * At the start of a choice (or its {@code delta}): generated content is text ({@code text},
   * {@code content}), reasoning ({@code reasoning_content}, {@code reasoning}) or tool calls. The
   * role-only first chat chunk ({@code content: ""}) and an EOS chunk with empty text carry none.
   */
  private static boolean carriesContent(JsonParser p, boolean delta) throws IOException {
    boolean any = false;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      switch (name) {
        case "text", "content", "reasoning_content", "reasoning" -> {
          if (v == JsonToken.VALUE_STRING) {
            any |= p.getTextLength() > 0;
          } else {
            p.skipChildren();
          }
        }
        case "tool_calls" -> {
          if (v == JsonToken.START_ARRAY) {
            int n = 0;
            while (p.nextToken() != JsonToken.END_ARRAY) {
              n++;
              p.skipChildren();
            }
            any |= n > 0;
          } else {
            p.skipChildren();
          }
        }
        case "delta" -> {
          if (delta && v == JsonToken.START_OBJECT) {
            any |= carriesContent(p, false);
          } else {
            p.skipChildren();
          }
        }
        default -> p.skipChildren();
      }
    }
    return any;
  }

  /** An integer that fits a long, else -1. */
  private static long count(JsonParser p, JsonToken v) throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT) {
      p.skipChildren();
      return -1;
    }
    try {
      return p.getLongValue();
    } catch (InputCoercionException e) {
      return -1;
    }
  }

  private static boolean skip(JsonParser p) throws IOException {
    p.skipChildren();
    return false;
  }
}
