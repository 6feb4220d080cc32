package io.phasemeter.load.http;

import static io.phasemeter.load.http.RequestRunnerSimulatorTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.core.testing.TestPki;
import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * transport_setup split into dns, connect and tls, against an injected truth: a relay in front of a
 * TLS server accepts the TCP connection at once and holds the client's first bytes (its
 * ClientHello) for {@link #HOLD_MS} before passing them on. The hold is in the handshake, so it
 * shows in {@code tls} and not in {@code connect}; the same server reached without the hold is the
 * control. Also: h2 via ALPN carries many requests on one connection, {@code --ca-file} and {@code
 * --insecure} trust what they say, and an unknown CA is a connect failure, never a success.
 */
@ExtendWith(VertxExtension.class)
class ConnectionSplitTest {
  private static final long HOLD_MS = 200;
  private static final String STREAM =
      "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n"
          + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1}}\n\n"
          + "data: [DONE]\n\n";

  @TempDir static Path dir;

  private Vertx vertx;
  private TestPki pki;
  private HttpServer tls;
  private NetServer holding;
  private final Set<HttpVersion> versions = ConcurrentHashMap.newKeySet();
  private final List<RequestRunner> runners = new ArrayList<>();

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    this.vertx = vertx;
    pki = TestPki.create(dir, "ca");
    TestPki.Issued cert = pki.server("server", "localhost", "127.0.0.1");
    tls =
        await(
            vertx
                .createHttpServer(
                    new HttpServerOptions()
                        .setSsl(true)
                        .setUseAlpn(true)
                        .setKeyCertOptions(
                            new PemKeyCertOptions()
                                .setCertPath(cert.certFile().toString())
                                .setKeyPath(cert.keyFile().toString())))
                .requestHandler(
                    req -> {
                      versions.add(req.version());
                      req.body()
                          .onComplete(
                              b ->
                                  req.response()
                                      .putHeader("content-type", "text/event-stream")
                                      .end(STREAM));
                    })
                .listen(0, "127.0.0.1"));
    holding =
        await(vertx.createNetServer().connectHandler(this::relayWithHold).listen(0, "127.0.0.1"));
  }

  /** Accepted at once; the client's first bytes wait HOLD_MS before they reach the server. */
  private void relayWithHold(NetSocket client) {
    client.pause();
    vertx.setTimer(
        HOLD_MS,
        id ->
            vertx
                .createNetClient()
                .connect(tls.actualPort(), "127.0.0.1")
                .onSuccess(
                    server -> {
                      client.pipeTo(server);
                      server.pipeTo(client);
                      client.resume();
                    })
                .onFailure(e -> client.close()));
  }

  @AfterEach
  void stop() throws Exception {
    for (RequestRunner r : runners) {
      await(r.close());
    }
    await(holding.close());
    await(tls.close());
  }

  private RequestRunner runner(String url, Transport transport) {
    RequestRunner r =
        new RequestRunner(
            vertx, URI.create(url), 8, Duration.ofSeconds(10), gap -> {}, true, transport);
    runners.add(r);
    return r;
  }

  private static ClientResult one(RequestRunner r, long seq) throws Exception {
    return await(
        r.run(
            seq,
            new RequestSpec("/v1/completions", Buffer.buffer("{}"), "b", 10, 1, true),
            "0000000000000007000000000000012f",
            null,
            0,
            System.nanoTime()));
  }

  @Test
  void aHeldHandshakeShowsInTlsNotInConnect() throws Exception {
    Transport trust = Transport.of(pki.caFile(), false, false);
    RequestRunner held = runner("https://localhost:" + holding.actualPort(), trust);
    ClientResult first = one(held, 1);
    ClientResult reused = one(held, 2);
    RequestRunner control = runner("https://127.0.0.1:" + tls.actualPort(), trust);
    ClientResult direct = one(control, 3);

    assertThat(first.ok()).as(first.invalidReason()).isTrue();
    assertThat(first.tlsNanos()).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(HOLD_MS));
    assertThat(first.connectNanos()).isBetween(0L, TimeUnit.MILLISECONDS.toNanos(HOLD_MS));
    // A name was resolved: dns is there; the parts add up within transport_setup.
    assertThat(first.dnsNanos()).isGreaterThanOrEqualTo(0);
    assertThat(first.dnsNanos() + first.connectNanos() + first.tlsNanos())
        .isLessThanOrEqualTo(first.transportSetupNanos());
    // The reused connection has no set-up; the control (an IP literal) resolved nothing.
    assertThat(reused.ok()).isTrue();
    assertThat(List.of(reused.dnsNanos(), reused.connectNanos(), reused.tlsNanos()))
        .containsOnly(-1L);
    assertThat(direct.ok()).isTrue();
    assertThat(direct.dnsNanos()).isEqualTo(-1);
    assertThat(direct.tlsNanos()).isGreaterThan(0).isLessThan(first.tlsNanos());
    assertThat(held.protocol()).isEqualTo("http/1.1");
    assertThat(held.tlsVersion()).isEqualTo("1.3");
    assertThat(held.connectionsOpened()).isEqualTo(1);
  }

  @Test
  void http2CarriesConcurrentRequestsOnOneConnection() throws Exception {
    RequestRunner h2 =
        runner("https://localhost:" + tls.actualPort(), Transport.of(pki.caFile(), false, true));
    List<Future<ClientResult>> all = new ArrayList<>();
    long now = System.nanoTime();
    for (int i = 0; i < 6; i++) {
      all.add(
          h2.run(
              i,
              new RequestSpec("/v1/completions", Buffer.buffer("{}"), "b", 10, 1, true),
              "0000000000000007000000000000012f",
              null,
              0,
              now));
    }
    long fresh = 0;
    for (Future<ClientResult> f : all) {
      ClientResult r = await(f);
      assertThat(r.ok()).as(r.invalidReason()).isTrue();
      if (r.tlsNanos() > 0) {
        fresh++;
        // The request that opened the connection: a name resolved, TCP, then TLS and SETTINGS.
        assertThat(r.dnsNanos()).isGreaterThanOrEqualTo(0);
        assertThat(r.connectNanos()).isGreaterThanOrEqualTo(0);
        assertThat(r.dnsNanos() + r.connectNanos() + r.tlsNanos())
            .isLessThanOrEqualTo(r.transportSetupNanos());
      }
    }
    assertThat(h2.protocol()).isEqualTo("h2");
    assertThat(versions).contains(HttpVersion.HTTP_2);
    assertThat(h2.connectionsOpened()).isEqualTo(1);
    assertThat(fresh).isEqualTo(1);
  }

  @Test
  void insecureTrustsAnyCertificateAndPlatformTrustRefusesTheTestCa() throws Exception {
    String url = "https://127.0.0.1:" + tls.actualPort();
    ClientResult insecure = one(runner(url, Transport.of(null, true, false)), 1);
    ClientResult platform = one(runner(url, Transport.DEFAULT), 2);
    assertThat(insecure.ok()).isTrue();
    assertThat(platform.ok()).isFalse();
    assertThat(platform.error()).isEqualTo(ErrorClass.CONNECT);
  }

  @Test
  void aBadCaFileIsOneLineNamingTheFlagAndTheFile() throws Exception {
    Path notPem = Files.writeString(dir.resolve("not.pem"), "hello");
    assertThatThrownBy(() -> Transport.of(notPem, false, false))
        .hasMessageStartingWith("--ca-file " + notPem + ": no PEM certificate");
    assertThatThrownBy(() -> Transport.of(dir.resolve("missing.pem"), false, false))
        .hasMessageContaining("cannot read it");
    assertThatThrownBy(() -> Transport.of(pki.caFile(), true, false))
        .hasMessageContaining("exclude each other");
  }
}
