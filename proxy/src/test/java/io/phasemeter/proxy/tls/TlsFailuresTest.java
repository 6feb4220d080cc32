package io.phasemeter.proxy.tls;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;
import org.junit.jupiter.api.Test;

/** The words for a failed TLS exchange with an upstream, from the JDK's own exceptions. */
class TlsFailuresTest {
  private static SSLException alert(String name) {
    // How the JDK reports an alert the peer sent (sun.security.ssl.Alert).
    return new SSLHandshakeException("Received fatal alert: " + name);
  }

  @Test
  void aRefusedClientCertificateNamesCertFile() {
    for (String a : new String[] {"certificate_required", "bad_certificate", "unknown_ca"}) {
      assertThat(TlsFailures.describe(alert(a))).as(a).contains("pools[].tls.cert_file");
    }
  }

  @Test
  void aGenericHandshakeFailureIsNotBlamedOnTheClientCertificate() {
    // No cipher suite in common, among others: the upstream says only handshake_failure.
    assertThat(TlsFailures.describe(alert("handshake_failure")))
        .isEqualTo("the TLS handshake with the upstream failed");
    assertThat(TlsFailures.describe(alert("protocol_version"))).contains("no TLS version");
  }

  @Test
  void onlyAHandshakeOrAReceivedAlertIsAHandshakeFailure() {
    assertThat(TlsFailures.handshake(new SSLHandshakeException("No appropriate protocol")))
        .isTrue();
    assertThat(TlsFailures.handshake(new IOException("wrapped", alert("bad_certificate"))))
        .isTrue();
    // TLS 1.3: the server's refusal of the client certificate, read after the handshake ended.
    assertThat(
            TlsFailures.handshake(new SSLException("Received fatal alert: certificate_required")))
        .isTrue();
    // A kept-alive connection the upstream closed without close_notify: set up long ago.
    SSLException noCloseNotify =
        new SSLException("closing inbound before receiving peer's close_notify");
    assertThat(TlsFailures.handshake(noCloseNotify)).isFalse();
    assertThat(TlsFailures.handshake(new SSLException("Tag mismatch"))).isFalse();
    assertThat(TlsFailures.handshake(new IOException("Connection reset by peer"))).isFalse();
    assertThat(TlsFailures.handshake(null)).isFalse();
  }
}
