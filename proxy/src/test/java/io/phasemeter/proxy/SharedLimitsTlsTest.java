package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.fail;

import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.proxy.gateway.RedisServer;
import io.vertx.core.Vertx;
import java.io.File;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared limits as the README says to run them in production: {@code rediss://} to a
 * redis-server whose TLS port has a certificate from a private CA (trusted through the JVM's trust
 * store) and asks for a password (from {@code password_env}). Before, every decision fell back:
 * Vert.x 5 refuses TLS until a hostname verification algorithm is chosen. A certificate that does
 * not name the host is refused.
 */
class SharedLimitsTlsTest {
  static final String KEY = "sk-tls-team";
  static final String PASSWORD = "redis-secret-for-tests";

  @TempDir Path dir;
  private final Vertx vertx = Vertx.vertx();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  @AfterEach
  void stop() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  @Test
  void redissWithAPasswordSharesTheLimitsAndAWrongNameIsRefused() throws Exception {
    requireOpenssl();
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt");
    Path good = serverCert("good", "IP:127.0.0.1");
    Path wrong = serverCert("wrong", "DNS:elsewhere.example");
    run(
        Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
        "-importcert",
        "-noprompt",
        "-alias",
        "ca",
        "-file",
        "ca.crt",
        "-keystore",
        "trust.p12",
        "-storetype",
        "PKCS12",
        "-storepass",
        "changeit");
    int backend = ProxyJvm.completionBackend(vertx);
    ProxyJvm ok = proxy(backend, tlsRedis(good), "ok");
    ProxyJvm refused = proxy(backend, tlsRedis(wrong), "refused");
    for (int i = 0; i < 3; i++) {
      assertThat(send(ok)).isEqualTo(200);
      assertThat(send(refused)).isEqualTo(200);
    }
    assertThat(ok.metricSum("llm_shared_limits_fallbacks_total"))
        .as("decided by Redis over TLS: %s", ok.stdout())
        .isZero();
    assertThat(ok.metricSum("llm_shared_limits_duration_seconds_count")).isPositive();
    assertThat(ok.metricSum("llm_shared_limits_up")).isEqualTo(1.0);
    assertThat(refused.metricSum("llm_shared_limits_fallbacks_total"))
        .as("a certificate for another name is refused")
        .isPositive();
    assertThat(String.join("\n", refused.stdout())).contains("No subject alternative names");
  }

  /** A redis-server with a TLS port serving {@code cert}, and {@link #PASSWORD}: its TLS port. */
  private int tlsRedis(Path cert) throws Exception {
    int tlsPort = RedisServer.freePort();
    String name = cert.getFileName().toString().replace(".crt", "");
    Path d = Files.createDirectories(dir.resolve("redis-" + name));
    RedisServer r =
        RedisServer.start(
            d,
            List.of(
                "--tls-port",
                Integer.toString(tlsPort),
                "--tls-cert-file",
                cert.toString(),
                "--tls-key-file",
                dir.resolve(name + ".key").toString(),
                "--tls-ca-cert-file",
                dir.resolve("ca.crt").toString(),
                "--tls-auth-clients",
                "no",
                "--requirepass",
                PASSWORD));
    closing.add(r);
    return tlsPort;
  }

  private ProxyJvm proxy(int backend, int redisTlsPort, String name) throws Exception {
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: team, sha256: \"" + HashKeyMain.hash(KEY) + "\", rpm: 600}\n...\n");
    Path yaml = dir.resolve("proxy-" + name + ".yaml");
    Files.writeString(
        yaml,
        ProxyTestBase.yaml(backend, "")
            + "telemetry: {sampling: {ratio: 0.0, keep_errors: false, keep_slower_than: 1h}}\n"
            + "auth:\n"
            + "  enabled: true\n"
            + "  keys_file: "
            + keys
            + "\n"
            + "  shared_limits: {enabled: true, endpoints: ['rediss://127.0.0.1:"
            + redisTlsPort
            + "'], password_env: REDIS_PASSWORD, timeout: 2s}\n");
    ProxyJvm p =
        ProxyJvm.start(
            yaml,
            dir.resolve("proxy-" + name + ".out"),
            Map.of("REDIS_PASSWORD", PASSWORD),
            "-Xmx256m",
            "-Djavax.net.ssl.trustStore=" + dir.resolve("trust.p12"),
            "-Djavax.net.ssl.trustStorePassword=changeit",
            "-Djavax.net.ssl.trustStoreType=PKCS12");
    closing.add(p);
    return p;
  }

  /** A key and a certificate for {@code san}, signed by the test's CA. */
  private Path serverCert(String name, String san) throws Exception {
    Files.writeString(dir.resolve(name + ".ext"), "subjectAltName=" + san + "\n");
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        name + ".key",
        "-out",
        name + ".csr",
        "-subj",
        "/CN=" + name);
    openssl(
        "x509",
        "-req",
        "-in",
        name + ".csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        name + ".crt",
        "-extfile",
        name + ".ext");
    return dir.resolve(name + ".crt");
  }

  private void openssl(String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of("openssl"));
    cmd.addAll(List.of(args));
    if (args[0].equals("req") && List.of(args).contains("-x509")) {
      cmd.addAll(List.of("-days", "2", "-subj", "/CN=phasemeter-test-ca"));
    }
    run(cmd.toArray(String[]::new));
  }

  private void run(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("%s: %s", String.join(" ", cmd), out).isZero();
  }

  /** Skips without openssl on the PATH (fails under CI=true, where Debian's is always there). */
  private static void requireOpenssl() {
    boolean present =
        java.util.Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
            .anyMatch(d -> Files.isExecutable(Path.of(d, "openssl")));
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("openssl is not on PATH but CI=true");
    }
    Assumptions.assumeTrue(present, "openssl is not on PATH");
  }

  private int send(ProxyJvm p) throws Exception {
    HttpRequest req =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p.port + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(10))
            .header("authorization", "Bearer " + KEY)
            .header("content-type", "application/json")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"))
            .build();
    return http.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
  }
}
