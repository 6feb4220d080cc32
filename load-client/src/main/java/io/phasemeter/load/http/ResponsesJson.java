package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import java.io.IOException;

/**
 * What the runner needs from one Responses API object: an event of the stream ({@code
 * {"type":"response.output_text.delta","delta":"Hi",…}}, {@code {"type":"response.completed",
 * "response":{…}}}) or a whole response ({@code {"object":"response","status":"completed",…}}).
 * Nothing of the text is kept; read with Jackson's streaming parser as {@link ResponseJson} is, for
 * the same reason (no tree per event on the event loop).
 *
 * <p>Fields are read wherever they stand in the object, so that {@code type} may come after {@code
 * delta}. A response object nested as {@code response} (the terminal events carry the whole
 * response) gives its {@code status}, {@code usage} and {@code error}.
 */
final class ResponsesJson {

  /** The event's {@code type}, or null (a whole response has none). */
  final String type;

  /** Whether {@code delta} is a non-empty string. */
  final boolean delta;

  /** The response's {@code status} (its own, or the nested response's), or null. */
  final String status;

  /** Whether an {@code error} object is present and not null (here or in the nested response). */
  final boolean error;

  /**
   * The error's {@code code} (of {@code error}, or of an {@code error} event), or its {@code type};
   * null when none is given.
   */
  final String errorCode;

  /**
   * The error's {@code message} (of {@code error}, or of an {@code error} event), or null; at most
   * {@link FailureReason#MAX_READ_CHARS} characters, not yet cleaned. It is the engine's, kept only
   * for a failure's reason.
   */
  final String errorMessage;

  /** {@code usage.input_tokens}, or -1. */
  final long inputTokens;

  /** {@code usage.output_tokens}, or -1. */
  final long outputTokens;

  private ResponsesJson(Fields f) {
    this.type = f.type;
    this.delta = f.deltaChars > 0;
    this.status = f.status != null ? f.status : f.nested == null ? null : f.nested.status;
    this.error = f.error || (f.nested != null && f.nested.error);
    String code = f.code != null ? f.code : f.nested == null ? null : f.nested.code;
    this.errorCode = code;
    this.errorMessage = f.message != null ? f.message : f.nested == null ? null : f.nested.message;
    Fields usage = f.inputTokens >= 0 || f.outputTokens >= 0 || f.nested == null ? f : f.nested;
    this.inputTokens = usage.inputTokens;
    this.outputTokens = usage.outputTokens;
  }

  /**
   * Whether this is generated content when its type is {@code type} (the object's own, or the event
   * line's): a {@code *.delta} event ({@code output_text}, {@code reasoning_text}, {@code
   * function_call_arguments}, {@code refusal}, …) whose {@code delta} is a non-empty string.
   */
  boolean content(String type) {
    return delta && type != null && type.endsWith(".delta");
  }

  /** Whether a usage object gave either count. */
  boolean hasUsage() {
    return inputTokens >= 0 || outputTokens >= 0;
  }

  /**
   * Reads one JSON object.
   *
   * @return null when the text is not a JSON object
   */
  static ResponsesJson parse(String json) {
    return JsonObjects.parse(json, p -> new ResponsesJson(fields(p, true)));
  }

  /** Like {@link #parse(String)}, for a whole body. */
  static ResponsesJson parse(byte[] json) {
    return JsonObjects.parse(json, p -> new ResponsesJson(fields(p, true)));
  }

  /** What one object level holds; a field given twice counts as its last value. */
  private static final class Fields {
    String type;
    int deltaChars;
    String status;
    boolean error;
    String code;
    String message;
    long inputTokens = -1;
    long outputTokens = -1;
    Fields nested;
  }

  /** At the start of an object: its fields, and those of a nested {@code response}. */
  private static Fields fields(JsonParser p, boolean top) throws IOException {
    Fields f = new Fields();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      switch (name) {
        case "type" -> {
          if (v == JsonToken.VALUE_STRING) {
            f.type = p.getText();
          } else {
            p.skipChildren();
          }
        }
        case "delta" -> {
          f.deltaChars = v == JsonToken.VALUE_STRING ? p.getTextLength() : 0;
          p.skipChildren();
        }
        case "status" -> {
          f.status = v == JsonToken.VALUE_STRING ? JsonObjects.boundedText(p) : null;
          p.skipChildren();
        }
        case "code" -> {
          // An error event's own code: {"type":"error","code":…,"message":…}.
          f.code =
              v.isScalarValue() && v != JsonToken.VALUE_NULL ? JsonObjects.boundedText(p) : f.code;
          p.skipChildren();
        }
        case "message" -> {
          // An error event's own message: {"type":"error","code":…,"message":…}.
          f.message = v == JsonToken.VALUE_STRING ? JsonObjects.boundedText(p) : f.message;
          p.skipChildren();
        }
        case "error" -> {
          f.error = v != JsonToken.VALUE_NULL;
          if (v == JsonToken.START_OBJECT) {
            error(p, f);
          } else {
            if (v == JsonToken.VALUE_STRING) {
              f.message = JsonObjects.boundedText(p);
            }
            p.skipChildren();
          }
        }
        case "usage" -> usage(p, v, f);
        case "response" -> {
          if (top && v == JsonToken.START_OBJECT) {
            f.nested = fields(p, false);
          } else {
            p.skipChildren();
          }
        }
        default -> p.skipChildren();
      }
    }
    return f;
  }

  /**
   * At the start of an {@code error} object: its {@code code}, else its {@code type}, or null, into
   * {@code f.code}; its {@code message} into {@code f.message}.
   */
  private static void error(JsonParser p, Fields f) throws IOException {
    String code = null;
    String type = null;
    String message = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if (v.isScalarValue() && v != JsonToken.VALUE_NULL) {
        if (name.equals("code")) {
          code = JsonObjects.boundedText(p);
        } else if (name.equals("type")) {
          type = JsonObjects.boundedText(p);
        } else if (name.equals("message") && v == JsonToken.VALUE_STRING) {
          message = JsonObjects.boundedText(p);
        }
      }
      p.skipChildren();
    }
    f.code = code != null ? code : type;
    f.message = message;
  }

  private static void usage(JsonParser p, JsonToken v, Fields f) throws IOException {
    f.inputTokens = -1;
    f.outputTokens = -1;
    if (v != JsonToken.START_OBJECT) {
      p.skipChildren();
      return;
    }
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String field = p.currentName();
      JsonToken t = p.nextToken();
      if (field.equals("input_tokens")) {
        f.inputTokens = count(p, t);
      } else if (field.equals("output_tokens")) {
        f.outputTokens = count(p, t);
      } else {
        p.skipChildren();
      }
    }
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
}
