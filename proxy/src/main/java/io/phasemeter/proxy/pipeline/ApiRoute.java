package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpMethod;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * One resolved entry of the route table ({@link RouteTable}): how the requests it matches are
 * handled, which pool serves them, whether they wait for a slot, and the bounded names they carry
 * into spans, metrics and records ({@link #path()}, the pattern or {@code other}; {@link
 * #operation()}).
 */
public final class ApiRoute {
  /** How a route's requests are handled. */
  public enum Api {
    /** {@code /v1/chat/completions}: JSON, streamed or not, measured to the token. */
    CHAT,
    /** {@code /v1/completions}: as chat. */
    COMPLETIONS,
    /** {@code /v1/responses}: JSON, streamed with typed events or not, measured to the token. */
    RESPONSES,
    /** Embeddings, pooling, score, rerank: JSON, never streamed, input tokens only. */
    EMBEDDINGS,
    /** Anything else the upstream serves: bytes through both ways, timed as a plain request. */
    PASSTHROUGH,
    /** Refused with 403 before anything else. */
    DENY
  }

  /** The label of a request that matched only the catch-all route. */
  public static final String OTHER = "other";

  /** {@code /v1/chat/completions} as the built-in table has it. */
  public static final ApiRoute CHAT =
      new ApiRoute("/v1/chat/completions", Api.CHAT, "chat", null, true, -1, null, false, false);

  /** {@code /v1/completions} as the built-in table has it. */
  public static final ApiRoute COMPLETIONS =
      new ApiRoute(
          "/v1/completions",
          Api.COMPLETIONS,
          "text_completion",
          null,
          true,
          -1,
          null,
          false,
          false);

  private final String path;
  private final Api api;
  private final String operation;
  private final String pool;
  private final boolean slot;
  private final long maxBodyBytes;
  private final Set<HttpMethod> methods;
  private final String allow;
  private final boolean adminOnly;
  private final boolean modelFromBody;
  private final String postSpanName;

  ApiRoute(
      String path,
      Api api,
      String operation,
      String pool,
      boolean slot,
      long maxBodyBytes,
      List<String> methods,
      boolean adminOnly,
      boolean modelFromBody) {
    this.path = path;
    this.api = api;
    this.operation = operation;
    this.pool = pool;
    this.slot = slot;
    this.maxBodyBytes = maxBodyBytes;
    List<String> allowed =
        methods != null
            ? methods
            : api == Api.PASSTHROUGH || api == Api.DENY ? null : List.of("POST");
    this.methods =
        allowed == null
            ? null
            : allowed.stream()
                .map(m -> HttpMethod.valueOf(m.toUpperCase(Locale.ROOT)))
                .collect(Collectors.toUnmodifiableSet());
    this.allow = allowed == null ? null : String.join(", ", allowed);
    this.adminOnly = adminOnly;
    this.modelFromBody = modelFromBody;
    this.postSpanName = spanName0("POST");
  }

  /**
   * The route: {@code http.route} and the record's {@code route}; the pattern, or {@code other}.
   */
  public String path() {
    return path;
  }

  public Api api() {
    return api;
  }

  /**
   * {@code gen_ai.operation.name} ({@code chat}, {@code text_completion}, {@code responses}, {@code
   * embeddings}, …), or null for a pass-through, which is not a GenAI operation.
   */
  public String operation() {
    return operation;
  }

  /** The configured pool, or null: by the body's model, or the first pool. */
  public String pool() {
    return pool;
  }

  /** Whether requests wait for a slot of their pool. */
  public boolean takesSlot() {
    return slot;
  }

  /** The body limit of this route, or -1 for {@code limits.max_body_bytes}. */
  public long maxBodyBytes() {
    return maxBodyBytes;
  }

  /** The body limit requests of this route get: its own, or {@code listenerMax}. */
  long bodyLimit(long listenerMax) {
    return maxBodyBytes > 0 ? maxBodyBytes : listenerMax;
  }

  /** Whether {@code method} may be used here. */
  public boolean allows(HttpMethod method) {
    return methods == null || methods.contains(method);
  }

  /** The {@code Allow} header for a 405, or null when any method is allowed. */
  public String allowHeader() {
    return allow;
  }

  /** Whether only admin keys may use this route. */
  public boolean adminOnly() {
    return adminOnly;
  }

  /** Whether the body is read whole (JSON, parsed): every handler but a streamed pass-through. */
  public boolean readsBody() {
    return api != Api.PASSTHROUGH || modelFromBody;
  }

  /** A pass-through whose JSON body names the model that routes it. */
  public boolean modelFromBody() {
    return modelFromBody;
  }

  /** Whether requests are measured as model traffic (phase histograms, budgets, live stats). */
  public boolean modelTraffic() {
    return api != Api.PASSTHROUGH && api != Api.DENY;
  }

  /** Whether the response is inspected for tokens: the three generation APIs. */
  public boolean generates() {
    return api == Api.CHAT || api == Api.COMPLETIONS || api == Api.RESPONSES;
  }

  /**
   * The root span's name for {@code method}: {@code "POST /v1/chat/completions"}, or the method.
   */
  public String spanName(String method) {
    return "POST".equals(method) ? postSpanName : spanName0(method);
  }

  private String spanName0(String method) {
    return OTHER.equals(path) ? method : method + " " + path;
  }

  @Override
  public String toString() {
    return "ApiRoute[" + path + " → " + api.name().toLowerCase(Locale.ROOT) + "]";
  }
}
