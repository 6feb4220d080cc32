package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Validates a {@code POST /v1/responses} body and counts its prompt as vLLM builds it ({@code
 * construct_input_messages}): {@code instructions} as a system message, then the previous
 * response's conversation without its system messages and with its output as an assistant message,
 * then this turn's input. The messages are counted like a chat's: {@code 3 + Σ (4 + ceil(chars /
 * 4))}, and hashed like a chat's for the prefix cache ({@link PromptBlocks}), so a turn that
 * continues a conversation hits the blocks its previous turn computed.
 */
final class ResponsesParser {
  private static final Set<String> ROLES = Set.of("user", "assistant", "system", "developer");

  private final RequestParser base;
  private final ResponseStore store;

  ResponsesParser(RequestParser base, ResponseStore store) {
    this.base = base;
    this.store = store;
  }

  ResponsesRequest parse(Buffer raw, int reasoningTokens) {
    JsonObject body = RequestParser.object(raw);
    String model = base.model(body);

    Object instructions = body.getValue("instructions");
    if (instructions != null && !(instructions instanceof String)) {
      throw ApiError.badRequest("'instructions' must be a string", "instructions");
    }
    String previousId = optionalString(body, "previous_response_id");
    List<PromptBlocks.Message> history = new ArrayList<>();
    if (previousId != null) {
      ResponseStore.Entry previous = store.get(previousId);
      if (previous == null) {
        throw notFound(previousId);
      }
      history.addAll(previous.history);
    }
    // The prompt as vLLM renders it: instructions, the conversation so far, this turn's input.
    List<PromptBlocks.Message> prompt = new ArrayList<>();
    if (instructions instanceof String s && !s.isEmpty()) {
      prompt.add(new PromptBlocks.Message("system", s));
    }
    prompt.addAll(history);
    Object input = body.getValue("input");
    for (PromptBlocks.Message message : inputMessages(input)) {
      prompt.add(message);
      if (!"system".equals(message.role())) {
        history.add(message);
      }
    }
    long tokens = RequestParser.CHAT_PRIMING_TOKENS;
    for (PromptBlocks.Message message : prompt) {
      tokens += RequestParser.messageTokens(message.text().length());
    }
    int promptTokens = (int) Math.min(Integer.MAX_VALUE, tokens);

    boolean stream = RequestParser.optionalBool(body, "stream");
    boolean store = RequestParser.optionalBool(body, "store", true);
    boolean background = RequestParser.optionalBool(body, "background");
    if (background && !store) {
      throw ApiError.badRequest("background can only be used when `store` is true", "background");
    }
    if (background && stream) {
      throw ApiError.badRequest(
          "The simulator does not stream background responses; send background without stream"
              + " and poll GET /v1/responses/{id}",
          "stream");
    }
    boolean ignoreEos = RequestParser.optionalBool(body, "ignore_eos");
    RequestParser.optionalBool(body, "parallel_tool_calls");
    Integer requested = RequestParser.optionalInt(body, "max_output_tokens", 1);
    int maxTokens = base.maxTokens(promptTokens, requested, "max_output_tokens");
    for (String key : List.of("metadata", "text", "reasoning")) {
      Object value = body.getValue(key);
      if (value != null && !(value instanceof JsonObject)) {
        throw ApiError.badRequest("'" + key + "' must be an object", key);
      }
    }
    for (String key : List.of("temperature", "top_p")) {
      Object value = body.getValue(key);
      if (value != null && !(value instanceof Number)) {
        throw ApiError.badRequest("'" + key + "' must be a number", key);
      }
    }
    Object tools = body.getValue("tools");
    if (tools != null && !(tools instanceof JsonArray)) {
      throw ApiError.badRequest("'tools' must be an array", "tools");
    }
    Object truncation = body.getValue("truncation");
    if (truncation != null && !"auto".equals(truncation) && !"disabled".equals(truncation)) {
      throw ApiError.badRequest("'truncation' must be \"auto\" or \"disabled\"", "truncation");
    }
    optionalString(body, "user");
    optionalString(body, "service_tier");
    String requestId = optionalString(body, "request_id");
    Integer topLogprobs = null;
    if (body.getValue("include") instanceof JsonArray include
        && include.contains("message.output_text.logprobs")) {
      Integer top = RequestParser.optionalInt(body, "top_logprobs", 0);
      topLogprobs = top == null ? 0 : top;
    }

    String key =
        Endpoint.RESPONSES.name()
            + '\u0000'
            + model
            + '\u0000'
            + instructions
            + '\u0000'
            + previousId
            + '\u0000'
            + (input instanceof String s ? s : String.valueOf(input))
            + '\u0000'
            + maxTokens
            + '\u0000'
            + ignoreEos;
    String cacheSalt = RequestParser.cacheSalt(body);
    long[] blocks =
        base.prefixCaching()
            ? PromptBlocks.chat(prompt, promptTokens, cacheSalt)
            : PromptBlocks.NONE;
    ParsedRequest parsed =
        new ParsedRequest(
            Endpoint.RESPONSES,
            model,
            promptTokens,
            maxTokens,
            0,
            ignoreEos,
            stream,
            false,
            RequestParser.fnv64(key),
            blocks);
    return new ResponsesRequest(
        parsed,
        body,
        requestId,
        history,
        store,
        background,
        previousId,
        topLogprobs,
        reasoningTokens);
  }

  /** vLLM's answer for an id it does not hold ({@code _make_not_found_error}). */
  static ApiError notFound(String id) {
    return new ApiError(
        404, "invalid_request_error", "Response with id '" + id + "' not found.", "response_id");
  }

  /**
   * This turn's messages: a string is one user message; an array holds messages (string content or
   * {@code input_text}/{@code output_text} parts), function calls (an assistant message of their
   * arguments) and their outputs (a tool message); reasoning items carry no prompt, as vLLM skips
   * them.
   */
  private static List<PromptBlocks.Message> inputMessages(Object input) {
    if (input == null) {
      throw ApiError.badRequest("Field required: 'input'", "input");
    }
    List<PromptBlocks.Message> messages = new ArrayList<>();
    if (input instanceof String s) {
      messages.add(new PromptBlocks.Message("user", s));
      return messages;
    }
    if (!(input instanceof JsonArray items) || items.isEmpty()) {
      throw ApiError.badRequest("'input' must be a string or a non-empty array of items", "input");
    }
    for (Object value : items) {
      if (!(value instanceof JsonObject item)) {
        throw ApiError.badRequest("Each input item must be an object", "input");
      }
      Object type = item.getValue("type", "message");
      if ("message".equals(type)) {
        Object role = item.getValue("role");
        if (!(role instanceof String r) || !ROLES.contains(r)) {
          throw ApiError.badRequest(
              "Each input message needs a 'role': user, assistant, system or developer", "input");
        }
        Object content = item.getValue("content");
        RequestParser.contentChars(content, "input"); // validates
        messages.add(new PromptBlocks.Message(r, Tokenizer.contentText(content)));
      } else if ("function_call".equals(type)) {
        messages.add(new PromptBlocks.Message("assistant", string(item, "arguments")));
      } else if ("function_call_output".equals(type)) {
        messages.add(new PromptBlocks.Message("tool", string(item, "output")));
      } else if (!"reasoning".equals(type)) {
        throw ApiError.badRequest("Unsupported input item type: " + type, "input");
      }
    }
    return messages;
  }

  private static String string(JsonObject item, String key) {
    Object value = item.getValue(key);
    if (!(value instanceof String s)) {
      throw ApiError.badRequest(
          "A " + item.getValue("type") + " item needs a string '" + key + "'", "input");
    }
    return s;
  }

  private static String optionalString(JsonObject body, String key) {
    Object value = body.getValue(key);
    if (value != null && !(value instanceof String)) {
      throw ApiError.badRequest("'" + key + "' must be a string", key);
    }
    return (String) value;
  }
}
