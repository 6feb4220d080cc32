package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.config.ProxyConfig;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The public listener's route table (docs/design.md §3): the entries of {@code routes} in
 * proxy.yaml, tried first and in order, then the built-in table ({@link #DEFAULTS}), whose last
 * entry passes every other path through as {@code other}. Built once; matching a normalised path
 * allocates nothing for an exact path.
 */
public final class RouteTable {
  /**
   * vLLM's administrative and development endpoints, and its own metrics and health: never on the
   * public listener unless a route in proxy.yaml allows one (for admin keys, say). Each is denied
   * as a prefix of the path's characters, not only as a whole path: vLLM serves its metrics for
   * every path that starts with {@code /metrics} ({@code /metrics/x}, {@code /metrics.txt}).
   */
  static final List<String> DENIED =
      List.of(
          "/metrics",
          "/health",
          "/ping",
          "/load",
          "/server_info",
          "/is_sleeping",
          "/sleep",
          "/wake_up",
          "/reset_prefix_cache",
          "/reset_mm_cache",
          "/reset_encoder_cache",
          "/start_profile",
          "/stop_profile",
          "/collective_rpc",
          "/scale_elastic_ep",
          "/is_scaling_elastic_ep",
          "/pause",
          "/resume",
          "/is_paused",
          "/v1/load_lora_adapter",
          "/v1/unload_lora_adapter",
          "/update_weights",
          "/init_weight_transfer_engine",
          "/get_world_size",
          // SageMaker's: /invocations runs any generation with no slot or token count, and
          // /adapters loads and unloads LoRA adapters.
          "/invocations",
          "/adapters");

  /** The built-in table, after any routes of proxy.yaml. */
  public static final List<ProxyConfig.Route> DEFAULTS = defaults();

  private final List<Entry> patterns = new ArrayList<>();
  private final Map<String, ApiRoute> exact = new HashMap<>();
  private final List<ApiRoute> routes = new ArrayList<>();
  private final ApiRoute catchAll;
  // The configured routes are the first of patterns; the denied prefixes answer with deny.
  private final int configuredCount;
  private final ApiRoute deny;

  /** The table of {@code configured} routes, then the defaults. */
  public RouteTable(List<ProxyConfig.Route> configured) {
    // Configured routes come first and win, so they are all matched by pattern, in order; the
    // defaults' exact paths go to a map, looked up after them.
    ApiRoute configuredCatchAll = null;
    for (ProxyConfig.Route r : configured) {
      ApiRoute route = resolve(r);
      routes.add(route);
      if (r.path().equals("/**")) {
        // A configured catch-all replaces the built-in one (matched last, after the built-in
        // routes): {path: /**, handler: deny} turns the table into an allowlist.
        configuredCatchAll = configuredCatchAll == null ? route : configuredCatchAll;
      } else {
        patterns.add(new Entry(r.path(), route));
      }
    }
    int firstDefault = patterns.size();
    ApiRoute last = null;
    ApiRoute denied = null;
    for (ProxyConfig.Route r : DEFAULTS) {
      ApiRoute route = resolve(r);
      routes.add(route);
      if (r.path().equals("/**")) {
        last = route;
      } else if (r.path().contains("{") || r.path().contains("**")) {
        patterns.add(new Entry(r.path(), route));
      } else {
        exact.putIfAbsent(r.path(), route);
      }
      if (route.api() == ApiRoute.Api.DENY && denied == null) {
        denied = route;
      }
    }
    this.catchAll = configuredCatchAll != null ? configuredCatchAll : last;
    this.configuredCount = firstDefault;
    this.deny = denied;
  }

  /** The route for a normalised path ({@link PathNormalizer}); never null (the catch-all). */
  public ApiRoute match(String path) {
    for (int i = 0; i < configuredCount; i++) {
      Entry e = patterns.get(i);
      if (e.matches(path)) {
        return e.route;
      }
    }
    ApiRoute r = exact.get(path);
    if (r != null) {
      return r;
    }
    for (int i = configuredCount; i < patterns.size(); i++) {
      Entry e = patterns.get(i);
      if (e.matches(path)) {
        return e.route;
      }
    }
    for (String denied : DENIED) {
      if (path.startsWith(denied)) {
        return deny;
      }
    }
    return catchAll;
  }

  /** Every route, configured first: what the labels of metrics can be. */
  public List<ApiRoute> routes() {
    return List.copyOf(routes);
  }

  static ApiRoute resolve(ProxyConfig.Route r) {
    ApiRoute.Api api =
        switch (r.handler()) {
          case "chat" -> ApiRoute.Api.CHAT;
          case "completions" -> ApiRoute.Api.COMPLETIONS;
          case "responses" -> ApiRoute.Api.RESPONSES;
          case "embeddings" -> ApiRoute.Api.EMBEDDINGS;
          case "passthrough" -> ApiRoute.Api.PASSTHROUGH;
          default -> ApiRoute.Api.DENY;
        };
    String operation =
        switch (api) {
          case CHAT -> "chat";
          case COMPLETIONS -> "text_completion";
          case RESPONSES -> "responses";
          case EMBEDDINGS -> r.operation() != null ? r.operation() : "embeddings";
          default -> null;
        };
    boolean slot =
        r.slot() != null ? r.slot() : api != ApiRoute.Api.PASSTHROUGH && api != ApiRoute.Api.DENY;
    String label = r.path().equals("/**") ? ApiRoute.OTHER : r.path();
    return new ApiRoute(
        label,
        api,
        operation,
        r.pool(),
        slot,
        r.maxBodyBytes() == null ? -1 : r.maxBodyBytes(),
        r.methods(),
        r.adminOnly(),
        r.modelFromBody());
  }

  private static List<ProxyConfig.Route> defaults() {
    List<ProxyConfig.Route> d = new ArrayList<>();
    d.add(ProxyConfig.Route.of("/v1/chat/completions", "chat"));
    d.add(ProxyConfig.Route.of("/v1/completions", "completions"));
    d.add(ProxyConfig.Route.of("/v1/responses", "responses"));
    // A stored response: retrieved, deleted, cancelled. Timed as plain requests; no slot.
    d.add(passthrough("/v1/responses/{id}", List.of("GET", "DELETE"), false, null));
    d.add(passthrough("/v1/responses/{id}/cancel", List.of("POST"), false, null));
    d.add(passthrough("/v1/responses/{id}/input_items", List.of("GET"), false, null));
    d.add(ProxyConfig.Route.of("/v1/embeddings", "embeddings"));
    d.add(embeddings("/pooling", "pooling"));
    d.add(embeddings("/classify", "classify"));
    d.add(embeddings("/v1/classify", "classify"));
    d.add(embeddings("/score", "score"));
    d.add(embeddings("/v1/score", "score"));
    d.add(embeddings("/rerank", "rerank"));
    d.add(embeddings("/v1/rerank", "rerank"));
    d.add(embeddings("/v2/rerank", "rerank"));
    // Tokenisation is quick CPU work on the engine's front end: no generation slot, routed by the
    // model its body names.
    d.add(
        new ProxyConfig.Route(
            "/tokenize", "passthrough", null, false, null, List.of("POST"), false, null, true));
    d.add(
        new ProxyConfig.Route(
            "/detokenize", "passthrough", null, false, null, List.of("POST"), false, null, true));
    // Audio: a multipart upload of up to 25 MB (OpenAI's limit), streamed to the engine, which
    // transcribes it on a generation slot.
    d.add(passthrough("/v1/audio/transcriptions", List.of("POST"), true, 32L << 20));
    d.add(passthrough("/v1/audio/translations", List.of("POST"), true, 32L << 20));
    d.add(passthrough("/version", List.of("GET"), false, null));
    for (String path : DENIED) {
      d.add(ProxyConfig.Route.of(path, "deny"));
    }
    d.add(ProxyConfig.Route.of("/**", "passthrough"));
    return List.copyOf(d);
  }

  private static ProxyConfig.Route passthrough(
      String path, List<String> methods, boolean slot, Long maxBody) {
    return new ProxyConfig.Route(
        path, "passthrough", null, slot, maxBody, methods, false, null, false);
  }

  private static ProxyConfig.Route embeddings(String path, String operation) {
    return new ProxyConfig.Route(
        path, "embeddings", null, null, null, null, false, operation, false);
  }

  /**
   * A pattern, split into segments; {@code {x}} matches one segment, a last {@code **} any rest.
   */
  private static final class Entry {
    private final String[] segments;
    private final boolean rest;
    private final ApiRoute route;

    Entry(String pattern, ApiRoute route) {
      String[] s = pattern.equals("/") ? new String[0] : pattern.substring(1).split("/", -1);
      this.rest = s.length > 0 && s[s.length - 1].equals("**");
      this.segments = rest ? java.util.Arrays.copyOf(s, s.length - 1) : s;
      this.route = route;
    }

    boolean matches(String path) {
      int pos = 1;
      for (String seg : segments) {
        if (pos > path.length()) {
          return false;
        }
        int slash = path.indexOf('/', pos);
        int end = slash < 0 ? path.length() : slash;
        if (end == pos) {
          return false;
        }
        if (seg.charAt(0) != '{' && !path.regionMatches(pos, seg, 0, seg.length())
            || seg.charAt(0) != '{' && end - pos != seg.length()) {
          return false;
        }
        pos = end + 1;
      }
      return rest || pos > path.length();
    }
  }
}
