package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.testing.TestPki;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run} against the proxy's own TLS and HTTP/2: one simulator, a proxy with {@code
 * listen.tls} (HTTP/2 on by default with it) and {@code admin.tls}, and a plaintext one with {@code
 * listen.http2: true} (h2c), each built from a config file as {@code phasemeter proxy} builds it.
 * The run trusts the test CA ({@code --ca-file}) for its requests and for every admin call (the
 * feed, the stats, the fetch), and a certificate rotated while it runs fails no request.
 */
class TlsHttp2RunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir static Path dir;

  private static Vertx servers;
  private static TestPki pki;
  private static Path servedCert;
  private static Path servedKey;
  private static PhasemeterProxy tls;
  private static PhasemeterProxy h2c;

  @BeforeAll
  static void start() throws Exception {
    servers = Vertx.vertx();
    pki = TestPki.create(dir.resolve("pki"), "test-ca");
    servedCert = dir.resolve("served.crt");
    servedKey = dir.resolve("served.key");
    pki.server("proxy", "localhost", "127.0.0.1").installAs(servedCert, servedKey);
    TestPki.Issued admin = pki.server("admin", "localhost", "127.0.0.1");
    Simulator sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(16)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    String pools =
        "pools:\n  - name: default\n    models: [sim-llama]\n"
            + "    upstreams: [http://127.0.0.1:"
            + sim.port()
            + "]\n    slots: 16\n    health: {path: null}\n";
    tls =
        proxy(
            "tls.yaml",
            "listen: {host: 127.0.0.1, port: 0, tls: {cert_file: '"
                + servedCert
                + "', key_file: '"
                + servedKey
                + "', reload_interval: 200ms}}\n"
                + "admin: {host: 127.0.0.1, port: 0, tls: {cert_file: '"
                + admin.certFile()
                + "', key_file: '"
                + admin.keyFile()
                + "'}}\n"
                + pools);
    h2c =
        proxy(
            "h2c.yaml",
            "listen: {host: 127.0.0.1, port: 0, http2: true}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + pools);
  }

  private static PhasemeterProxy proxy(String name, String yaml) throws Exception {
    Path file = dir.resolve(name);
    Files.writeString(file, yaml);
    return PhasemeterProxy.builder(servers, ConfigLoader.load(file))
        .start()
        .await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  /** A finished run: its summary and pairs.csv's rows by column. */
  private record Run(JsonNode summary, List<String> header, List<List<String>> rows) {
    JsonNode conditions() {
      return summary.get("conditions");
    }

    List<String> column(String name) {
      int i = header.indexOf(name);
      return rows.stream().map(r -> r.get(i)).toList();
    }
  }

  private static Run run(String name, String... flags) throws Exception {
    Path out = dir.resolve(name);
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--model",
                "sim-llama",
                "--concurrency",
                "4",
                "--input-tokens",
                "32",
                "--output-tokens",
                "8",
                "--report-interval",
                "1s",
                "--out",
                out.toString()));
    args.addAll(Arrays.asList(flags));
    StringWriter said = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(said, true), new PrintWriter(said, true))
            .execute(RunArgs.quiet(args));
    assertThat(code).as(said.toString()).isZero();
    List<String> lines = Files.readAllLines(out.resolve("pairs.csv"));
    return new Run(
        JSON.readTree(out.resolve("summary.json").toFile()),
        RunMerge.splitCsv(lines.get(0)),
        lines.subList(1, lines.size()).stream().map(RunMerge::splitCsv).toList());
  }

  /** Every request answered and joined over an https admin listener. */
  private static void allOkAndJoined(Run r) {
    JsonNode requests = r.summary().get("requests");
    assertThat(requests.get("ok").asLong()).isPositive();
    assertThat(requests.get("errors").asLong()).isZero();
    assertThat(r.summary().get("join_coverage").asDouble()).isEqualTo(1.0);
  }

  /** {@code tls} only on the requests that opened their connection, and some that reused one. */
  private static void tlsOnlyWhereAConnectionWasOpened(Run r) {
    List<String> connect = r.column("connect_ms");
    List<String> tlsMs = r.column("tls_ms");
    for (int i = 0; i < connect.size(); i++) {
      assertThat(tlsMs.get(i).isEmpty()).as("row %d", i).isEqualTo(connect.get(i).isEmpty());
    }
    assertThat(tlsMs).anyMatch(t -> !t.isEmpty() && Double.parseDouble(t) > 0);
    assertThat(tlsMs).anyMatch(String::isEmpty);
  }

  private String[] overTls(String... more) {
    List<String> a =
        new ArrayList<>(
            List.of(
                "--url",
                "https://127.0.0.1:" + tls.port(),
                "--admin",
                "https://127.0.0.1:" + tls.adminPort(),
                "--ca-file",
                pki.caFile().toString()));
    a.addAll(Arrays.asList(more));
    return a.toArray(String[]::new);
  }

  private static String[] concat(String[] a, String... b) {
    List<String> all = new ArrayList<>(Arrays.asList(a));
    all.addAll(Arrays.asList(b));
    return all.toArray(String[]::new);
  }

  @Test
  void h2AndHttp11OverTlsJoinEveryRecordThroughTheHttpsAdminListener() throws Exception {
    Run h2 = run("h2", concat(overTls("--http2"), "--duration", "1s"));
    Run h1 = run("h1", concat(overTls(), "--duration", "1s"));

    allOkAndJoined(h2);
    assertThat(h2.conditions().get("protocol").asText()).isEqualTo("h2");
    assertThat(h2.conditions().get("tls_version").asText()).isEqualTo("1.3");
    assertThat(h2.conditions().get("tls_verify").asText()).isEqualTo("on");
    tlsOnlyWhereAConnectionWasOpened(h2);
    allOkAndJoined(h1);
    assertThat(h1.conditions().get("protocol").asText()).isEqualTo("http/1.1");
    assertThat(h1.conditions().get("tls_version").asText()).isEqualTo("1.3");
    tlsOnlyWhereAConnectionWasOpened(h1);
  }

  @Test
  void h2cWithPriorKnowledgeOverPlainHttp() throws Exception {
    Run r =
        run(
            "h2c",
            "--url",
            "http://127.0.0.1:" + h2c.port(),
            "--admin",
            "http://127.0.0.1:" + h2c.adminPort(),
            "--http2",
            "--duration",
            "1s");

    allOkAndJoined(r);
    assertThat(r.conditions().get("protocol").asText()).isEqualTo("h2");
    assertThat(r.conditions().get("tls_version").isNull()).isTrue();
    assertThat(r.column("tls_ms")).allMatch(String::isEmpty);
    assertThat(r.column("connect_ms")).anyMatch(c -> !c.isEmpty());
  }

  @Test
  void aCertificateRotatedDuringARunFailsNoRequest() throws Exception {
    double reloadsBefore = reloads("ok");
    double servedBefore = served();
    TestPki.Issued next = pki.server("rotated", "localhost", "127.0.0.1");
    // Every request opens its own connection: those after the reload meet the new certificate.
    CompletableFuture<Run> running =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return run("rotation", overTls("--connection-reuse", "off", "--duration", "3s"));
              } catch (Exception e) {
                throw new AssertionError(e);
              }
            });
    // Rotated once the run is under way (requests served), not after a guessed sleep: on a busy
    // machine the run's start can take longer than any fixed wait.
    await(() -> served() >= servedBefore + 3, "three requests served before the rotation");
    next.installAs(servedCert, servedKey);
    await(() -> reloads("ok") >= reloadsBefore + 1, "the listener taking the new pair");
    double servedAtReload = served();
    Run r = running.get(60, TimeUnit.SECONDS);

    allOkAndJoined(r);
    // Requests went out on both sides of the reload, each on a connection of its own.
    assertThat(served()).isGreaterThan(servedAtReload);
    // Every request opened its own connection, so every row has its handshake (or the part of
    // one it waited through, when it took a connection begun for another request).
    assertThat(r.column("tls_ms")).isNotEmpty().allMatch(t -> !t.isEmpty());
    assertThat(r.column("connect_ms")).allMatch(t -> !t.isEmpty());
    assertThat(reloads("ok")).isEqualTo(reloadsBefore + 1);
    assertThat(reloads("failed")).isZero();
  }

  private interface Check {
    boolean holds() throws Exception;
  }

  private static void await(Check check, String what) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!check.holds()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("waited 30 s for " + what);
      }
      Thread.sleep(20);
    }
  }

  /** Requests the TLS proxy finished so far: its {@code auth} phase's count, over all series. */
  private static double served() throws Exception {
    Matcher m =
        Pattern.compile(
                "(?m)^llm_phase_duration_seconds_count\\{[^}]*llm_phase=\"auth\"[^}]*\\} (\\S+)$")
            .matcher(metrics());
    double sum = 0;
    while (m.find()) {
      sum += Double.parseDouble(m.group(1));
    }
    return sum;
  }

  /**
   * {@code llm_tls_reloads_total} of the public listener, scraped from the https admin listener
   * with the JDK's client and the run's trust ({@link Transport#applyTrust}).
   */
  private static double reloads(String result) throws Exception {
    String text = metrics();
    Matcher m =
        Pattern.compile(
                "(?m)^llm_tls_reloads_total\\{listener=\"public\",result=\""
                    + result
                    + "\"\\} (\\S+)$")
            .matcher(text);
    assertThat(m.find()).as(text).isTrue();
    return Double.parseDouble(m.group(1));
  }

  /**
   * The TLS proxy's /metrics, from its https admin listener with the JDK's client and the run's
   * trust.
   */
  private static String metrics() throws Exception {
    HttpClient http =
        Transport.of(pki.caFile(), false, false).applyTrust(HttpClient.newBuilder()).build();
    return http.send(
            HttpRequest.newBuilder(URI.create("https://127.0.0.1:" + tls.adminPort() + "/metrics"))
                .build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }
}
