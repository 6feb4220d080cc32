package io.phasemeter.proxy.upstream;

import io.phasemeter.proxy.upstream.JsonCursor.MalformedJson;
import io.vertx.core.buffer.Buffer;

/**
 * What one event of an OpenAI Responses API stream ({@code POST /v1/responses} with {@code stream:
 * true}, as vLLM writes it: {@code event: <type>} and {@code data: {"type": ..., ...}}, no {@code
 * [DONE]}) or a whole response object carries: generated content, the terminal event with its
 * usage, or a failure.
 *
 * <p>Like {@link StreamChunk}, a single pass over the payload's bytes with {@link JsonCursor},
 * reading only the fields it needs in whatever order they come (vLLM's events put {@code type}
 * last). The events of a stream's body allocate nothing: their results are shared instances; the
 * terminal event, with its usage, gets one of its own. Never throws on bad input.
 */
public final class ResponseEvent {

  /** The class of an event. */
  public enum Kind {
    /**
     * A {@code *.delta} event whose {@code delta} is a non-empty string: output text, reasoning, a
     * refusal, tool-call arguments. Server TTFT and the gaps between tokens are taken on these.
     */
    CONTENT,
    /**
     * The response ended: {@code response.completed}, or {@code response.incomplete} (stopped at
     * {@code max_output_tokens}, say: a success, as chat's {@code finish_reason: length} is). For a
     * whole response: any status but {@code failed}.
     */
    COMPLETED,
    /**
     * The response failed: {@code response.failed}, or an {@code error} event; for a whole
     * response, {@code status: failed}. The request failed, whatever else arrives.
     */
    FAILED,
    /** Any other event: created, in progress, an item or part added or done, an empty delta. */
    OTHER,
    /** Not a single complete JSON object. */
    MALFORMED
  }

  private static final ResponseEvent CONTENT = new ResponseEvent(Kind.CONTENT);
  private static final ResponseEvent OTHER = new ResponseEvent(Kind.OTHER);
  private static final ResponseEvent MALFORMED = new ResponseEvent(Kind.MALFORMED);

  /** The event types whose delta is generated output, the usual ones first. */
  private static final String[] CONTENT_DELTAS = {
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
    "response.function_call_arguments.delta",
    "response.refusal.delta",
  };

  private static final ThreadLocal<Scan> SCANS = ThreadLocal.withInitial(Scan::new);

  private final Kind kind;
  private final long inputTokens;
  private final long outputTokens;
  private final boolean hasUsage;
  private final String finishReason;
  private final String errorType;

  private ResponseEvent(Kind kind) {
    this(kind, -1, -1, false, null, null);
  }

  private ResponseEvent(
      Kind kind,
      long inputTokens,
      long outputTokens,
      boolean hasUsage,
      String finishReason,
      String errorType) {
    this.kind = kind;
    this.inputTokens = inputTokens;
    this.outputTokens = outputTokens;
    this.hasUsage = hasUsage;
    this.finishReason = finishReason;
    this.errorType = errorType;
  }

  /** Classifies the {@code data} of one event; an event without data is {@link Kind#OTHER}. */
  public static ResponseEvent inspect(SseEvent event) {
    Buffer data = event.dataBuffer();
    if (data == null || StreamChunk.isDone(data, event.dataStart(), event.dataEnd())) {
      // vLLM sends no [DONE] here; a server that adds one has it relayed, as any other event.
      return OTHER;
    }
    return scan(data, event.dataStart(), event.dataEnd(), false);
  }

  /** Classifies a whole response object (a request that was not streamed). */
  public static ResponseEvent inspectBody(Buffer body) {
    return scan(body, 0, body.length(), true);
  }

  private static ResponseEvent scan(Buffer in, int from, int to, boolean body) {
    Scan scan = SCANS.get();
    try {
      return body ? scan.body(in, from, to) : scan.event(in, from, to);
    } catch (MalformedJson e) {
      return MALFORMED;
    } finally {
      scan.json.release();
    }
  }

  public Kind kind() {
    return kind;
  }

  /** {@code usage.input_tokens} of the response, or -1. */
  public long inputTokens() {
    return inputTokens;
  }

  /** {@code usage.output_tokens} of the response, or -1. */
  public long outputTokens() {
    return outputTokens;
  }

  /** Whether the response carried a {@code usage} object. */
  public boolean hasUsage() {
    return hasUsage;
  }

  /**
   * For {@link Kind#COMPLETED}: {@code stop} for a completed response, {@code length} for one that
   * stopped at {@code max_output_tokens}, {@code content_filter}, or {@code other}; else null.
   */
  public String finishReason() {
    return finishReason;
  }

  /**
   * For {@link Kind#FAILED}: the error's {@code code} when it is a known one, {@code other} for any
   * other, {@code unknown} when there is none (it reaches spans: never free text); else null.
   */
  public String errorType() {
    return errorType;
  }

  @Override
  public String toString() {
    return "ResponseEvent{"
        + kind
        + (hasUsage ? ", usage=" + inputTokens + "/" + outputTokens : "")
        + (finishReason != null ? ", finish_reason=" + finishReason : "")
        + (errorType != null ? ", error=" + errorType : "")
        + "}";
  }

  /** One pass over one payload; state reused per event-loop thread. */
  private static final class Scan {
    final JsonCursor json = new JsonCursor();
    // 0 other; 1 a content delta type; 2 another *.delta; 3 completed; 4 incomplete; 5 failed;
    // 6 error.
    private int type;
    private boolean delta;
    private String status;
    private boolean usage;
    private long input;
    private long output;
    private String incompleteReason;
    private String code;

    private void clear() {
      type = 0;
      delta = false;
      status = null;
      usage = false;
      input = -1;
      output = -1;
      incompleteReason = null;
      code = null;
    }

    ResponseEvent event(Buffer in, int from, int to) throws MalformedJson {
      json.reset(in, from, to);
      clear();
      if (json.next() != JsonCursor.START_OBJECT) {
        return MALFORMED;
      }
      int token;
      while ((token = json.next()) == JsonCursor.FIELD_NAME) {
        if (json.nameIs("type")) {
          type(json.next());
        } else if (json.nameIs("delta")) {
          delta = json.next() == JsonCursor.STRING && !json.textEmpty();
          json.skipChildren();
        } else if (json.nameIs("response")) {
          response(json.next());
        } else if (json.nameIs("code")) {
          code(json.next());
        } else if (json.nameIs("error")) {
          error(json.next());
        } else {
          json.next();
          json.skipChildren();
        }
      }
      if (token != JsonCursor.END_OBJECT || json.next() != JsonCursor.END) {
        return MALFORMED;
      }
      return switch (type) {
        case 1, 2 -> delta ? CONTENT : OTHER;
        // vLLM ends a response stopped at max_output_tokens with response.completed whose status
        // is incomplete; OpenAI with response.incomplete. Both are successes that stopped early.
        case 3 -> completed("incomplete".equals(status) ? incompleteOr() : null);
        case 4 -> completed(incompleteOr());
        case 5, 6 -> failed();
        default -> OTHER;
      };
    }

    ResponseEvent body(Buffer in, int from, int to) throws MalformedJson {
      json.reset(in, from, to);
      clear();
      if (json.next() != JsonCursor.START_OBJECT) {
        return MALFORMED;
      }
      responseFields();
      if (json.next() != JsonCursor.END) {
        return MALFORMED;
      }
      if ("failed".equals(status)) {
        return failed();
      }
      return completed("incomplete".equals(status) ? incompleteOr() : null);
    }

    private String incompleteOr() {
      return incompleteReason == null ? "other" : incompleteReason;
    }

    private ResponseEvent completed(String incomplete) {
      return new ResponseEvent(
          Kind.COMPLETED, input, output, usage, incomplete == null ? "stop" : incomplete, null);
    }

    private ResponseEvent failed() {
      return new ResponseEvent(
          Kind.FAILED, input, output, usage, null, StreamChunk.safeErrorType(code));
    }

    private void type(int value) throws MalformedJson {
      if (value != JsonCursor.STRING) {
        json.skipChildren();
        return;
      }
      for (String t : CONTENT_DELTAS) {
        if (json.textIs(t)) {
          type = 1;
          return;
        }
      }
      if (json.textIs("response.completed")) {
        type = 3;
      } else if (json.textIs("response.incomplete")) {
        type = 4;
      } else if (json.textIs("response.failed")) {
        type = 5;
      } else if (json.textIs("error")) {
        type = 6;
      } else if (json.textEndsWith(".delta")) {
        // A delta of a kind this list does not know yet (vLLM adds them): generated all the same.
        type = 2;
      }
    }

    /** The {@code response} object of a lifecycle event. */
    private void response(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      responseFields();
    }

    /** The fields of a response object, up to and including its closing brace. */
    private void responseFields() throws MalformedJson {
      int token;
      while ((token = json.next()) == JsonCursor.FIELD_NAME) {
        if (json.nameIs("status")) {
          if (json.next() == JsonCursor.STRING) {
            status =
                json.textIs("failed") ? "failed" : json.textIs("incomplete") ? "incomplete" : "";
          } else {
            json.skipChildren();
          }
        } else if (json.nameIs("usage")) {
          usage(json.next());
        } else if (json.nameIs("error")) {
          error(json.next());
        } else if (json.nameIs("incomplete_details")) {
          incomplete(json.next());
        } else {
          json.next();
          json.skipChildren();
        }
      }
      if (token != JsonCursor.END_OBJECT) {
        throw JsonCursor.MALFORMED;
      }
    }

    private void usage(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      usage = true;
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("input_tokens")) {
          input = json.count(json.next());
        } else if (json.nameIs("output_tokens")) {
          output = json.count(json.next());
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    /** An {@code error} object: its {@code code} (or {@code type}) names it. */
    private void error(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("code") || (json.nameIs("type") && code == null)) {
          code(json.next());
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }

    private void code(int value) throws MalformedJson {
      if (value == JsonCursor.STRING) {
        code = json.readText();
      } else {
        json.skipChildren();
      }
    }

    private void incomplete(int value) throws MalformedJson {
      if (value != JsonCursor.START_OBJECT) {
        json.skipChildren();
        return;
      }
      while (json.next() == JsonCursor.FIELD_NAME) {
        if (json.nameIs("reason")) {
          if (json.next() == JsonCursor.STRING) {
            incompleteReason =
                json.textIs("max_output_tokens")
                    ? "length"
                    : json.textIs("content_filter") ? "content_filter" : "other";
          } else {
            json.skipChildren();
          }
        } else {
          json.next();
          json.skipChildren();
        }
      }
    }
  }
}
