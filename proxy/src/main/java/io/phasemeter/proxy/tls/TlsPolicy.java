package io.phasemeter.proxy.tls;

import java.util.Set;

/** What TLS the proxy speaks, on its listeners and to its upstreams alike. */
public final class TlsPolicy {
  /**
   * The protocol versions offered and accepted: TLS 1.2 and 1.3 only, as Envoy's and nginx's
   * defaults today.
   */
  public static final Set<String> PROTOCOLS = Set.of("TLSv1.2", "TLSv1.3");

  /**
   * The help text of {@code llm_tls_certificate_expiry_timestamp_seconds}, one gauge for the
   * listeners' served certificates and the pools' client certificates (Prometheus keeps one help
   * text per name).
   */
  static final String EXPIRY_DESCRIPTION =
      "When a certificate expires (its notAfter): the one a listener serves, or a pool's client"
          + " certificate (listener=upstream:<pool>)";

  private TlsPolicy() {}
}
