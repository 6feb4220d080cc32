package io.phasemeter.proxy.pipeline;

/** The OpenAI endpoints the proxy measures. */
public enum ApiRoute {
  CHAT("/v1/chat/completions", "chat"),
  COMPLETIONS("/v1/completions", "text_completion");

  private static final ApiRoute[] ROUTES = values();

  private final String path;
  private final String operation;
  private final String spanName;

  ApiRoute(String path, String operation) {
    this.path = path;
    this.operation = operation;
    this.spanName = "POST " + path;
  }

  /** The route, also {@code http.route}. */
  public String path() {
    return path;
  }

  /** {@code gen_ai.operation.name}. */
  public String operation() {
    return operation;
  }

  /** The root span's name. */
  public String spanName() {
    return spanName;
  }

  /** The route for a request path, or null. */
  public static ApiRoute forPath(String path) {
    for (ApiRoute r : ROUTES) {
      if (r.path.equals(path)) {
        return r;
      }
    }
    return null;
  }
}
