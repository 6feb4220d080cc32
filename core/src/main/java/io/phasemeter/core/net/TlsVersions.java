package io.phasemeter.core.net;

/**
 * The one spelling of a TLS version in what Phasemeter writes (spans, records, conditions): the
 * OpenTelemetry attribute {@code tls.protocol.version}'s, {@code 1.2} and {@code 1.3}, from the
 * JDK's {@code SSLSession.getProtocol()} ({@code TLSv1.2}, {@code TLSv1.3}).
 */
public final class TlsVersions {
  private static final String TLS = "TLSv";

  private TlsVersions() {}

  /**
   * {@code jdkProtocol} as OpenTelemetry writes it: {@code TLSv1.3} is {@code 1.3}, {@code TLSv1.2}
   * is {@code 1.2} (and so on for older TLS versions); null for null, or for anything that is not a
   * TLS version (the JDK's {@code NONE} before a handshake, SSLv3).
   */
  public static String otel(String jdkProtocol) {
    // The versions a listener or upstream allows are constants: a record keeps no string of its
    // own.
    if ("TLSv1.3".equals(jdkProtocol)) {
      return "1.3";
    }
    if ("TLSv1.2".equals(jdkProtocol)) {
      return "1.2";
    }
    if (jdkProtocol == null
        || !jdkProtocol.startsWith(TLS)
        || jdkProtocol.length() == TLS.length()) {
      return null;
    }
    String version = jdkProtocol.substring(TLS.length());
    for (int i = 0; i < version.length(); i++) {
      char c = version.charAt(i);
      if (!(c >= '0' && c <= '9') && c != '.') {
        return null;
      }
    }
    return version;
  }
}
