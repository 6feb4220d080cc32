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
    this(auth, defaultMaxTokens, Long.MAX_VALUE);
  }

  /** {@code listenerMaxBody}: {@code limits.max_body_bytes}, for routes without their own. */
  PreparePhase(
      AuthPhase auth,
      java.util.function.ToLongFunction<String> defaultMaxTokens,
      long listenerMaxBody) {
    this.auth = auth;
    this.defaultMaxTokens = defaultMaxTokens;
    this.listenerMaxBody = listenerMaxBody;
  }

  private final long listenerMaxBody;

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
    if (ctx.route().api() == ApiRoute.Api.PASSTHROUGH) {
      preparePassthrough(ctx);
      return;
    }
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
    ApiRoute.Api api = ctx.route().api();
    switch (api) {
      case CHAT -> {
        JsonNode messages = root.get("messages");
        if (messages == null || !messages.isArray() || messages.isEmpty()) {
          throw ProxyFailure.ofParam(
              ProxyFailure.Kind.INVALID_REQUEST,
              "'messages' must be a non-empty array.",
              "messages");
        }
      }
      case COMPLETIONS -> {
        JsonNode prompt = root.get("prompt");
        if (prompt == null || !(prompt.isTextual() || prompt.isArray())) {
          throw ProxyFailure.ofParam(
              ProxyFailure.Kind.INVALID_REQUEST,
              "'prompt' must be a string, an array of strings or an array of token ids.",
              "prompt");
        }
      }
      case RESPONSES -> {
        JsonNode input = root.get("input");
        if (input == null || !(input.isTextual() || input.isArray())) {
          throw ProxyFailure.ofParam(
              ProxyFailure.Kind.INVALID_REQUEST,
              "'input' must be a string or an array of input items.",
              "input");
        }
      }
      case EMBEDDINGS -> {
        JsonNode input = root.get("input");
        if ("embeddings".equals(ctx.route().operation())
            && (input == null || !(input.isTextual() || input.isArray()))) {
          throw ProxyFailure.ofParam(
              ProxyFailure.Kind.INVALID_REQUEST,
              "'input' must be a string, an array of strings or an array of token ids.",
              "input");
        }
      }
      default -> throw new IllegalStateException("no body to prepare for " + api);
    }
    JsonNode stream = root.get("stream");
    if (stream != null && !stream.isNull() && !stream.isBoolean()) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_REQUEST, "'stream' must be a boolean.", "stream");
    }
    // Embeddings and pooling answer whole, whatever a client asks.
    boolean streamed = api != ApiRoute.Api.EMBEDDINGS && stream != null && stream.asBoolean(false);
    // Recorded now: a request refused below is still known as streamed or not (records, metrics).
    ctx.requested(modelName, streamed);
    if (api == ApiRoute.Api.RESPONSES) {
      JsonNode background = root.get("background");
      if (background != null && !background.isNull() && !background.isBoolean()) {
        throw ProxyFailure.ofParam(
            ProxyFailure.Kind.INVALID_REQUEST, "'background' must be a boolean.", "background");
      }
      if (background != null && background.asBoolean(false)) {
        // Answered at once with a queued response; the generation happens later, out of sight.
        ctx.relayedPlain();
      }
    }
    // Both fields are checked; the larger bounds the output (engines differ in which one wins).
    long maxTokens = -1;
    for (String field : OUTPUT_BOUNDS) {
      JsonNode v = root.get(field);
      if (v != null && !v.isNull()) {
        maxTokens = Math.max(maxTokens, boundedInteger(v, field, 0, ProxyConfig.MAX_TOKENS_BOUND));
      }
    }
    JsonNode n = root.get("n");
    long choices = n == null || n.isNull() ? 1 : boundedInteger(n, "n", 1, MAX_CHOICES);
    rejectNonFinite(root);
    if (ctx.apiKey() != null) {
      // Taken from the key's bucket by auth once the phase's work is done (AuthPhase.admitTokens).
      if (api == ApiRoute.Api.EMBEDDINGS) {
        // Pooling generates nothing: its input is its whole cost.
        ctx.estimated(estimateAnyTokens(root));
      } else {
        // The output is bounded by max_tokens per choice; without it, by the pool's default.
        long output = maxTokens >= 0 ? maxTokens : defaultMaxTokens.applyAsLong(modelName);
        long completions = choices * promptCount(ctx.route(), root);
        ctx.estimated(estimateInputTokens(ctx.route(), root) + completions * output);
      }
    }
    Buffer upstreamBody = ctx.body();
    boolean clientWantsUsage = false;
    // The Responses API reports usage in its last event whatever the client asked.
    if (streamed && api != ApiRoute.Api.RESPONSES) {
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

  /** The fields that bound a request's output, by API; the larger wins. */
  private static final String[] OUTPUT_BOUNDS = {
    "max_tokens", "max_completion_tokens", "max_output_tokens"
  };

  /**
   * A pass-through: nothing is parsed unless the route routes by the body's model; a declared
   * length over the route's limit is refused before a byte is read.
   */
  private void preparePassthrough(RequestContext ctx) {
    if (!ctx.route().modelFromBody()) {
      ctx.declared(
          ReceivePhase.declaredLength(ctx.request(), ctx.route().bodyLimit(listenerMaxBody)));
      return;
    }
    // Routed by the model its JSON names; a body that is not such JSON is the upstream's to judge,
    // and goes to the route's pool.
    String model = null;
    String contentType = ctx.request().getHeader("content-type");
    if (ctx.body() != null && (contentType == null || contentType.toLowerCase().contains("json"))) {
      try {
        JsonNode root = JSON.readTree(ctx.body().getBytes());
        JsonNode m = root == null ? null : root.get("model");
        model = m != null && m.isTextual() && !m.asText().isBlank() ? m.asText() : null;
      } catch (IOException e) {
        model = null;
      }
    }
    ctx.requested(model, false);
    ctx.prepared(-1, ctx.body() == null ? Buffer.buffer() : ctx.body(), false);
  }

  /**
   * How many prompts a request carries: a completions request with a list of strings or of token-id
   * lists generates for each; anything else is one.
   */
  static long promptCount(ApiRoute route, JsonNode root) {
    if (route.api() != ApiRoute.Api.COMPLETIONS) {
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
    if (route.api() == ApiRoute.Api.RESPONSES) {
      // Text at the usual rate, a message's overhead per input item, as for chat.
      long chars = textLength(root.get("instructions"));
      long items = 0;
      JsonNode input = root.get("input");
      if (input.isTextual()) {
        chars += input.asText().length();
        items = 1;
      } else {
        for (JsonNode item : input) {
          items++;
          chars += item.isTextual() ? item.asText().length() : textLength(item.get("content"));
        }
      }
      return items * TOKENS_PER_MESSAGE + ceilDiv(chars, CHARS_PER_TOKEN);
    }
    if (route.api() == ApiRoute.Api.CHAT) {
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

  /**
   * The input tokens of a pooling request (embeddings, score, rerank, classify), whose inputs sit
   * under fields that differ by endpoint: every string at {@value #CHARS_PER_TOKEN} characters per
   * token and every integer (a token id) as one, anywhere in the body but {@code model}.
   */
  static long estimateAnyTokens(JsonNode root) {
    long[] chars = new long[1];
    long[] ids = new long[1];
    var it = root.fields();
    while (it.hasNext()) {
      var e = it.next();
      if (!e.getKey().equals("model")) {
        count(e.getValue(), chars, ids, 0);
      }
    }
    return ids[0] + ceilDiv(chars[0], CHARS_PER_TOKEN);
  }

  private static void count(JsonNode n, long[] chars, long[] ids, int depth) {
    if (n.isTextual()) {
      chars[0] += n.asText().length();
    } else if (n.isIntegralNumber()) {
      ids[0]++;
    } else if (n.isContainerNode() && depth < 8) {
      for (JsonNode child : n) {
        count(child, chars, ids, depth + 1);
      }
    }
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
