package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a client certificate names ({@code auth.client_cert}), one certificate of each kind. */
class ClientCertificatesTest {
  @TempDir Path dir;

  @Test
  void aClientCertificateNamesItsSubjectsCommonName() {
    TestPki pki = TestPki.create(dir, "ca");

    assertThat(ClientCertificates.of(pki.client("a", "tenant-a").certificate()))
        .isEqualTo(new ClientCertificates.Named("tenant-a"));
  }

  @Test
  void aServerCertificateIsNoClientIdentityThoughItsCnNamesAKey() {
    TestPki pki = TestPki.create(dir, "ca");
    // Signed by the same CA, CN=tenant-a, extended key usage serverAuth only.
    var server = pki.server("s", "tenant-a").certificate();
    assertThat(ClientCertificates.commonName(server)).isEqualTo("tenant-a");

    assertThat(ClientCertificates.of(server)).isEqualTo(new ClientCertificates.NotForClients());
  }

  @Test
  void anyExtendedKeyUsageIsNoClientIdentityThoughTheHandshakeTakesIt() {
    TestPki pki = TestPki.create(dir, "ca");
    // anyExtendedKeyUsage (2.5.29.37.0) alone: the JDK's handshake accepts it, OpenSSL's client
    // purpose does not, and neither does auth.client_cert (docs/design.md, TLS).
    var any = pki.client("any", "tenant-a", List.of("2.5.29.37.0")).certificate();
    assertThat(ClientCertificates.forClients(any)).isFalse();
    assertThat(ClientCertificates.of(any)).isEqualTo(new ClientCertificates.NotForClients());
    // The control: the same CA and CN with clientAuth listed beside it names the key.
    var both =
        pki.client("both", "tenant-a", List.of("2.5.29.37.0", ClientCertificates.CLIENT_AUTH))
            .certificate();
    assertThat(ClientCertificates.of(both)).isEqualTo(new ClientCertificates.Named("tenant-a"));
  }

  @Test
  void aSubjectWithAnEmptyCommonNameNamesNothing() {
    TestPki pki = TestPki.create(dir, "ca");

    assertThat(ClientCertificates.of(pki.client("blank", "").certificate()))
        .isEqualTo(new ClientCertificates.NoCommonName());
  }
}
