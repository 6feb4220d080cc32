package io.phasemeter.sim;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;

/**
 * The Responses API objects as vLLM writes them ({@code vllm/entrypoints/openai/responses/}):
 * {@code ResponsesResponse} with every field it declares, nulls included (vLLM dumps the model
 * whole), and the streamed events of its simple (non-Harmony) path, each field in the order of the
 * OpenAI type vLLM builds it from. Streamed events are {@code event: <type>\ndata: <json>\n\n},
 * with no {@code [DONE]} at the end.
 */
final class ResponsesJson {
  private ResponsesJson() {}

  static final String OUTPUT_TEXT = "output_text";
  static final String REASONING_TEXT = "reasoning_text";

  /** One SSE event as vLLM's router writes it. */
  static String event(JsonObject event) {
    return "event: " + event.getString("type") + "\ndata: " + event.encode() + "\n\n";
  }

  /**
   * The response object. {@code status} {@code incomplete} brings {@code incomplete_details:
   * {"reason": "max_output_tokens"}}, as vLLM's {@code from_request} does; {@code usage} is null
   * until the generation ended.
   */
  static JsonObject response(
      ResponsesRequest request,
      String id,
      long createdAt,
      String status,
      JsonArray output,
      JsonObject usage) {
    JsonObject body = request.body();
    Object temperature = body.getValue("temperature");
    Object topP = body.getValue("top_p");
    return new JsonObject()
        .put("id", id)
        .put("created_at", createdAt)
        .put(
            "incomplete_details",
            "incomplete".equals(status)
                ? new JsonObject().put("reason", "max_output_tokens")
                : null)
        .put("instructions", body.getValue("instructions"))
        .put("metadata", body.getValue("metadata"))
        .put("model", request.parsed().model())
        .put("object", "response")
        .put("output", output)
        .put("parallel_tool_calls", body.getBoolean("parallel_tool_calls", true))
        .put("temperature", temperature == null ? 1.0 : temperature)
        .put("tool_choice", body.getValue("tool_choice", "auto"))
        .put("tools", body.getValue("tools", new JsonArray()))
        .put("top_p", topP == null ? 1.0 : topP)
        .put("background", request.background())
        .put("max_output_tokens", request.parsed().maxTokens())
        .put("max_tool_calls", body.getValue("max_tool_calls"))
        .put("previous_response_id", request.previousResponseId())
        .put("prompt", null)
        .put("reasoning", body.getValue("reasoning"))
        .put("service_tier", body.getValue("service_tier", "auto"))
        .put("status", status)
        .put("text", body.getValue("text"))
        .put("top_logprobs", request.topLogprobs())
        .put("truncation", body.getValue("truncation", "disabled"))
        .put("usage", usage)
        .put("user", body.getValue("user"))
        .put("input_messages", null)
        .put("output_messages", null)
        .put("kv_transfer_params", null);
  }

  /**
   * vLLM's {@code ResponseUsage}; the per-turn lists stay empty for a plain model, as in vLLM.
   * {@code cached} is the prompt's prefix-cache hit (0 unless {@code --prompt-tokens-details}).
   */
  static JsonObject usage(int input, int output, int reasoning, int cached) {
    return new JsonObject()
        .put("input_tokens", input)
        .put(
            "input_tokens_details",
            new JsonObject()
                .put("cached_tokens", cached)
                .put("input_tokens_per_turn", new JsonArray())
                .put("cached_tokens_per_turn", new JsonArray()))
        .put("output_tokens", output)
        .put(
            "output_tokens_details",
            new JsonObject()
                .put("reasoning_tokens", reasoning)
                .put("tool_output_tokens", 0)
                .put("output_tokens_per_turn", new JsonArray())
                .put("tool_output_tokens_per_turn", new JsonArray()))
        .put("total_tokens", input + output);
  }

  /** An assistant message item; a finished one with no text has no content part, as in vLLM. */
  static JsonObject message(String itemId, String text, String status) {
    JsonArray content = new JsonArray();
    if (text != null && !text.isEmpty()) {
      content.add(outputText(text, null));
    }
    return new JsonObject()
        .put("id", itemId)
        .put("content", content)
        .put("role", "assistant")
        .put("status", status)
        .put("type", "message");
  }

  /** A reasoning item; {@code content} is null while it is in progress. */
  static JsonObject reasoning(String itemId, String text, String status) {
    return new JsonObject()
        .put("id", itemId)
        .put("summary", new JsonArray())
        .put("type", "reasoning")
        .put("content", text == null ? null : new JsonArray().add(reasoningText(text)))
        .put("encrypted_content", null)
        .put("status", status);
  }

  static JsonObject outputText(String text, JsonArray logprobs) {
    return new JsonObject()
        .put("annotations", new JsonArray())
        .put("text", text)
        .put("type", OUTPUT_TEXT)
        .put("logprobs", logprobs);
  }

  static JsonObject reasoningText(String text) {
    return new JsonObject().put("text", text).put("type", REASONING_TEXT);
  }

  static JsonObject created(int seq, JsonObject response) {
    return withResponse("response.created", seq, response);
  }

  static JsonObject inProgress(int seq, JsonObject response) {
    return withResponse("response.in_progress", seq, response);
  }

  static JsonObject completed(int seq, JsonObject response) {
    return withResponse("response.completed", seq, response);
  }

  static JsonObject failed(int seq, JsonObject response) {
    return withResponse("response.failed", seq, response);
  }

  static JsonObject itemAdded(int seq, int outputIndex, JsonObject item) {
    return withItem("response.output_item.added", seq, outputIndex, item);
  }

  static JsonObject itemDone(int seq, int outputIndex, JsonObject item) {
    return withItem("response.output_item.done", seq, outputIndex, item);
  }

  static JsonObject partAdded(int seq, String itemId, int outputIndex, JsonObject part) {
    return withPart("response.content_part.added", seq, itemId, outputIndex, part);
  }

  static JsonObject partDone(int seq, String itemId, int outputIndex, JsonObject part) {
    return withPart("response.content_part.done", seq, itemId, outputIndex, part);
  }

  static JsonObject textDelta(int seq, String itemId, int outputIndex, String delta) {
    return new JsonObject()
        .put("content_index", 0)
        .put("delta", delta)
        .put("item_id", itemId)
        .put("logprobs", new JsonArray())
        .put("output_index", outputIndex)
        .put("sequence_number", seq)
        .put("type", "response.output_text.delta");
  }

  static JsonObject textDone(int seq, String itemId, int outputIndex, String text) {
    return new JsonObject()
        .put("content_index", 0)
        .put("item_id", itemId)
        .put("logprobs", new JsonArray())
        .put("output_index", outputIndex)
        .put("sequence_number", seq)
        .put("text", text)
        .put("type", "response.output_text.done");
  }

  static JsonObject reasoningDelta(int seq, String itemId, int outputIndex, String delta) {
    return new JsonObject()
        .put("content_index", 0)
        .put("delta", delta)
        .put("item_id", itemId)
        .put("output_index", outputIndex)
        .put("sequence_number", seq)
        .put("type", "response.reasoning_text.delta");
  }

  static JsonObject reasoningDone(int seq, String itemId, int outputIndex, String text) {
    return new JsonObject()
        .put("content_index", 0)
        .put("item_id", itemId)
        .put("output_index", outputIndex)
        .put("sequence_number", seq)
        .put("text", text)
        .put("type", "response.reasoning_text.done");
  }

  /** OpenAI's bare error event ({@code ResponseErrorEvent}); the stream ends after it. */
  static JsonObject error(int seq, String code, String message) {
    return new JsonObject()
        .put("code", code)
        .put("message", message)
        .put("param", null)
        .put("sequence_number", seq)
        .put("type", "error");
  }

  /** The answer to {@code DELETE /v1/responses/{id}}, as OpenAI gives it. */
  static JsonObject deleted(String id) {
    return new JsonObject().put("id", id).put("object", "response").put("deleted", true);
  }

  private static JsonObject withResponse(String type, int seq, JsonObject response) {
    return new JsonObject().put("response", response).put("sequence_number", seq).put("type", type);
  }

  private static JsonObject withItem(String type, int seq, int outputIndex, JsonObject item) {
    return new JsonObject()
        .put("item", item)
        .put("output_index", outputIndex)
        .put("sequence_number", seq)
        .put("type", type);
  }

  private static JsonObject withPart(
      String type, int seq, String itemId, int outputIndex, JsonObject part) {
    return new JsonObject()
        .put("content_index", 0)
        .put("item_id", itemId)
        .put("output_index", outputIndex)
        .put("part", part)
        .put("sequence_number", seq)
        .put("type", type);
  }
}
