package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpMethod;
import java.util.Set;

/** {@code http.request.method} as the HTTP conventions bound it: the known methods, or _OTHER. */
final class HttpMethods {
  private static final Set<String> KNOWN =
      Set.of("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH");

  private HttpMethods() {}

  /**
   * The method's name when it is one of HTTP's, else {@code _OTHER}: a label that stays bounded.
   */
  static String label(HttpMethod method) {
    String name = method == null ? null : method.name();
    return name != null && KNOWN.contains(name) ? name : "_OTHER";
  }
}
