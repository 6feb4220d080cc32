package io.phasemeter.core.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.cert.CertificateExpiredException;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TestPkiTest {
  @TempDir Path dir;

  @Test
  void issuedCertificatesChainToTheirCaAndNotToAnother() throws GeneralSecurityException {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki other = TestPki.create(dir, "other-ca");
    TestPki.Issued server = pki.server("server", "localhost", "127.0.0.1");
    TestPki.Issued client = pki.client("client", "tenant-a");

    server.certificate().verify(pki.caCertificate().getPublicKey());
    client.certificate().verify(pki.caCertificate().getPublicKey());
    assertThatThrownBy(() -> server.certificate().verify(other.caCertificate().getPublicKey()))
        .isInstanceOf(GeneralSecurityException.class);
    assertThat(server.certificate().getSubjectAlternativeNames())
        .extracting(l -> (Object) l.get(1))
        .containsExactly((Object) "localhost", "127.0.0.1");
    assertThat(client.certificate().getSubjectX500Principal().getName()).startsWith("CN=tenant-a");
    assertThat(server.keyFile()).content().startsWith("-----BEGIN PRIVATE KEY-----");
    assertThat(pki.caFile()).content().startsWith("-----BEGIN CERTIFICATE-----");
  }

  @Test
  void anExpiredServerCertificateIsExpired() {
    TestPki pki = TestPki.create(dir, "ca");
    Instant now = Instant.now();
    TestPki.Issued old =
        pki.server(
            "old", now.minus(Duration.ofDays(10)), now.minus(Duration.ofDays(1)), "localhost");
    assertThatThrownBy(() -> old.certificate().checkValidity())
        .isInstanceOf(CertificateExpiredException.class);
  }

  @Test
  void installAsReplacesBothFiles() {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki.Issued a = pki.server("a", "localhost");
    TestPki.Issued b = pki.server("b", "localhost");
    Path cert = dir.resolve("live.crt");
    Path key = dir.resolve("live.key");
    a.installAs(cert, key);
    assertThat(cert).hasSameTextualContentAs(a.certFile());
    b.installAs(cert, key);
    assertThat(cert).hasSameTextualContentAs(b.certFile());
    assertThat(key).hasSameTextualContentAs(b.keyFile());
  }
}
