package io.phasemeter.proxy.tls;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.core.testing.TestPki;
import io.phasemeter.proxy.config.ConfigException;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PemFilesTest {
  private static Vertx vertx;
  @TempDir Path dir;

  @BeforeAll
  static void start() {
    vertx = Vertx.vertx();
  }

  @AfterAll
  static void stop() {
    vertx.close().await();
  }

  @Test
  void aMatchingValidPairIsReadWithItsChainAndExpiry() {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki.Issued s = pki.server("proxy", "localhost");
    PemFiles.KeyPair pair =
        PemFiles.readKeyPair(vertx, s.certFile(), s.keyFile(), "listen.tls", Instant.now());
    assertThat(pair.leaf()).isEqualTo(s.certificate());
    assertThat(pair.subject()).isEqualTo("CN=localhost,O=Phasemeter tests");
    assertThat(pair.notAfter()).isEqualTo(s.certificate().getNotAfter().toInstant());
    assertThat(pair.options().getCertValues()).hasSize(1);
  }

  @Test
  void bytesAlreadyReadAreCheckedAndServedWithoutReadingTheFilesAgain() throws Exception {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki.Issued read = pki.server("read", "localhost");
    byte[] cert = Files.readAllBytes(read.certFile());
    byte[] key = Files.readAllBytes(read.keyFile());
    // The files are replaced after they were read: what was read is what is checked and served.
    TestPki.Issued rotated = pki.server("rotated", "localhost");
    rotated.installAs(read.certFile(), read.keyFile());

    PemFiles.KeyPair pair =
        PemFiles.readKeyPair(
            vertx, cert, key, read.certFile(), read.keyFile(), "listen.tls", Instant.now());

    assertThat(pair.leaf()).isEqualTo(read.certificate()).isNotEqualTo(rotated.certificate());
    assertThat(pair.options().getCertValues().get(0).getBytes()).isEqualTo(cert);
    assertThat(pair.options().getKeyValues().get(0).getBytes()).isEqualTo(key);
    // Faults still name the file the bytes came from.
    assertThatThrownBy(
            () ->
                PemFiles.readKeyPair(
                    vertx,
                    cert,
                    Files.readAllBytes(rotated.keyFile()),
                    read.certFile(),
                    read.keyFile(),
                    "listen.tls",
                    Instant.now()))
        .hasMessageStartingWith("listen.tls.key_file: " + read.keyFile() + " is not the key of");
  }

  @Test
  void aKeyOfAnotherCertificateIsRefusedNamingBothFiles() {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki.Issued a = pki.server("a", "localhost");
    TestPki.Issued b = pki.server("b", "localhost");
    assertThatThrownBy(
            () ->
                PemFiles.readKeyPair(vertx, a.certFile(), b.keyFile(), "listen.tls", Instant.now()))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            "listen.tls.key_file: "
                + b.keyFile()
                + " is not the key of the certificate in "
                + a.certFile()
                + " (CN=localhost,O=Phasemeter tests)");
  }

  @Test
  void anExpiredOrNotYetValidCertificateIsRefused() {
    TestPki pki = TestPki.create(dir, "ca");
    Instant now = Instant.now();
    TestPki.Issued old =
        pki.server("old", now.minus(Duration.ofDays(9)), now.minus(Duration.ofDays(1)), "x");
    TestPki.Issued early =
        pki.server("early", now.plus(Duration.ofDays(1)), now.plus(Duration.ofDays(9)), "x");
    assertThatThrownBy(
            () -> PemFiles.readKeyPair(vertx, old.certFile(), old.keyFile(), "admin.tls", now))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("admin.tls.cert_file: the certificate in " + old.certFile())
        .hasMessageContaining("expired at");
    assertThatThrownBy(
            () -> PemFiles.readKeyPair(vertx, early.certFile(), early.keyFile(), "admin.tls", now))
        .hasMessageContaining("is not valid before");
  }

  @Test
  void unreadableEmptyOrNonPemFilesAreOneLineAndNeverQuoteTheKey() throws Exception {
    TestPki pki = TestPki.create(dir, "ca");
    TestPki.Issued s = pki.server("s", "localhost");
    Path missing = dir.resolve("missing.crt");
    assertThatThrownBy(
            () -> PemFiles.readKeyPair(vertx, missing, s.keyFile(), "listen.tls", Instant.now()))
        .hasMessage("listen.tls.cert_file: " + missing + " is not a readable file");
    Path garbage = Files.writeString(dir.resolve("garbage.key"), "SECRET-NOT-A-KEY\n");
    assertThatThrownBy(
            () -> PemFiles.readKeyPair(vertx, s.certFile(), garbage, "listen.tls", Instant.now()))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("listen.tls.key_file: " + garbage + " holds no PEM private key")
        .hasMessageNotContaining("SECRET");
    assertThatThrownBy(() -> PemFiles.readCertificates(garbage, "pools[a].tls.ca_file"))
        .hasMessage("pools[a].tls.ca_file: " + garbage + " holds no PEM certificate");
    Path big = dir.resolve("big.pem");
    Files.write(big, new byte[(int) PemFiles.MAX_FILE_BYTES + 1]);
    assertThatThrownBy(() -> PemFiles.readCertificates(big, "x.ca_file"))
        .hasMessageContaining("a PEM file here has at most 1 MiB");
  }

  @Test
  void aCaBundleBecomesTrustOptionsOfTheSameCertificates() {
    TestPki a = TestPki.create(dir, "ca-a");
    TestPki b = TestPki.create(dir, "ca-b");
    Path bundle = dir.resolve("bundle.pem");
    try {
      Files.writeString(bundle, Files.readString(a.caFile()) + Files.readString(b.caFile()));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    var certs = PemFiles.readCertificates(bundle, "listen.tls.client_ca_file");
    assertThat(certs).containsExactly(a.caCertificate(), b.caCertificate());
    assertThat(PemFiles.trustOptions(certs).getCertValues()).hasSize(2);
  }
}
