package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;

/**
 * The response objects of vLLM's OpenAI server, field for field in vLLM's order. Streamed chunks
 * follow vLLM's serialisation: choices carry {@code logprobs} and {@code finish_reason} always and
 * {@code stop_reason} only on the finishing chunk (chat); completion chunks always carry {@code
 * stop_reason}; the usage chunk has empty {@code choices} and no null fields.
 */
final class OpenAiJson {
  private OpenAiJson() {}

  /** Answers {@code response} with a JSON body. */
  static void send(HttpServerResponse response, int status, JsonObject body) {
    response.setStatusCode(status).putHeader("content-type", "application/json").end(body.encode());
  }

  static String sse(JsonObject json) {
    return "data: " + json.encode() + "\n\n";
  }

  static final String DONE = "data: [DONE]\n\n";

  /**
   * vLLM's body for an engine failure during generation ({@code GenerationError}): sent in-band on
   * a stream, as the 500's body otherwise.
   */
  static JsonObject generationError() {
    return ApiError.internal("Internal server error").body();
  }

  static JsonObject roleChunk(String id, long created, String model) {
    JsonObject delta = new JsonObject().put("role", "assistant").put("content", "");
    return envelope(id, Endpoint.CHAT.chunkObject, created, model)
        .put(
            "choices",
            new JsonArray()
                .add(
                    new JsonObject()
                        .put("index", 0)
                        .put("delta", delta)
                        .put("logprobs", null)
                        .put("finish_reason", null)));
  }

  static JsonObject tokenChunk(
      Endpoint endpoint, String id, long created, String model, String text, String finish) {
    JsonObject choice = new JsonObject().put("index", 0);
    if (endpoint == Endpoint.CHAT) {
      choice.put("delta", new JsonObject().put("content", text));
    } else {
      choice.put("text", text);
    }
    choice.put("logprobs", null).put("finish_reason", finish);
    if (finish != null || endpoint == Endpoint.COMPLETION) {
      choice.put("stop_reason", null);
    }
    return envelope(id, endpoint.chunkObject, created, model)
        .put("choices", new JsonArray().add(choice));
  }

  /**
   * The stream's usage chunk; {@code cachedTokens} above 0 adds {@code prompt_tokens_details} (vLLM
   * with {@code --enable-prompt-tokens-details}), absent otherwise.
   */
  static JsonObject usageChunk(
      Endpoint endpoint,
      String id,
      long created,
      String model,
      int prompt,
      int completion,
      int cachedTokens) {
    return envelope(id, endpoint.chunkObject, created, model)
        .put("choices", new JsonArray())
        .put("usage", usage(prompt, completion, false, cachedTokens));
  }

  /**
   * A whole response; {@code cachedTokens} above 0 fills {@code prompt_tokens_details} (vLLM with
   * {@code --enable-prompt-tokens-details}), null otherwise.
   */
  static JsonObject response(
      ParsedRequest request,
      String id,
      long created,
      String text,
      String finish,
      int completionTokens,
      int cachedTokens) {
    JsonObject choice = new JsonObject().put("index", 0);
    if (request.endpoint() == Endpoint.CHAT) {
      choice.put(
          "message",
          new JsonObject()
              .put("role", "assistant")
              .put("content", text)
              .put("refusal", null)
              .put("annotations", null)
              .put("audio", null)
              .put("function_call", null)
              .put("tool_calls", new JsonArray())
              .put("reasoning_content", null));
    } else {
      choice.put("text", text);
    }
    choice.put("logprobs", null).put("finish_reason", finish).put("stop_reason", null);
    if (request.endpoint() == Endpoint.COMPLETION) {
      choice.put("prompt_logprobs", null);
    }
    JsonObject body =
        envelope(id, request.endpoint().object, created, request.model())
            .put("choices", new JsonArray().add(choice));
    if (request.endpoint() == Endpoint.CHAT) {
      body.put("service_tier", null).put("system_fingerprint", null);
    }
    body.put("usage", usage(request.promptTokens(), completionTokens, true, cachedTokens));
    if (request.endpoint() == Endpoint.CHAT) {
      body.put("prompt_logprobs", null);
    }
    return body.put("kv_transfer_params", null);
  }

  static JsonObject models(java.util.List<String> models, int maxModelLen, long created) {
    JsonArray data = new JsonArray();
    for (String m : models) {
      JsonObject permission =
          new JsonObject()
              .put("id", "modelperm-" + Long.toHexString(TokenPlan.mix(m.hashCode())))
              .put("object", "model_permission")
              .put("created", created)
              .put("allow_create_engine", false)
              .put("allow_sampling", true)
              .put("allow_logprobs", true)
              .put("allow_search_indices", false)
              .put("allow_view", true)
              .put("allow_fine_tuning", false)
              .put("organization", "*")
              .put("group", null)
              .put("is_blocking", false);
      data.add(
          new JsonObject()
              .put("id", m)
              .put("object", "model")
              .put("created", created)
              .put("owned_by", "vllm")
              .put("root", m)
              .put("parent", null)
              .put("max_model_len", maxModelLen)
              .put("permission", new JsonArray().add(permission)));
    }
    return new JsonObject().put("object", "list").put("data", data);
  }

  private static JsonObject envelope(String id, String object, long created, String model) {
    return new JsonObject()
        .put("id", id)
        .put("object", object)
        .put("created", created)
        .put("model", model);
  }

  static JsonObject usage(int prompt, int completion, boolean withDetails) {
    return usage(prompt, completion, withDetails, 0);
  }

  /**
   * vLLM's {@code UsageInfo}: {@code prompt_tokens_details} is {@code {"cached_tokens": n}} when
   * {@code cachedTokens} is above 0 (vLLM leaves it out for 0), else null when {@code withDetails}
   * (a whole response) and absent otherwise (a stream's usage chunk drops nulls).
   */
  static JsonObject usage(int prompt, int completion, boolean withDetails, int cachedTokens) {
    JsonObject usage =
        new JsonObject()
            .put("prompt_tokens", prompt)
            .put("total_tokens", prompt + completion)
            .put("completion_tokens", completion);
    if (cachedTokens > 0) {
      usage.put("prompt_tokens_details", new JsonObject().put("cached_tokens", cachedTokens));
    } else if (withDetails) {
      usage.put("prompt_tokens_details", null);
    }
    return usage;
  }
}
