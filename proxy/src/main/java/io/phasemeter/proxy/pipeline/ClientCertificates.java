package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpConnection;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.List;
import javax.naming.InvalidNameException;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLPeerUnverifiedException;

/** What a connection's client certificate says about who is calling ({@code auth.client_cert}). */
final class ClientCertificates {
  private ClientCertificates() {}

  /**
   * The common name (CN) of the subject of the client certificate {@code connection} presented and
   * the handshake verified, or null: no TLS, no certificate, or a subject without a CN. With
   * several CNs, the most specific (last in RFC 2253 order, first as written) is taken.
   */
  static String commonName(HttpConnection connection) {
    if (connection == null || !connection.isSsl()) {
      return null;
    }
    List<Certificate> chain;
    try {
      chain = connection.peerCertificates();
    } catch (SSLPeerUnverifiedException e) {
      return null;
    }
    if (chain == null || chain.isEmpty() || !(chain.get(0) instanceof X509Certificate leaf)) {
      return null;
    }
    return commonName(leaf);
  }

  /** The subject CN of {@code certificate}, or null. */
  static String commonName(X509Certificate certificate) {
    try {
      List<Rdn> rdns = new LdapName(certificate.getSubjectX500Principal().getName()).getRdns();
      // LdapName lists the RDNs from the right of the RFC 2253 string: the last CN written there
      // is the most specific, and the string's first.
      for (int i = rdns.size() - 1; i >= 0; i--) {
        Rdn rdn = rdns.get(i);
        if (rdn.getType().equalsIgnoreCase("CN")) {
          return String.valueOf(rdn.getValue());
        }
      }
      return null;
    } catch (InvalidNameException e) {
      return null;
    }
  }
}
