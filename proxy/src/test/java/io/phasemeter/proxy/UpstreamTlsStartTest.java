package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code pools[].tls} that cannot work stops {@code phasemeter proxy} at start: exit 2, one line.
 */
class UpstreamTlsStartTest {
  @TempDir Path dir;
  private TestPki pki;
  private TestPki.Issued client;
  private final StringWriter err = new StringWriter();

  @BeforeEach
  void pki() {
    pki = TestPki.create(dir.resolve("pki"), "ca");
    client = pki.client("proxy", "phasemeter-proxy");
  }

  private String start(String upstream, String tls) throws IOException {
    Path file = dir.resolve("proxy.yaml");
    Files.writeString(
        file,
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + "pools:\n"
            + "  - name: gpu\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: ["
            + upstream
            + "]\n"
            + "    tls: "
            + tls
            + "\n");
    err.getBuffer().setLength(0);
    int code =
        ProxyMain.commandLine(new PrintWriter(new StringWriter(), true), new PrintWriter(err, true))
            .execute("--config", file.toString());
    assertThat(code).as(err.toString()).isEqualTo(2);
    assertThat(err.toString().strip().lines()).as(err.toString()).hasSize(1);
    assertThat(err.toString()).doesNotContain("PRIVATE KEY").doesNotContain("BEGIN");
    return err.toString().strip();
  }

  @Test
  void aMissingCaFileIsNamedWithItsKey() throws IOException {
    Path missing = dir.resolve("missing-ca.pem");
    assertThat(start("https://10.0.0.5:8000", "{ca_file: '" + missing + "'}"))
        .isEqualTo(
            "phasemeter proxy: pools[gpu].tls.ca_file: " + missing + " is not a readable file");
  }

  @Test
  void aCertificateWithoutItsKeyIsRefused() throws IOException {
    assertThat(start("https://10.0.0.5:8000", "{cert_file: '" + client.certFile() + "'}"))
        .contains("tls")
        .contains("cert_file and key_file go together");
  }

  @Test
  void aKeyThatIsNotTheCertificatesIsRefused() throws IOException {
    TestPki.Issued other = pki.client("other", "someone-else");
    assertThat(
            start(
                "https://10.0.0.5:8000",
                "{cert_file: '" + client.certFile() + "', key_file: '" + other.keyFile() + "'}"))
        .contains("pools[gpu].tls.key_file")
        .contains("is not the key of the certificate in " + client.certFile());
  }

  @Test
  void aTlsBlockOnAPoolWithoutHttpsUpstreamsIsRefused() throws IOException {
    assertThat(start("http://10.0.0.5:8000", "{ca_file: '" + pki.caFile() + "'}"))
        .contains("tls")
        .contains("pool 'gpu' has no https:// upstream");
  }
}
