package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter proxy} with {@code listen.tls} / {@code admin.tls} files that cannot be served:
 * one line naming the key and the file, exit 2, before anything listens.
 */
class ProxyMainTlsTest {
  @TempDir Path dir;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();
  private TestPki pki;
  private TestPki.Issued good;

  @BeforeEach
  void setUp() {
    pki = TestPki.create(dir.resolve("pki"), "ca");
    good = pki.server("proxy", "localhost", "127.0.0.1");
  }

  private int start(String block, String listener) throws Exception {
    Path file = dir.resolve("proxy.yaml");
    Files.writeString(
        file,
        "listen: {host: 127.0.0.1, port: 0"
            + (listener.equals("listen") ? ", tls: " + block : "")
            + "}\n"
            + "admin: {host: 127.0.0.1, port: 0"
            + (listener.equals("admin") ? ", tls: " + block : "")
            + "}\n"
            + "pools: [{name: p, models: [m], upstreams: ['http://127.0.0.1:1'],"
            + " health: {path: null}}]\n");
    return ProxyMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute("--config", file.toString());
  }

  private static String block(Path cert, Path key, Path ca) {
    return "{cert_file: '"
        + cert
        + "', key_file: '"
        + key
        + "'"
        + (ca == null ? "" : ", client_ca_file: '" + ca + "'")
        + "}";
  }

  private String errLine() {
    assertThat(err.toString().lines()).hasSize(1);
    assertThat(out.toString()).doesNotContain("listening on");
    return err.toString().strip();
  }

  @Test
  void aKeyOfAnotherPairIsOneLineAndExitTwo() throws Exception {
    Path otherKey = pki.server("other", "localhost").keyFile();

    assertThat(start(block(good.certFile(), otherKey, null), "listen")).isEqualTo(2);

    assertThat(errLine())
        .startsWith("phasemeter proxy: listen.tls.key_file: " + otherKey + " is not the key of");
  }

  @Test
  void anExpiredCertificateIsOneLineAndExitTwo() throws Exception {
    Instant now = Instant.now();
    TestPki.Issued expired =
        pki.server("expired", now.minus(Duration.ofDays(9)), now.minus(Duration.ofDays(1)), "x");

    assertThat(start(block(expired.certFile(), expired.keyFile(), null), "listen")).isEqualTo(2);

    assertThat(errLine())
        .startsWith(
            "phasemeter proxy: listen.tls.cert_file: the certificate in "
                + expired.certFile()
                + " expired at");
  }

  @Test
  void anUnreadableKeyFileIsOneLineAndExitTwo() throws Exception {
    Path missing = dir.resolve("nowhere.key");

    assertThat(start(block(good.certFile(), missing, null), "admin")).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo("phasemeter proxy: admin.tls.key_file: " + missing + " is not a readable file");
  }

  @Test
  void aMissingClientCaFileIsOneLineAndExitTwo() throws Exception {
    Path missing = dir.resolve("clients-ca.pem");

    assertThat(start(block(good.certFile(), good.keyFile(), missing), "listen")).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: listen.tls.client_ca_file: " + missing + " is not a readable file");
  }

  @Test
  void aClientCaFileWithoutACertificateIsOneLineAndExitTwo() throws Exception {
    Path notPem = dir.resolve("ca.pem");
    Files.writeString(notPem, "not a certificate\n");

    assertThat(start(block(good.certFile(), good.keyFile(), notPem), "listen")).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: listen.tls.client_ca_file: " + notPem + " holds no PEM certificate");
  }
}
