package io.phasemeter.proxy.tls;

import java.util.Set;

/** What TLS the proxy speaks, on its listeners and to its upstreams alike. */
public final class TlsPolicy {
  /**
   * The protocol versions offered and accepted: TLS 1.2 and 1.3 only, as Envoy's and nginx's
   * defaults today.
   */
  public static final Set<String> PROTOCOLS = Set.of("TLSv1.2", "TLSv1.3");

  private TlsPolicy() {}
}
