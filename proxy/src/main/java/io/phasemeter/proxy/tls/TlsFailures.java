package io.phasemeter.proxy.tls;

import java.security.cert.CertPathBuilderException;
import java.security.cert.CertPathValidatorException;
import java.security.cert.CertificateException;
import java.util.Locale;
import javax.net.ssl.SSLException;

/**
 * Says what went wrong when TLS to an upstream failed, in words an operator can act on: the
 * upstream's certificate is not trusted, does not name the host, the upstream refused the proxy's
 * client certificate, or the handshake failed otherwise. The words name configuration keys, never
 * certificate content, so they may go to the client, a log line and a span.
 */
public final class TlsFailures {
  private TlsFailures() {}

  /** What failed, or null when {@code failure} is not a TLS failure. */
  public static String describe(Throwable failure) {
    SSLException ssl = null;
    boolean untrusted = false;
    boolean name = false;
    for (Throwable t = failure; t != null && t != t.getCause(); t = t.getCause()) {
      if (t instanceof SSLException s && ssl == null) {
        ssl = s;
      }
      if (t instanceof CertPathBuilderException || t instanceof CertPathValidatorException) {
        untrusted = true;
      }
      String m = t.getMessage() == null ? "" : t.getMessage().toLowerCase(Locale.ROOT);
      if (t instanceof CertificateException
          && (m.contains("no subject alternative") || m.contains("no name matching"))) {
        name = true;
      }
    }
    if (ssl == null) {
      return null;
    }
    String m = ssl.getMessage() == null ? "" : ssl.getMessage().toLowerCase(Locale.ROOT);
    if (name) {
      return "the upstream's certificate does not name its host (pools[].tls.verify_hostname)";
    }
    if (untrusted) {
      return "the upstream's certificate is not signed by a trusted CA (pools[].tls.ca_file)";
    }
    if (m.contains("certificate_required")
        || m.contains("bad_certificate")
        || m.contains("unknown_ca")
        || m.contains("certificate_unknown")
        || m.contains("handshake_failure") && m.contains("fatal alert")) {
      return "the upstream refused the proxy's client certificate or its absence"
          + " (pools[].tls.cert_file)";
    }
    if (m.contains("protocol_version") || m.contains("no appropriate protocol")) {
      return "no TLS version in common (the proxy speaks TLS 1.2 and 1.3)";
    }
    return "the TLS handshake with the upstream failed";
  }

  /**
   * The JDK's own words for the failure, for the log line beside {@link #describe}: exception class
   * and message of the innermost TLS or certificate exception.
   */
  public static String detail(Throwable failure) {
    Throwable pick = failure;
    for (Throwable t = failure; t != null && t != t.getCause(); t = t.getCause()) {
      if (t instanceof SSLException || t instanceof CertificateException) {
        pick = t;
      }
    }
    return pick.getClass().getSimpleName() + ": " + pick.getMessage();
  }
}
