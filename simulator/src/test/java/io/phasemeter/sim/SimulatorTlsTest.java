package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** HTTPS with vLLM's --ssl-* flags: served with a test CA, client certificates as asked. */
class SimulatorTlsTest {
  @TempDir Path dir;
  private Vertx vertx;
  private TestPki pki;
  private TestPki.Issued server;
  private final StringWriter err = new StringWriter();

  @BeforeEach
  void setUp() {
    vertx = Vertx.vertx();
    pki = TestPki.create(dir, "ca");
    server = pki.server("sim", "localhost", "127.0.0.1");
  }

  @AfterEach
  void tearDown() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private int run(String... args) {
    CommandLine cl = SimulatorMain.commandLine();
    cl.setOut(new PrintWriter(new StringWriter(), true));
    cl.setErr(new PrintWriter(err, true));
    return cl.execute(args);
  }

  private Simulator start(int certReqs) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults().withPort(0),
            new SimulatorTls(server.certFile(), server.keyFile(), pki.caFile(), certReqs))
        .await(10, TimeUnit.SECONDS);
  }

  /** GET /v1/models over TLS, trusting the test CA, with a client certificate or none. */
  private int models(int port, TestPki.Issued client) {
    HttpClientOptions o =
        new HttpClientOptions()
            .setSsl(true)
            .setTrustOptions(new PemTrustOptions().addCertPath(pki.caFile().toString()));
    if (client != null) {
      o.setKeyCertOptions(
          new PemKeyCertOptions()
              .setCertPath(client.certFile().toString())
              .setKeyPath(client.keyFile().toString()));
    }
    HttpClient c = vertx.createHttpClient(o);
    try {
      return c.request(HttpMethod.GET, port, "localhost", "/v1/models")
          .compose(r -> r.send().compose(resp -> resp.body().map(b -> resp.statusCode())))
          .await(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      return -1; // the handshake (or the connection after it) was refused
    } finally {
      c.close();
    }
  }

  @Test
  void certReqs2RequiresAClientCertificateFromTheCa() throws Exception {
    int port = start(2).port();
    assertThat(models(port, pki.client("client", "tenant-a"))).isEqualTo(200);
    assertThat(models(port, null)).isEqualTo(-1);
    TestPki stranger = TestPki.create(dir.resolve("stranger"), "stranger-ca");
    assertThat(models(port, stranger.client("c", "x"))).isEqualTo(-1);
  }

  @Test
  void certReqs0And1ServeAClientWithoutACertificate() throws Exception {
    assertThat(models(start(0).port(), null)).isEqualTo(200);
    assertThat(models(start(1).port(), null)).isEqualTo(200);
  }

  @Test
  void badFilesAndFlagsAreExit2WithOneLine() throws Exception {
    Path garbage = Files.writeString(dir.resolve("garbage.pem"), "not a certificate\n");
    String cert = server.certFile().toString();
    String key = server.keyFile().toString();
    String[][] cases = {
      {"--ssl-certfile", cert},
      {"--ssl-certfile", dir.resolve("missing.crt").toString(), "--ssl-keyfile", key},
      {"--ssl-certfile", garbage.toString(), "--ssl-keyfile", key},
      {"--ssl-certfile", cert, "--ssl-keyfile", key, "--ssl-cert-reqs", "3"},
      {"--ssl-certfile", cert, "--ssl-keyfile", key, "--ssl-cert-reqs", "2"},
      {"--ssl-ca-certs", pki.caFile().toString()},
    };
    for (String[] args : cases) {
      err.getBuffer().setLength(0);
      assertThat(run(args)).as(String.join(" ", args)).isEqualTo(2);
      assertThat(err.toString().strip().lines()).as(err.toString()).hasSize(1);
      assertThat(err.toString()).contains("--ssl-").doesNotContain("PRIVATE KEY");
    }
  }
}
