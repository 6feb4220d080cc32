package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.DecodeException;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.charset.StandardCharsets;

/**
 * Validates an OpenAI request body the way vLLM does and counts its prompt tokens.
 *
 * <p>Prompt tokens: a token-id prompt counts exactly its ids. Text is estimated as {@code
 * ceil(chars / 4)} (at least 1); a chat prompt is {@code 3 + Σ (4 + ceil(chars(content) / 4))} over
 * its messages, the constants standing for the chat template's role and turn markers. With the
 * prefix cache on, it also hashes the prompt's full blocks of those tokens ({@link PromptBlocks}).
 */
final class RequestParser {
  static final int CHAT_PRIMING_TOKENS = 3;
  static final int CHAT_MESSAGE_OVERHEAD_TOKENS = 4;

  private final SimulatorConfig config;

  RequestParser(SimulatorConfig config) {
    this.config = config;
  }

  /** Whether prompts are hashed into blocks for the prefix cache (it is on). */
  boolean prefixCaching() {
    return config.prefixCacheBlocks() > 0;
  }

  ParsedRequest parse(Endpoint endpoint, Buffer raw) {
    JsonObject body = object(raw);
    String model = model(body);

    int promptTokens;
    Object promptKey;
    if (endpoint == Endpoint.CHAT) {
      promptKey = body.getValue("messages");
      promptTokens = chatPromptTokens(promptKey);
    } else {
      promptKey = body.getValue("prompt");
      promptTokens = completionPromptTokens(promptKey);
    }

    Integer n = optionalInt(body, "n", 1);
    if (n != null && n != 1) {
      throw ApiError.badRequest("The simulator supports only n=1", "n");
    }

    Integer requested = null;
    if (endpoint == Endpoint.CHAT) {
      requested = optionalInt(body, "max_completion_tokens", 1);
    }
    if (requested == null) {
      requested = optionalInt(body, "max_tokens", 1);
    }
    Integer min = optionalInt(body, "min_tokens", 0);
    int minTokens = min == null ? 0 : min;
    boolean ignoreEos = optionalBool(body, "ignore_eos");
    boolean stream = optionalBool(body, "stream");

    int maxTokens =
        maxTokens(
            promptTokens,
            requested,
            endpoint == Endpoint.CHAT && body.containsKey("max_completion_tokens")
                ? "max_completion_tokens"
                : "max_tokens");
    if (minTokens > maxTokens) {
      throw ApiError.badRequest(
          "min_tokens must be less than or equal to max_tokens="
              + maxTokens
              + ", got "
              + minTokens
              + ".",
          "min_tokens");
    }

    String cacheSalt = cacheSalt(body);
    long[] blocks = PromptBlocks.NONE;
    if (prefixCaching()) {
      blocks =
          endpoint == Endpoint.CHAT
              ? PromptBlocks.chat(
                  PromptBlocks.messages((JsonArray) promptKey), promptTokens, cacheSalt)
              : completionBlocks(promptKey, cacheSalt);
    }

    boolean includeUsage = false;
    Object options = body.getValue("stream_options");
    if (options != null) {
      if (!(options instanceof JsonObject opts)) {
        throw ApiError.badRequest("'stream_options' must be an object", "stream_options");
      }
      if (!stream) {
        throw ApiError.badRequest(
            "Stream options can only be defined when `stream=True`.", "stream_options");
      }
      includeUsage = optionalBool(opts, "include_usage");
    }

    String key =
        endpoint.name()
            + '\u0000'
            + model
            + '\u0000'
            + (promptKey instanceof JsonObject || promptKey instanceof JsonArray
                ? promptKey.toString()
                : String.valueOf(promptKey))
            + '\u0000'
            + maxTokens
            + '\u0000'
            + minTokens
            + '\u0000'
            + ignoreEos;
    return new ParsedRequest(
        endpoint,
        model,
        promptTokens,
        maxTokens,
        minTokens,
        ignoreEos,
        stream,
        includeUsage,
        fnv64(key),
        blocks);
  }

  /**
   * vLLM's {@code cache_salt}: a non-empty string that seeds the prompt's block hashes, or null.
   */
  static String cacheSalt(JsonObject body) {
    Object salt = body.getValue("cache_salt");
    if (salt == null) {
      return null;
    }
    if (!(salt instanceof String s) || s.isEmpty()) {
      throw ApiError.badRequest(
          "Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    return s;
  }

  /** The blocks of a completion's prompt, already validated: text or token ids, maybe in a list. */
  private static long[] completionBlocks(Object prompt, String cacheSalt) {
    Object one = prompt;
    if (prompt instanceof JsonArray list && !(list.getValue(0) instanceof Number)) {
      one = list.getValue(0);
    }
    return one instanceof String s
        ? PromptBlocks.text(s, cacheSalt)
        : PromptBlocks.tokenIds((JsonArray) one, cacheSalt);
  }

  /** The body as a JSON object, or vLLM's 400. */
  static JsonObject object(Buffer raw) {
    String text = raw == null ? "" : raw.toString().strip();
    if (!text.startsWith("{")) {
      if (text.startsWith("[") || text.isEmpty()) {
        throw ApiError.badRequest("Request body must be a JSON object", null);
      }
    }
    try {
      return new JsonObject(text);
    } catch (DecodeException | ClassCastException e) {
      throw ApiError.badRequest("Invalid JSON in request body: " + firstLine(e.getMessage()), null);
    }
  }

  /** The request's {@code model}, the first served one when absent; 404 when not served. */
  String model(JsonObject body) {
    Object modelValue = body.getValue("model");
    String model;
    if (modelValue == null) {
      model = config.models().get(0);
    } else if (modelValue instanceof String s) {
      model = s;
    } else {
      throw ApiError.badRequest("'model' must be a string", "model");
    }
    if (!config.models().contains(model)) {
      throw ApiError.notFound("The model `" + model + "` does not exist.", "model");
    }
    return model;
  }

  /**
   * The completion budget: {@code requested} when it fits the context, the configured default
   * (capped by the context) when absent; vLLM's 400 when the prompt or the sum does not fit.
   */
  int maxTokens(int promptTokens, Integer requested, String param) {
    int maxModelLen = config.maxModelLen();
    if (promptTokens >= maxModelLen) {
      throw ApiError.badRequest(
          "This model's maximum context length is "
              + maxModelLen
              + " tokens. However, your request has "
              + promptTokens
              + " input tokens. Please reduce the length of the input messages.",
          null);
    }
    if (requested == null) {
      return Math.min(config.defaultMaxTokens(), maxModelLen - promptTokens);
    }
    if ((long) promptTokens + requested > maxModelLen) {
      throw ApiError.badRequest(
          "This model's maximum context length is "
              + maxModelLen
              + " tokens. However, you requested "
              + ((long) promptTokens + requested)
              + " tokens ("
              + promptTokens
              + " in the messages, "
              + requested
              + " in the completion). Please reduce the length of the messages or completion.",
          param);
    }
    return requested;
  }

  static int textTokens(String text) {
    return Math.max(1, (text.length() + 3) / 4);
  }

  /** One chat message's tokens: the template's markers plus {@code ceil(chars / 4)}. */
  static long messageTokens(long chars) {
    return CHAT_MESSAGE_OVERHEAD_TOKENS + (chars + 3) / 4;
  }

  private static int chatPromptTokens(Object messages) {
    if (messages == null) {
      throw ApiError.badRequest("Field required: 'messages'", "messages");
    }
    if (!(messages instanceof JsonArray list) || list.isEmpty()) {
      throw ApiError.badRequest("'messages' must be a non-empty array", "messages");
    }
    long tokens = CHAT_PRIMING_TOKENS;
    for (Object item : list) {
      if (!(item instanceof JsonObject message)) {
        throw ApiError.badRequest("Each message must be an object", "messages");
      }
      if (!(message.getValue("role") instanceof String)) {
        throw ApiError.badRequest("Each message needs a string 'role'", "messages");
      }
      tokens += messageTokens(contentChars(message.getValue("content"), "messages"));
    }
    return (int) Math.min(Integer.MAX_VALUE, tokens);
  }

  /** The characters of a message's content: a string, or the {@code text} of its parts. */
  static long contentChars(Object content, String param) {
    if (content == null) {
      return 0;
    }
    if (content instanceof String s) {
      return s.length();
    }
    if (content instanceof JsonArray parts) {
      long chars = 0;
      for (Object part : parts) {
        if (part instanceof JsonObject p && p.getValue("text") instanceof String t) {
          chars += t.length();
        } else if (!(part instanceof JsonObject)) {
          throw ApiError.badRequest("Each content part must be an object", param);
        }
      }
      return chars;
    }
    throw ApiError.badRequest("'content' must be a string or an array of parts", param);
  }

  private static int completionPromptTokens(Object prompt) {
    if (prompt == null) {
      throw ApiError.badRequest("Field required: 'prompt'", "prompt");
    }
    if (prompt instanceof String s) {
      return requireNonEmpty(s.isEmpty() ? 0 : textTokens(s));
    }
    if (prompt instanceof JsonArray list) {
      if (list.isEmpty()) {
        throw ApiError.badRequest("Prompt cannot be empty", "prompt");
      }
      Object first = list.getValue(0);
      if (first instanceof String || first instanceof JsonArray) {
        if (list.size() != 1) {
          throw ApiError.badRequest(
              "The simulator supports a single prompt per request, got " + list.size(), "prompt");
        }
        if (first instanceof String s) {
          return requireNonEmpty(s.isEmpty() ? 0 : textTokens(s));
        }
        return requireNonEmpty(tokenIds((JsonArray) first));
      }
      return requireNonEmpty(tokenIds(list));
    }
    throw ApiError.badRequest(
        "'prompt' must be a string, an array of token ids, or a list of one of those", "prompt");
  }

  private static int tokenIds(JsonArray ids) {
    return tokenIds(ids, "prompt");
  }

  static int tokenIds(JsonArray ids, String param) {
    for (Object id : ids) {
      if (!isTokenId(id)) {
        throw ApiError.badRequest("Token ids must be non-negative integers", param);
      }
    }
    return ids.size();
  }

  static boolean isTokenId(Object id) {
    return (id instanceof Integer || id instanceof Long) && ((Number) id).longValue() >= 0;
  }

  private static int requireNonEmpty(int tokens) {
    if (tokens == 0) {
      throw ApiError.badRequest("Prompt cannot be empty", "prompt");
    }
    return tokens;
  }

  static Integer optionalInt(JsonObject body, String key, int min) {
    Object value = body.getValue(key);
    if (value == null) {
      return null;
    }
    if (!(value instanceof Integer || value instanceof Long)) {
      throw ApiError.badRequest("'" + key + "' must be an integer", key);
    }
    long v = ((Number) value).longValue();
    if (v < min) {
      throw ApiError.badRequest(key + " must be at least " + min + ", got " + v + ".", key);
    }
    return (int) Math.min(Integer.MAX_VALUE, v);
  }

  static boolean optionalBool(JsonObject body, String key) {
    return optionalBool(body, key, false);
  }

  static boolean optionalBool(JsonObject body, String key, boolean absent) {
    Object value = body.getValue(key);
    if (value == null) {
      return absent;
    }
    if (!(value instanceof Boolean b)) {
      throw ApiError.badRequest("'" + key + "' must be a boolean", key);
    }
    return b;
  }

  private static String firstLine(String message) {
    if (message == null) {
      return "";
    }
    int nl = message.indexOf('\n');
    return nl < 0 ? message : message.substring(0, nl);
  }

  static long fnv64(String s) {
    long h = 0xcbf29ce484222325L;
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    for (byte b : bytes) {
      h ^= b & 0xff;
      h *= 0x100000001b3L;
    }
    return h;
  }
}
