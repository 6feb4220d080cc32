package io.phasemeter.load.http;

import io.phasemeter.load.workload.Api;

/**
 * How one API's event stream is read: which events carry generated content, which one ends the
 * stream, which ones fail it and why, and what usage it reports. The {@link Exchange} times the
 * content events; a reader only judges them. One stream, one context: not thread-safe.
 *
 * <ul>
 *   <li>Chat and completions ({@link Chunks}): {@code data: {chunk}} events; {@code data: [DONE]}
 *       ends the stream; an event with an {@code error} (its message is the reason), or one that is
 *       not JSON, fails it.
 *   <li>Responses ({@link Responses}): typed events ({@code event: <type>} and {@code data:
 *       {"type":"<type>",…}}) and no {@code [DONE]}: {@code response.completed} or {@code
 *       response.incomplete} (stopped at the length, say) end it as a success, {@code
 *       response.failed} or an {@code error} event as a failure; a {@code [DONE]} (which vLLM does
 *       not send) is ignored.
 * </ul>
 *
 * A stream that ends before its end was announced is a failure, whatever it carried.
 */
abstract sealed class StreamReader {
  private boolean ended;
  private String failure;
  long usagePrompt = -1;
  long usageCompletion = -1;

  /** The reader of {@code api}'s stream (embeddings never stream: read as chunks). */
  static StreamReader of(Api api) {
    return api == Api.RESPONSES ? new Responses() : new Chunks();
  }

  /**
   * One event of the stream.
   *
   * @param type its {@code event:} field, or null
   * @param data its data
   * @return whether it carries generated content (the first one is the first token)
   */
  final boolean event(String type, String data) {
    if (ended) {
      return false; // nothing after the end counts, as nothing after [DONE] ever did
    }
    return read(type, data);
  }

  abstract boolean read(String type, String data);

  /**
   * An {@code error:} field, which llama.cpp's server wrote (before its {@code data: {"error": …}}
   * events) when a stream failed, then ended the response without {@code [DONE]}: the stream
   * failed, its reason the field's message ({@code {"message": …}} or {@code {"error": {"message":
   * …}}}; the field's text itself when it is not JSON).
   */
  final void errorField(String value) {
    if (ended) {
      return;
    }
    ResponseJson json = ResponseJson.parse(value);
    fail(FailureReason.withMessage("an error event", json == null ? value : json.message));
  }

  /** The stream announced its end ({@code [DONE]}, a terminal event): nothing after it counts. */
  final void end() {
    ended = true;
  }

  /** Marks the stream failed; the first reason stays. */
  final void fail(String reason) {
    if (failure == null) {
      failure = reason;
    }
  }

  /** Whether the stream announced its end. */
  final boolean ended() {
    return ended;
  }

  /** Whether an event failed the stream. */
  final boolean failed() {
    return failure != null;
  }

  /** Why the stream failed, for the result's reason; null when it did not fail. */
  final String reason() {
    return failure;
  }

  /** The reason when the stream ended without announcing its end. */
  abstract String unfinishedReason();

  /** {@code /v1/chat/completions} and {@code /v1/completions}: chunks, then {@code [DONE]}. */
  static final class Chunks extends StreamReader {
    @Override
    boolean read(String type, String data) {
      if (data.trim().equals("[DONE]")) {
        end();
        return false;
      }
      ResponseJson json = ResponseJson.parse(data);
      if (json == null) {
        fail("an event is not JSON");
        return false;
      }
      if (json.error) {
        // vLLM's and llama.cpp's mid-stream failure: data: {"error": {"message": …}}.
        fail(FailureReason.withMessage("an error event", json.message));
        return false;
      }
      if (json.hasUsage()) {
        usagePrompt = json.promptTokens;
        usageCompletion = json.completionTokens;
      }
      return json.content;
    }

    @Override
    String unfinishedReason() {
      return "the stream ended without [DONE]";
    }
  }

  /** {@code /v1/responses}: typed events, ended by a terminal one; no {@code [DONE]}. */
  static final class Responses extends StreamReader {
    @Override
    boolean read(String sseType, String data) {
      if (data.trim().equals("[DONE]")) {
        return false; // not part of this API (vLLM sends none); it ends nothing here
      }
      ResponsesJson json = ResponsesJson.parse(data);
      if (json == null) {
        fail("an event is not JSON");
        return false;
      }
      String type = json.type != null ? json.type : sseType;
      if (type == null) {
        // Not a Responses event; an OpenAI-style {"error": …} (a gateway's) fails the stream.
        if (json.error) {
          fail(FailureReason.withMessage("an error event" + code(json), json.errorMessage));
        }
        return false;
      }
      switch (type) {
        case "response.completed", "response.incomplete" -> {
          if (json.error) {
            fail(FailureReason.withMessage(type + code(json), json.errorMessage));
          }
          if (json.hasUsage()) {
            usagePrompt = json.inputTokens;
            usageCompletion = json.outputTokens;
          }
          end();
          return false;
        }
        case "response.failed" -> {
          fail(FailureReason.withMessage("response.failed" + code(json), json.errorMessage));
          end();
          return false;
        }
        case "error" -> {
          fail(FailureReason.withMessage("an error event" + code(json), json.errorMessage));
          return false;
        }
        default -> {
          return json.content(type);
        }
      }
    }

    @Override
    String unfinishedReason() {
      return "the stream ended without response.completed, response.incomplete or"
          + " response.failed";
    }

    private static String code(ResponsesJson json) {
      return json.errorCode == null ? "" : " (" + json.errorCode + ")";
    }
  }
}
