package io.phasemeter.core.net;

import static org.assertj.core.api.Assertions.assertThat;

import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;

class TlsVersionsTest {
  @Test
  void theJdksNamesBecomeOpenTelemetrysVersions() {
    assertThat(TlsVersions.otel("TLSv1.3")).isEqualTo("1.3");
    assertThat(TlsVersions.otel("TLSv1.2")).isEqualTo("1.2");
    assertThat(TlsVersions.otel("TLSv1.1")).isEqualTo("1.1");
  }

  @Test
  void whatIsNoTlsVersionIsNull() {
    assertThat(TlsVersions.otel(null)).isNull();
    assertThat(TlsVersions.otel("NONE")).isNull(); // a session before its handshake
    assertThat(TlsVersions.otel("SSLv3")).isNull();
    assertThat(TlsVersions.otel("TLSv")).isNull();
    assertThat(TlsVersions.otel("TLSvX")).isNull();
  }

  @Test
  void everyVersionThisJdkSpeaksHasAnOtelForm() throws Exception {
    for (String p : SSLContext.getDefault().getSupportedSSLParameters().getProtocols()) {
      if (p.startsWith("TLSv")) {
        assertThat(TlsVersions.otel(p)).as(p).matches("1\\.[0-3]|1");
      }
    }
  }
}
