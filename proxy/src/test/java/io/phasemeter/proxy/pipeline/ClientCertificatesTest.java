package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import java.nio.file.Path;
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
  void aSubjectWithAnEmptyCommonNameNamesNothing() {
    TestPki pki = TestPki.create(dir, "ca");

    assertThat(ClientCertificates.of(pki.client("blank", "").certificate()))
        .isEqualTo(new ClientCertificates.NoCommonName());
  }
}
