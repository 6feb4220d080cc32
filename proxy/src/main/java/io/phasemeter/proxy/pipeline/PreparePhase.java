package io.phasemeter.proxy.pipeline;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.opentelemetry.api.trace.Span;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.buffer.Buffer;
import java.io.IOException;

/**
 * Phase {@code prepare}: parses and validates the JSON body and rewrites it for the upstream. The
 * only rewrite: a streamed request that did not ask for usage gets {@code
 * stream_options.include_usage: true} so token counts are known; the extra usage chunk is removed
 * again on the way back. Otherwise the client's bytes are forwarded unchanged.
 */
final class PreparePhase {
  /** Characters per token when only text is known: the usual rule of thumb for English. */
  static final int CHARS_PER_TOKEN = 4;

  /** Tokens a chat message costs beyond its text (role and separators). */
  static final int TOKENS_PER_MESSAGE = 4;

  /** The most choices a request may ask for ({@code n}), as OpenAI's API allows. */
  static final int MAX_CHOICES = 128;

  private final AuthPhase auth;
  private final java.util.function.ToLongFunction<String> defaultMaxTokens;

  /**
   * {@code defaultMaxTokens}: by model, the output estimate of a request that sets no {@code
   * max_tokens} (its pool's {@code default_max_tokens}).
   */
  PreparePhase(AuthPhase auth, java.util.function.ToLongFunction<String> defaultMaxTokens) {
    this.auth = auth;
    this.defaultMaxTokens = defaultMaxTokens;
  }

  static final ObjectMapper JSON =
      new ObjectMapper(
          JsonFactory.builder()
              .disable(StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION)
              .streamReadConstraints(
                  StreamReadConstraints.builder()
                      .maxNestingDepth(128)
                      .maxStringLength(64 << 20)
                      .build())
              .build());

  /**
   * Parses, validates and rewrites the received body; throws the refusal. {@code span} is the
   * phase's, opened by the pipeline.
   */
  void prepare(RequestContext ctx, Span span) {
    String contentType = ctx.request().getHeader("content-type");
    if (contentType != null && !contentType.toLowerCase().contains("json")) {
      throw ProxyFailure.of(
          ProxyFailure.Kind.UNSUPPORTED_MEDIA_TYPE,
          "Content-Type must be application/json (got " + sanitize(contentType) + ").");
    }
    JsonNode root;
    try {
      root = JSON.readTree(ctx.body().getBytes());
    } catch (JsonProcessingException e) {
      String where =
          e.getLocation() == null
              ? ""
              : " (line "
                  + e.getLocation().getLineNr()
                  + ", column "
                  + e.getLocation().getColumnNr()
                  + ")";
      throw ProxyFailure.of(
          ProxyFailure.Kind.INVALID_JSON,
          "We could not parse the JSON body of your request" + where + ".");
    } catch (IOException e) {
      throw ProxyFailure.of(ProxyFailure.Kind.INVALID_JSON, "The request body could not be read.");
    }
    if (root == null || !root.isObject()) {
      throw ProxyFailure.of(
          ProxyFailure.Kind.INVALID_REQUEST, "The request body must be a JSON object.");
    }
    JsonNode model = root.get("model");
    if (model == null || !model.isTextual() || model.asText().isBlank()) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_REQUEST,
          "You must provide a model parameter (a non-empty string).",
          "model");
    }
    String modelName = model.asText();
    if (ctx.route() == ApiRoute.CHAT) {
      JsonNode messages = root.get("messages");
      if (messages == null || !messages.isArray() || messages.isEmpty()) {
        throw ProxyFailure.ofParam(
            ProxyFailure.Kind.INVALID_REQUEST, "'messages' must be a non-empty array.", "messages");
      }
    } else {
      JsonNode prompt = root.get("prompt");
      if (prompt == null || !(prompt.isTextual() || prompt.isArray())) {
        throw ProxyFailure.ofParam(
            ProxyFailure.Kind.INVALID_REQUEST,
            "'prompt' must be a string, an array of strings or an array of token ids.",
            "prompt");
      }
    }
    JsonNode stream = root.get("stream");
    if (stream != null && !stream.isNull() && !stream.isBoolean()) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_REQUEST, "'stream' must be a boolean.", "stream");
    }
    boolean streamed = stream != null && stream.asBoolean(false);
    // Recorded now: a request refused below is still known as streamed or not (records, metrics).
    ctx.requested(modelName, streamed);
    // Both fields are checked; the larger bounds the output (engines differ in which one wins).
    long maxTokens = -1;
    for (String field : new String[] {"max_tokens", "max_completion_tokens"}) {
      JsonNode v = root.get(field);
      if (v != null && !v.isNull()) {
        maxTokens = Math.max(maxTokens, boundedInteger(v, field, 0, ProxyConfig.MAX_TOKENS_BOUND));
      }
    }
    JsonNode n = root.get("n");
    long choices = n == null || n.isNull() ? 1 : boundedInteger(n, "n", 1, MAX_CHOICES);
    rejectNonFinite(root);
    if (ctx.apiKey() != null) {
      // The output is bounded by max_tokens per choice; without it, by the pool's default.
      long output = maxTokens >= 0 ? maxTokens : defaultMaxTokens.applyAsLong(modelName);
      long completions = choices * promptCount(ctx.route(), root);
      auth.admitTokens(ctx, estimateInputTokens(ctx.route(), root) + completions * output, span);
    }
    Buffer upstreamBody = ctx.body();
    boolean clientWantsUsage = false;
    if (streamed) {
      JsonNode options = root.get("stream_options");
      JsonNode include = options == null ? null : options.get("include_usage");
      clientWantsUsage = include != null && include.asBoolean(false);
      if (!clientWantsUsage) {
        ObjectNode obj = (ObjectNode) root;
        ObjectNode so =
            options != null && options.isObject()
                ? (ObjectNode) options
                : obj.putObject("stream_options");
        so.put("include_usage", true);
        try {
          // Only the rewrite is sent: the context lets the client's bytes go (see prepared).
          upstreamBody = Buffer.buffer(JSON.writeValueAsBytes(obj));
        } catch (JsonProcessingException e) {
          throw ProxyFailure.of(ProxyFailure.Kind.INTERNAL, "Could not rewrite the request.");
        }
      }
    }
    ctx.prepared(maxTokens, upstreamBody, clientWantsUsage);
  }

  /**
   * How many prompts a request carries: a completions request with a list of strings or of token-id
   * lists generates for each; anything else is one.
   */
  static long promptCount(ApiRoute route, JsonNode root) {
    if (route == ApiRoute.CHAT) {
      return 1;
    }
    JsonNode prompt = root.get("prompt");
    if (prompt == null || !prompt.isArray() || prompt.isEmpty()) {
      return 1;
    }
    long lists = 0;
    for (JsonNode p : prompt) {
      if (p.isTextual() || p.isArray()) {
        lists++;
      }
    }
    return Math.max(1, lists);
  }

  /**
   * A whole number in {@code [min, max]}, or a 400 naming {@code field}: a value no engine could
   * honour must not reach the arithmetic of estimates and limits.
   */
  private static long boundedInteger(JsonNode v, String field, long min, long max) {
    if (!v.isIntegralNumber() || !v.canConvertToLong() || v.asLong() < min || v.asLong() > max) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_REQUEST,
          "'" + field + "' must be an integer between " + min + " and " + max + ".",
          field);
    }
    return v.asLong();
  }

  /**
   * Refuses a number JSON cannot carry back: {@code 1e400} parses as infinity, and re-written for
   * the upstream it would become a string. The 400 names where it was.
   */
  private static void rejectNonFinite(JsonNode root) {
    String path = nonFinite(root);
    if (path != null) {
      String field = path.isEmpty() ? "body" : path;
      field = field.length() > 100 ? field.substring(0, 100) + "…" : field;
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_REQUEST, "'" + field + "' must be a finite number.", field);
    }
  }

  /**
   * The path below {@code node} of its first non-finite number ("" for {@code node} itself), or
   * null when there is none. The path is built only on the way back from a find, so a valid body (a
   * token-id prompt of thousands of numbers) costs a walk and nothing else.
   */
  private static String nonFinite(JsonNode node) {
    if (node.isFloatingPointNumber()) {
      return Double.isFinite(node.asDouble()) || node.isBigDecimal() ? null : "";
    }
    if (node.isObject()) {
      var it = node.fields();
      while (it.hasNext()) {
        var e = it.next();
        JsonNode v = e.getValue();
        String below = v.isContainerNode() || v.isNumber() ? nonFinite(v) : null;
        if (below != null) {
          return below.isEmpty() || below.startsWith("[")
              ? e.getKey() + below
              : e.getKey() + "." + below;
        }
      }
    } else if (node.isArray()) {
      for (int i = 0; i < node.size(); i++) {
        JsonNode v = node.get(i);
        String below = v.isContainerNode() || v.isNumber() ? nonFinite(v) : null;
        if (below != null) {
          return "[" + i + "]" + (below.isEmpty() || below.startsWith("[") ? below : "." + below);
        }
      }
    }
    return null;
  }

  /**
   * The input tokens a request will count for, estimated before the upstream says: token-id prompts
   * exactly, text at {@value #CHARS_PER_TOKEN} characters per token (rounded up), plus {@value
   * #TOKENS_PER_MESSAGE} per chat message. The usage the upstream reports settles it later.
   */
  static long estimateInputTokens(ApiRoute route, JsonNode root) {
    if (route == ApiRoute.CHAT) {
      long chars = 0;
      long messages = 0;
      for (JsonNode m : root.get("messages")) {
        messages++;
        chars += textLength(m.get("content"));
      }
      return messages * TOKENS_PER_MESSAGE + ceilDiv(chars, CHARS_PER_TOKEN);
    }
    JsonNode prompt = root.get("prompt");
    if (prompt.isTextual()) {
      return ceilDiv(prompt.asText().length(), CHARS_PER_TOKEN);
    }
    long tokens = 0;
    for (JsonNode p : prompt) {
      if (p.isIntegralNumber()) {
        tokens++;
      } else if (p.isArray()) {
        tokens += p.size();
      } else if (p.isTextual()) {
        tokens += ceilDiv(p.asText().length(), CHARS_PER_TOKEN);
      }
    }
    return tokens;
  }

  /** The text length of a message's content: a string, or the text parts of an array. */
  private static long textLength(JsonNode content) {
    if (content == null || content.isNull()) {
      return 0;
    }
    if (content.isTextual()) {
      return content.asText().length();
    }
    long n = 0;
    if (content.isArray()) {
      for (JsonNode part : content) {
        JsonNode text = part.get("text");
        if (text != null && text.isTextual()) {
          n += text.asText().length();
        }
      }
    }
    return n;
  }

  private static long ceilDiv(long a, long b) {
    return (a + b - 1) / b;
  }

  private static String sanitize(String headerValue) {
    String v = headerValue.length() > 64 ? headerValue.substring(0, 64) : headerValue;
    return v.replaceAll("[^\\x20-\\x7e]", "?");
  }
}
