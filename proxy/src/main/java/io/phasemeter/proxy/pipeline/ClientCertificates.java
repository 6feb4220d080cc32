package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpConnection;
import java.security.cert.Certificate;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.List;
import javax.naming.InvalidNameException;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLPeerUnverifiedException;

/**
 * What a connection's client certificate says about who is calling ({@code auth.client_cert}).
 *
 * <p>The handshake has already checked that the certificate chains to {@code client_ca_file}; that
 * CA is meant to be dedicated to this gateway, since any certificate it signed may name any key.
 * What is checked here on top: the certificate is meant for client authentication (an extended key
 * usage extension, when present, lists {@code clientAuth}, as OpenSSL's purpose check for an SSL
 * client requires: a server's certificate is no client identity), and its subject has a CN.
 */
final class ClientCertificates {
  /** id-kp-clientAuth (RFC 5280 §4.2.1.12). */
  static final String CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

  private ClientCertificates() {}

  /** What a connection's client certificate names. */
  sealed interface Identity {}

  /** No TLS, or no certificate was presented. */
  record None() implements Identity {}

  /** A certificate whose extended key usage does not allow client authentication. */
  record NotForClients() implements Identity {}

  /** A certificate whose subject has no common name, or an empty one. */
  record NoCommonName() implements Identity {}

  /** A certificate for client authentication whose subject's CN is {@code name}. */
  record Named(String name) implements Identity {}

  /**
   * What the client certificate {@code connection} presented (and the handshake verified) names.
   */
  static Identity of(HttpConnection connection) {
    if (connection == null || !connection.isSsl()) {
      return new None();
    }
    List<Certificate> chain;
    try {
      chain = connection.peerCertificates();
    } catch (SSLPeerUnverifiedException e) {
      return new None();
    }
    if (chain == null || chain.isEmpty() || !(chain.get(0) instanceof X509Certificate leaf)) {
      return new None();
    }
    return of(leaf);
  }

  /** What {@code certificate}, the leaf a client presented, names. */
  static Identity of(X509Certificate certificate) {
    if (!forClients(certificate)) {
      return new NotForClients();
    }
    String cn = commonName(certificate);
    return cn == null || cn.isBlank() ? new NoCommonName() : new Named(cn);
  }

  /** True without an extended key usage extension, or with one that lists clientAuth. */
  static boolean forClients(X509Certificate certificate) {
    try {
      List<String> usages = certificate.getExtendedKeyUsage();
      return usages == null || usages.contains(CLIENT_AUTH);
    } catch (CertificateParsingException e) {
      return false;
    }
  }

  /**
   * The subject CN of {@code certificate}, or null. With several CNs, the most specific (last in
   * RFC 2253 order, first as written) is taken.
   */
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
