package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.fail;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.core.testing.TestPki;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.vertx.core.MultiMap;
import io.vertx.core.json.JsonObject;
import java.io.File;
import java.io.FileInputStream;
import java.math.BigInteger;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code listen.tls} and {@code admin.tls} met by clients nobody here wrote: the system's curl and
 * openssl, the official OpenAI Java SDK, and the JDK's HTTP client through a certificate rotation.
 * The CA and every certificate are made at test time ({@link TestPki}).
 */
class TlsListenerTest extends ProxyTestBase {
  @TempDir Path dir;

  private TestPki pki;
  private TestPki.Issued server;
  private final List<MultiMap> upstreamHeaders = new CopyOnWriteArrayList<>();
  private int backend;

  @BeforeEach
  void setUp() throws Exception {
    pki = TestPki.create(dir.resolve("pki"), "test-ca");
    server = pki.server("proxy", "localhost", "127.0.0.1");
    backend = startVllmBackend(upstreamHeaders);
  }

  private static String tlsBlock(Path cert, Path key, Path clientCa, String reload) {
    return "{cert_file: '"
        + cert
        + "', key_file: '"
        + key
        + "'"
        + (clientCa != null ? ", client_ca_file: '" + clientCa + "'" : "")
        + (reload != null ? ", reload_interval: " + reload : "")
        + "}";
  }

  private ProxyConfig tlsConfig(String listenTls, String more) {
    return ConfigLoader.parse(
        "listen: {host: 127.0.0.1, port: 0, tls: "
            + listenTls
            + "}\n"
            + more
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: [http://127.0.0.1:"
            + backend
            + "]\n"
            + "    health: {path: null}\n",
        "test.yaml");
  }

  private String url(String path) {
    return "https://127.0.0.1:" + proxy.port() + path;
  }

  @Test
  void curlChatsOverHttpsAndTheUpstreamHearsItWasHttps() throws Exception {
    requireTool("curl");
    startProxy(tlsConfig(tlsBlock(server.certFile(), server.keyFile(), null, null), ""));

    Run whole = curl("--cacert", pki.caFile().toString(), "-d", chat("hi", false), url(CHAT));
    Run streamed =
        curl("--cacert", pki.caFile().toString(), "-N", "-d", chat("hi", true), url(CHAT));

    assertThat(whole.code).as(whole.err).isZero();
    assertThat(whole.out).contains("\"choices\"");
    assertThat(streamed.code).as(streamed.err).isZero();
    assertThat(streamed.out).contains("data: [DONE]");
    assertThat(upstreamHeaders).hasSize(2);
    assertThat(upstreamHeaders)
        .allSatisfy(h -> assertThat(h.get("x-forwarded-proto")).isEqualTo("https"));
    assertThat(awaitFinished(2)).allSatisfy(f -> assertThat(f.status()).isEqualTo(200));
    // Without the CA, curl does not trust the proxy: the certificate is the test CA's own.
    assertThat(curl("-d", chat("hi", false), url(CHAT)).code).isEqualTo(60);
  }

  @Test
  void curlSpeaksH2ByAlpnAndHttp11WhenAskedAndTheRecordsSayWhich() throws Exception {
    requireTool("curl");
    startProxy(tlsConfig(tlsBlock(server.certFile(), server.keyFile(), null, null), ""));
    String ca = pki.caFile().toString();

    Run h2 = curl("--http2", "-i", "-N", "-v", "--cacert", ca, "-d", chat("hi", true), url(CHAT));
    assertThat(h2.code).as(h2.err).isZero();
    assertThat(h2.out).startsWith("HTTP/2 200").contains("data: [DONE]");
    assertThat(h2.err).contains("ALPN: server accepted h2");
    Finished viaH2 = awaitFinished(1).get(0);
    Run h1 = curl("--http1.1", "-i", "--cacert", ca, "-d", chat("hi", false), url(CHAT));
    assertThat(h1.code).as(h1.err).isZero();
    assertThat(h1.out).startsWith("HTTP/1.1 200");
    Finished viaH1 = awaitFinished(2).get(1);

    assertThat(record(viaH2).getString("network_protocol_version")).isEqualTo("2");
    assertThat(record(viaH2).getString("tls_protocol_version")).isEqualTo("1.3");
    assertThat(record(viaH1).getString("network_protocol_version")).isEqualTo("1.1");
    assertThat(record(viaH1).getString("tls_protocol_version")).isEqualTo("1.3");
    assertThat(awaitRoots(2).stream().filter(s -> !s.getParentSpanContext().isValid()))
        .hasSize(2)
        .allSatisfy(
            r ->
                assertThat(r.getAttributes().get(SpanAttributes.TLS_PROTOCOL_VERSION))
                    .isEqualTo("1.3"));
  }

  @Test
  void withHttp2OffATlsListenerOffersOnlyHttp11AndCurlFallsBack() throws Exception {
    requireTool("curl");
    startProxy(
        tlsConfig(
            tlsBlock(server.certFile(), server.keyFile(), null, null) + ", http2: false", ""));

    Run run =
        curl(
            "--http2",
            "-i",
            "-v",
            "--cacert",
            pki.caFile().toString(),
            "-d",
            chat("hi", false),
            url(CHAT));

    assertThat(run.code).as(run.err).isZero();
    assertThat(run.out).startsWith("HTTP/1.1 200");
    assertThat(run.err).contains("ALPN: server accepted http/1.1");
    assertThat(record(awaitFinished(1).get(0)).getString("network_protocol_version"))
        .isEqualTo("1.1");
  }

  private JsonObject record(Finished f) {
    String json = proxy.records().get(f.traceId());
    assertThat(json).as("the record of " + f.traceId()).isNotNull();
    return new JsonObject(json);
  }

  @Test
  void tls11IsRefusedByTheProxyWhileAControlServerAcceptsTheSameHandshake() throws Exception {
    requireTool("openssl");
    startProxy(tlsConfig(tlsBlock(server.certFile(), server.keyFile(), null, null), ""));
    String proxyAt = "127.0.0.1:" + proxy.port();

    Run old = sClient(proxyAt, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0");
    Run tls12 = sClient(proxyAt, "-tls1_2");
    Run tls13 = sClient(proxyAt, "-tls1_3");

    assertThat(old.code).as(old.out).isNotZero();
    assertThat(tls12.code).as(tls12.err).isZero();
    assertThat(tls12.out).contains("TLSv1.2");
    assertThat(tls13.code).as(tls13.err).isZero();
    assertThat(tls13.out).contains("TLSv1.3");

    // The control: openssl's own server with the same certificate accepts the same command.
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    Process control =
        new ProcessBuilder(
                "openssl",
                "s_server",
                "-accept",
                "127.0.0.1:" + port,
                "-tls1_1",
                "-cipher",
                "DEFAULT:@SECLEVEL=0",
                "-cert",
                server.certFile().toString(),
                "-key",
                server.keyFile().toString(),
                "-naccept",
                "1")
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("s_server.log").toFile())
            .start();
    try {
      Awaitility.await()
          .atMost(Duration.ofSeconds(5))
          .until(() -> Files.readString(dir.resolve("s_server.log")).contains("ACCEPT"));
      Run accepted = sClient("127.0.0.1:" + port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0");
      assertThat(accepted.code).as(accepted.out + accepted.err).isZero();
      assertThat(accepted.out).contains("TLSv1.1");
    } finally {
      control.destroy();
      control.waitFor(5, TimeUnit.SECONDS);
    }
  }

  @Test
  void theOpenAiSdkTalksToTheProxyOverHttpsTrustingTheTestCa() throws Exception {
    startProxy(tlsConfig(tlsBlock(server.certFile(), server.keyFile(), null, null), ""));
    SSLContext ssl = trusting(pki.caFile());
    OpenAIClient sdk =
        OpenAIOkHttpClient.builder()
            .baseUrl(url("/v1"))
            .apiKey("sk-test-not-a-real-key")
            .sslSocketFactory(ssl.getSocketFactory())
            .trustManager(trustManager(pki.caFile()))
            .maxRetries(0)
            .timeout(Duration.ofSeconds(10))
            .build();
    try {
      ChatCompletion c =
          sdk.chat()
              .completions()
              .create(
                  ChatCompletionCreateParams.builder()
                      .model("sim-llama")
                      .addUserMessage("hi")
                      .maxCompletionTokens(8)
                      .build());
      assertThat(c.choices()).isNotEmpty();
    } finally {
      sdk.close();
    }
    assertThat(upstreamHeaders.get(0).get("x-forwarded-proto")).isEqualTo("https");
  }

  @Test
  void clientCertificatesFromTheCaAreRequiredAndTheirCnNamesTheKey() throws Exception {
    requireTool("curl");
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: tenant-a, sha256: \""
            + HashKeyMain.hash("sk-unused-" + System.nanoTime())
            + "\"}\n...\n");
    startProxy(
        tlsConfig(
            tlsBlock(server.certFile(), server.keyFile(), pki.caFile(), null),
            "auth: {enabled: true, keys_file: '" + keys + "', client_cert: true}\n"));
    TestPki.Issued tenantA = pki.client("tenant-a", "tenant-a");
    TestPki.Issued nobody = pki.client("nobody", "nobody");
    TestPki.Issued foreign =
        TestPki.create(dir.resolve("other"), "other-ca").client("x", "tenant-a");
    String ca = pki.caFile().toString();

    Run ok =
        curl(
            "--cacert",
            ca,
            "--cert",
            tenantA.certFile().toString(),
            "--key",
            tenantA.keyFile().toString(),
            "-d",
            chat("hi", false),
            url(CHAT));
    Run unknownName =
        curl(
            "--cacert",
            ca,
            "--cert",
            nobody.certFile().toString(),
            "--key",
            nobody.keyFile().toString(),
            "-d",
            chat("hi", false),
            url(CHAT));
    Run otherCa =
        curl(
            "--cacert",
            ca,
            "--cert",
            foreign.certFile().toString(),
            "--key",
            foreign.keyFile().toString(),
            "-d",
            chat("hi", false),
            url(CHAT));
    Run none = curl("--cacert", ca, "-d", chat("hi", false), url(CHAT));

    assertThat(ok.code).as(ok.err).isZero();
    assertThat(ok.out).contains("\"choices\"");
    assertThat(unknownName.code).isZero();
    assertThat(unknownName.out).contains("invalid_api_key").doesNotContain("nobody");
    // Refused in the handshake: no HTTP exchange at all. Under TLS 1.3 the server judges the
    // client's certificate after the client has finished its side, so curl may meet the alert (35),
    // a reset while reading (56) or, sending its request onto the closed socket, a send error (55).
    assertThat(otherCa.code).as(otherCa.err).isIn(35, 55, 56);
    assertThat(none.code).as(none.err).isIn(35, 55, 56);
    List<Finished> done = awaitFinished(2);
    Finished admitted = done.stream().filter(f -> f.status() == 200).findFirst().orElseThrow();
    assertThat(proxy.records().get(admitted.traceId())).contains("\"key_name\":\"tenant-a\"");
    assertThat(done).hasSize(2);
  }

  @Test
  void theAdminListenerServesMetricsOverHttps() throws Exception {
    requireTool("curl");
    startProxy(
        tlsConfig(
            tlsBlock(server.certFile(), server.keyFile(), null, null),
            "admin: {host: 127.0.0.1, port: 0, tls: "
                + tlsBlock(server.certFile(), server.keyFile(), null, null)
                + "}\n"));

    Run metrics =
        curl(
            "--cacert",
            pki.caFile().toString(),
            "https://127.0.0.1:" + proxy.adminPort() + "/metrics");

    assertThat(metrics.code).as(metrics.err).isZero();
    long notAfter = server.certificate().getNotAfter().toInstant().getEpochSecond();
    assertThat(metrics.out)
        .contains(
            "llm_tls_certificate_expiry_timestamp_seconds{listener=\"admin\"} " + (double) notAfter)
        .contains(
            "llm_tls_certificate_expiry_timestamp_seconds{listener=\"public\"} "
                + (double) notAfter)
        .contains("llm_tls_reloads_total{listener=\"public\",result=\"failed\"} 0.0");
  }

  @Test
  void aCertificateRotatedDuringARunFailsNoRequestAndABadOneKeepsTheServedPair() throws Exception {
    Path cert = dir.resolve("served.crt");
    Path key = dir.resolve("served.key");
    server.installAs(cert, key);
    startProxy(tlsConfig(tlsBlock(cert, key, null, "100ms"), ""));
    SSLContext ssl = trusting(pki.caFile());
    HttpClient keptAlive =
        HttpClient.newBuilder().sslContext(ssl).version(HttpClient.Version.HTTP_1_1).build();
    BigInteger first = server.certificate().getSerialNumber();
    TestPki.Issued second = pki.server("second", "localhost", "127.0.0.1");
    List<BigInteger> keptSerials = new ArrayList<>();
    List<BigInteger> freshSerials = new ArrayList<>();
    List<Integer> statuses = new ArrayList<>();

    Runnable round =
        () -> {
          try {
            HttpClient fresh =
                HttpClient.newBuilder()
                    .sslContext(ssl)
                    .version(HttpClient.Version.HTTP_1_1)
                    .build();
            for (HttpClient c : List.of(fresh, keptAlive)) {
              HttpResponse<String> r = c.send(post(), HttpResponse.BodyHandlers.ofString());
              statuses.add(r.statusCode());
              BigInteger serial =
                  ((X509Certificate) r.sslSession().orElseThrow().getPeerCertificates()[0])
                      .getSerialNumber();
              (c == fresh ? freshSerials : keptSerials).add(serial);
            }
          } catch (Exception e) {
            throw new AssertionError(e);
          }
        };
    for (int i = 0; i < 3; i++) {
      round.run();
    }
    second.installAs(cert, key);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(8);
    while (!freshSerials
        .get(freshSerials.size() - 1)
        .equals(second.certificate().getSerialNumber())) {
      if (System.nanoTime() > deadline) {
        fail("the new certificate was never served: " + freshSerials);
      }
      round.run();
    }
    round.run();

    // A bad replacement (another pair's key under the served certificate): the served pair stays.
    Files.copy(
        pki.server("third", "localhost").keyFile(),
        key,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    var failed =
        proxy
            .metrics()
            .registry()
            .get("llm.tls.reloads")
            .tag("listener", "public")
            .tag("result", "failed")
            .counter();
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> failed.count() >= 1);
    Thread.sleep(300); // three more ticks of the same broken files: still one failure
    round.run();

    assertThat(statuses).allMatch(s -> s == 200);
    assertThat(freshSerials.get(0)).isEqualTo(first);
    assertThat(freshSerials.get(freshSerials.size() - 1))
        .isEqualTo(second.certificate().getSerialNumber());
    // The kept-alive connection kept its handshake, and so its certificate, throughout.
    assertThat(keptSerials).containsOnly(first);
    assertThat(failed.count()).isEqualTo(1.0);
  }

  private static final String CHAT = "/v1/chat/completions";

  private HttpRequest post() {
    return HttpRequest.newBuilder(URI.create(url(CHAT)))
        .timeout(Duration.ofSeconds(10))
        .header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(chat("hi", false)))
        .build();
  }

  private static X509TrustManager trustManager(Path caFile) throws Exception {
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    store.load(null, null);
    try (FileInputStream in = new FileInputStream(caFile.toFile())) {
      store.setCertificateEntry(
          "ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(store);
    return (X509TrustManager) tmf.getTrustManagers()[0];
  }

  private static SSLContext trusting(Path caFile) throws Exception {
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(null, new javax.net.ssl.TrustManager[] {trustManager(caFile)}, null);
    return ctx;
  }

  /** What a process said and how it ended. */
  private record Run(int code, String out, String err) {}

  private Run curl(String... args) throws Exception {
    List<String> cmd =
        new ArrayList<>(
            List.of("curl", "-sS", "--max-time", "10", "-H", "content-type: application/json"));
    cmd.addAll(List.of(args));
    return run(cmd);
  }

  private Run sClient(String at, String... args) throws Exception {
    List<String> cmd =
        new ArrayList<>(List.of("openssl", "s_client", "-connect", at, "-servername", "localhost"));
    cmd.addAll(List.of(args));
    return run(cmd);
  }

  private Run run(List<String> cmd) throws Exception {
    Path out = Files.createTempFile(dir, "out", ".txt");
    Path err = Files.createTempFile(dir, "err", ".txt");
    Process p =
        new ProcessBuilder(cmd)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .redirectOutput(out.toFile())
            .redirectError(err.toFile())
            .start();
    if (!p.waitFor(15, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail(cmd.get(0) + " did not finish: " + cmd);
    }
    return new Run(
        p.exitValue(),
        Files.readString(out, StandardCharsets.UTF_8),
        Files.readString(err, StandardCharsets.UTF_8));
  }

  /** Skips without {@code tool} on the PATH (fails under CI=true, where it is installed). */
  private static void requireTool(String tool) {
    boolean present =
        java.util.Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
            .anyMatch(d -> Files.isExecutable(Path.of(d, tool)));
    if (!present && "true".equals(System.getenv("CI"))) {
      fail(tool + " is not on PATH but CI=true");
    }
    Assumptions.assumeTrue(present, tool + " is not on PATH");
  }
}
