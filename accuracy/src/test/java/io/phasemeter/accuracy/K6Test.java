package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.testing.TestPki;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * {@code config/k6/phase-envelope.js} run by real k6 (v0.48.0, built by {@code tools/realworld.sh})
 * in front of the proxy, in front of the simulator or llama.cpp's {@code llama-server}, all on
 * loopback: k6's exit code follows the thresholds the script derives from a budgets file, every
 * trace id k6 sent has the proxy's record (from k6's JSON output, where the script puts each
 * request's trace id as metadata), k6's per-request phases are the record's, and the network
 * envelope k6 computes from {@code Server-Timing} agrees with the load client's for the same
 * traffic. Each test writes its processes' logs and k6's outputs under {@code
 * accuracy/target/k6/<test>} (the simulator and the proxy the simulator's tests share, under {@code
 * accuracy/target/k6/simulator-proxy}) and prints one line of figures.
 */
class K6Test {
  static final Path ROOT = AccuracySuiteTest.ROOT;
  static final Path SCRIPT = ROOT.resolve("config/k6/phase-envelope.js");
  static final String SIM_MODEL = "sim-llama";
  static final String TREND_STATS = "avg,min,med,max,p(90),p(95),p(99),count";
  static final int MAX_TOKENS = 8;

  /**
   * |k6's network envelope p50 − the load client's| on loopback, same traffic shape. They differ by
   * construction by a fraction of a millisecond each way: k6's holds the proxy's {@code write} tail
   * (it subtracts only the phases in Server-Timing), the client's holds its schedule lag (it
   * measures from the intended start); and each holds its own client's time between the socket and
   * its clock, which is larger in the load client's JVM than in k6's Go. Measured side by side on a
   * shared two-core machine: the load client's p50 0.5 to 1.3 ms above k6's (once 2.0 ms); the
   * bound leaves room for a loaded CI machine, and still fails an envelope that holds a phase.
   */
  static final double ENVELOPE_P50_TOLERANCE_MS = 5.0;

  /** Server-Timing and the record both print milliseconds with three decimals. */
  static final double PRINTED_MS = 0.0011;

  private static final Pattern STALE_RETRIES =
      Pattern.compile("(?m)^llm_upstream_stale_retries_total\\{[^}]*} ([0-9.eE+]+)$");

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private final List<Process> processes = new ArrayList<>();

  /**
   * The simulator and the proxy in front of it, which three of the tests use as they are: started
   * by the first of them (logs under {@code accuracy/target/k6/simulator-proxy}), stopped after the
   * last. Each test finds its own requests by their trace ids.
   */
  private static final List<Process> SIM_PROXY = new ArrayList<>();

  private static int simPort;
  private static int simProxyPort;
  private static int simAdminPort;
  private RealWorld rw;
  private Path work;
  private int proxyPort;
  private int adminPort;
  private long started;

  @BeforeEach
  void setUp(TestInfo info) throws Exception {
    rw = RealWorld.require();
    assertThat(AccuracySuiteTest.SIM_JAR).as("build the modules first (mvn install)").exists();
    assertThat(AccuracySuiteTest.PROXY_JAR).exists();
    assertThat(AccuracySuiteTest.LOAD_JAR).exists();
    work = ROOT.resolve("accuracy/target/k6").resolve(info.getTestMethod().orElseThrow().getName());
    AccuracySuiteTest.deleteTree(work);
    Files.createDirectories(work);
    started = System.nanoTime();
  }

  @AfterEach
  void stopProcesses() throws Exception {
    stop(processes);
  }

  @AfterAll
  static void stopSimulatorAndProxy() throws Exception {
    stop(SIM_PROXY);
  }

  private static void stop(List<Process> processes) throws Exception {
    List<Process> reversed = new ArrayList<>(processes);
    Collections.reverse(reversed);
    for (Process p : reversed) {
      Procs.stop(p);
    }
    processes.clear();
  }

  /**
   * The shared simulator and proxy (started if none is yet): proxyPort and adminPort are theirs.
   */
  private void simulatorAndProxy() throws Exception {
    if (SIM_PROXY.isEmpty()) {
      Path dir = ROOT.resolve("accuracy/target/k6/simulator-proxy");
      AccuracySuiteTest.deleteTree(dir);
      Files.createDirectories(dir);
      try {
        simPort = startSim(dir, SIM_PROXY);
        startProxy(SIM_MODEL, simPort, dir, SIM_PROXY);
      } catch (Exception | AssertionError e) {
        stop(SIM_PROXY); // the next test starts them afresh
        throw e;
      }
      simProxyPort = proxyPort;
      simAdminPort = adminPort;
    }
    proxyPort = simProxyPort;
    adminPort = simAdminPort;
  }

  @Test
  void budgetsThatHoldExitZeroAndEveryTraceIdHasTheProxysRecord() throws Exception {
    simulatorAndProxy();
    K6Started started = startK6("holds", SIM_MODEL, 5, "8s", Map.of());
    K6Run run = finish(started);

    assertThat(run.exit()).as("k6 exit code (%s)", run.log()).isZero();
    assertThat(run.output()).doesNotContain("have been crossed");
    assertThat(run.requests()).as("requests k6 sent").hasSizeGreaterThanOrEqualTo(20);
    assertThat(run.summary().at("/metrics/http_req_failed/passes").asLong()).isZero();

    // Every trace id k6 sent, from its JSON output, looked up on the proxy's admin listener; k6's
    // phases (parsed from Server-Timing by the script under goja) are the record's, and its
    // envelope is its duration less them.
    int found = 0;
    List<Double> envelopes = new ArrayList<>();
    for (K6Request r : run.requests().values()) {
      JsonNode rec = joined(r);
      if (rec == null) {
        continue;
      }
      found++;
      envelopes.add(r.trend("phasemeter_network_envelope"));
    }
    assertThat(found).as("trace ids with a proxy record (join coverage)").isEqualTo(run.size());
    joinK6(started, run.size());
    assertThat(run.summary().at("/metrics/phasemeter_negative_envelopes/count").asLong(0)).isZero();
    JsonNode env = run.summary().at("/metrics/phasemeter_network_envelope");
    System.out.printf(
        Locale.ROOT,
        "K6Test holds: k6 %s, %d requests at 5/s for 8s through the proxy to the simulator, exit %d,"
            + " join coverage %d/%d (%.1f %%), k6's phases = the records' for all %d, envelope p50"
            + " %.2f p95 %.2f ms, %.0f s%n",
        rw.k6Version,
        run.size(),
        run.exit(),
        found,
        run.size(),
        100.0 * found / run.size(),
        envelopes.size(),
        env.get("med").asDouble(),
        env.get("p(95)").asDouble(),
        seconds());
  }

  /**
   * The proxy's record of {@code r}, or null when it has none; k6's phases (parsed from
   * Server-Timing by the script under goja) are the record's, and its envelope is its duration less
   * them.
   */
  private JsonNode joined(K6Request r) throws Exception {
    JsonNode rec = record(r.traceId());
    if (rec == null) {
      return null;
    }
    assertThat(rec.get("status").asInt()).isEqualTo(r.status());
    JsonNode phases = rec.get("phases_ms");
    assertThat(r.trend("phasemeter_queue"))
        .as("queue of %s", r.traceId())
        .isCloseTo(phases.get("queue").asDouble(), within(PRINTED_MS));
    assertThat(r.trend("phasemeter_receive"))
        .isCloseTo(phases.get("receive").asDouble(), within(PRINTED_MS));
    assertThat(r.trend("phasemeter_generation"))
        .isCloseTo(phases.get("generation").asDouble(), within(PRINTED_MS));
    assertThat(r.trend("phasemeter_gateway"))
        .isCloseTo(rec.get("gateway_ms").asDouble(), within(0.01));
    double reported = 0;
    for (String p : List.of("auth", "receive", "prepare", "route", "queue", "generation")) {
      reported += phases.get(p).asDouble();
    }
    double envelope = r.trend("phasemeter_network_envelope");
    assertThat(envelope).isCloseTo(r.durationMs() - reported, within(0.01));
    // At least what k6 waited beyond the proxy's whole root span (the envelope also holds the
    // write tail and the gaps between spans, which Server-Timing does not list).
    assertThat(envelope)
        .isGreaterThanOrEqualTo(r.durationMs() - rec.get("root_ms").asDouble() - 0.01);
    return rec;
  }

  /**
   * {@code phasemeter load join-k6} on the same k6 JSON output: Phasemeter's own join finds every
   * record (join coverage 100 %) and writes a row per request; its envelope figures are printed.
   */
  private void joinK6(K6Started k6, int requests) throws Exception {
    Path joinDir = work.resolve("join-" + k6.name());
    Process p =
        Procs.start(
            AccuracySuiteTest.LOAD_JAR,
            List.of(),
            List.of(
                "join-k6",
                k6.samples().toString(),
                "--admin",
                "http://127.0.0.1:" + adminPort,
                "--out",
                joinDir.toString()),
            Map.of(),
            work,
            "join-" + k6.name());
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("join-k6 finished").isTrue();
    String said = Files.readString(work.resolve("join-" + k6.name() + ".out"));
    assertThat(p.exitValue()).as(said).isZero();
    assertThat(said)
        .contains(
            requests + " requests, " + requests + " with a proxy record (join coverage 100.0%)");
    assertThat(Files.readAllLines(joinDir.resolve("k6-join.csv"))).hasSize(requests + 1);
    System.out.println("K6Test join-k6: " + said.lines().skip(1).findFirst().orElse(""));
  }

  @Test
  void anImpossibleBudgetExits99AndNamesTheThreshold() throws Exception {
    simulatorAndProxy();
    // config/budgets.yaml with a generation budget no request can meet (each takes tens of ms).
    String shipped = Files.readString(ROOT.resolve("config/budgets.yaml"));
    String tiny = shipped.replace("limits_ms: {", "limits_ms: {generation: 1, ");
    assertThat(tiny).isNotEqualTo(shipped);
    Path budgets = work.resolve("budgets-tiny-generation.yaml");
    Files.writeString(budgets, tiny);
    // open() resolves BUDGETS from the script's directory, whatever k6's working directory.
    String relative = SCRIPT.getParent().relativize(budgets).toString();
    K6Run run = k6("breach", SIM_MODEL, 5, "5s", Map.of("BUDGETS", relative));

    assertThat(run.exit()).as("k6 exit code (%s)", run.log()).isEqualTo(99);
    assertThat(run.output())
        .contains("thresholds on metrics 'phasemeter_generation' have been crossed")
        .contains("✗ phasemeter_generation");
    JsonNode m = run.summary().get("metrics");
    // --summary-export marks a threshold true when it was crossed.
    assertThat(m.at("/phasemeter_generation/thresholds").get("p(95)<1").asBoolean()).isTrue();
    assertThat(m.at("/phasemeter_queue/thresholds").get("p(95)<250").asBoolean()).isFalse();
    assertThat(m.at("/phasemeter_network_envelope/thresholds").get("p(95)<120").asBoolean())
        .isFalse();
    assertThat(m.at("/http_req_failed/passes").asLong()).isZero();
    System.out.printf(
        Locale.ROOT,
        "K6Test breach: BUDGETS=%s (generation p95 < 1 ms), %d requests, generation p95 %.1f ms,"
            + " exit %d naming phasemeter_generation, other thresholds held, %.0f s%n",
        relative,
        run.size(),
        m.at("/phasemeter_generation/p(95)").asDouble(),
        run.exit(),
        seconds());
  }

  @Test
  void k6sNetworkEnvelopeAgreesWithTheLoadClientsForTheSameTraffic() throws Exception {
    simulatorAndProxy();
    // Side by side, through the same proxy over the same ten seconds, so that both clients meet
    // the same machine (run one after the other, the first one met three busy JVMs and the
    // second two, and their medians once drifted 2.0 ms apart). k6 starts when the load client's
    // warm-up, which also warms the proxy and the simulator, is over.
    Path out = work.resolve("load");
    Process load =
        Procs.start(
            AccuracySuiteTest.LOAD_JAR,
            List.of(),
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + proxyPort,
                "--admin",
                "http://127.0.0.1:" + adminPort,
                "--model",
                SIM_MODEL,
                "--rate",
                "5",
                "--arrival",
                "constant",
                "--duration",
                "10s",
                "--warmup-duration",
                "3s",
                // The script's request: a short chat message, max_tokens, a whole response.
                "--chat",
                "--no-stream",
                "--output-tokens",
                Integer.toString(MAX_TOKENS),
                "--report-interval",
                "60s",
                "--join-grace",
                "1s",
                "--out",
                out.toString()),
            Map.of(),
            work,
            "load");
    processes.add(load);
    awaitLine(work.resolve("load.out"), "phasemeter load: clock starts", load);
    K6Run run = finish(startK6("envelope", SIM_MODEL, 5, "10s", Map.of()));
    assertThat(load.waitFor(120, TimeUnit.SECONDS)).as("load client finished").isTrue();
    assertThat(load.exitValue()).as("load client exit code (see %s)", work).isZero();
    assertThat(run.exit()).as("k6 exit code (%s)", run.log()).isZero();
    JsonNode client = json.readTree(out.resolve("summary.json").toFile());
    assertThat(client.at("/join_coverage").asDouble()).isEqualTo(1.0);

    JsonNode k6Env = run.summary().at("/metrics/phasemeter_network_envelope");
    JsonNode clientEnv = client.at("/phases/network_envelope");
    double k6P50 = k6Env.get("med").asDouble();
    double clientP50 = clientEnv.get("p50_ms").asDouble();
    assertThat(k6Env.get("count").asLong()).isEqualTo(run.size());
    assertThat(clientEnv.get("count").asLong()).isGreaterThanOrEqualTo(40);
    System.out.printf(
        Locale.ROOT,
        "K6Test envelope: side by side at 5/s each for 10s, chat, %d output tokens, whole"
            + " responses; network envelope p50 k6 %.2f ms (n=%d, p95 %.2f) vs load client %.2f"
            + " ms (n=%d, p95 %.2f; its schedule lag p50 %.2f, the proxy's write p50 %.2f):"
            + " |diff| %.2f ms, tolerance %.1f ms, %.0f s%n",
        MAX_TOKENS,
        k6P50,
        k6Env.get("count").asLong(),
        k6Env.get("p(95)").asDouble(),
        clientP50,
        clientEnv.get("count").asLong(),
        clientEnv.get("p95_ms").asDouble(),
        client.at("/phases/schedule_lag/p50_ms").asDouble(),
        client.at("/phases/write/p50_ms").asDouble(),
        Math.abs(k6P50 - clientP50),
        ENVELOPE_P50_TOLERANCE_MS,
        seconds());
    assertThat(k6P50)
        .as("k6's network envelope p50 against the load client's")
        .isCloseTo(clientP50, within(ENVELOPE_P50_TOLERANCE_MS));
  }

  @Test
  void throughTheProxyToLlamaServerWithoutNoReuse() throws Exception {
    int llamaPort = Procs.freePort();
    processes.add(rw.startLlama(llamaPort, 2, List.of(), work, "llama"));
    startProxy(RealWorld.MODEL, llamaPort, work, processes);
    Path loose = work.resolve("budgets-loose.yaml");
    Files.writeString(
        loose,
        String.join(
            "\n",
            "budgets:",
            "  - name: loose",
            "    model: \"*\"",
            "    quantile: 0.95",
            "    limits_ms: {network_envelope: 1000, gateway: 1000, queue: 10000,"
                + " generation: 30000}",
            "    max_error_rate: 0.01",
            ""));
    // No NO_REUSE: k6's connections end at the proxy, which keeps them open whatever the engine
    // behind it does with its own.
    K6Run run = k6("llama", RealWorld.MODEL, 3, "8s", Map.of("BUDGETS", loose.toString()));
    assertThat(run.exit()).as("k6 exit code (%s)", run.log()).isZero();
    assertThat(run.summary().at("/metrics/http_req_failed/passes").asLong()).isZero();
    assertThat(run.requests()).hasSizeGreaterThanOrEqualTo(12);
    int found = 0;
    for (K6Request r : run.requests().values()) {
      JsonNode rec = record(r.traceId());
      if (rec != null && rec.get("model").asText().equals(RealWorld.MODEL)) {
        found++;
      }
    }
    assertThat(found).as("trace ids with a proxy record").isEqualTo(run.size());
    String metrics = get("http://127.0.0.1:" + adminPort + "/metrics").body();
    Matcher stale = STALE_RETRIES.matcher(metrics);
    double staleRetries = stale.find() ? Double.parseDouble(stale.group(1)) : Double.NaN;

    // And k6 at llama-server itself, reusing connections too: the script's whole (not streamed)
    // responses leave llama-server's connections open, so none fails; no Server-Timing comes back,
    // so the run fails on phasemeter_missing_server_timing instead of passing the envelope budgets
    // on no samples.
    K6Run direct =
        k6(
            "llama-direct",
            RealWorld.MODEL,
            3,
            "6s",
            Map.of("BASE_URL", "http://127.0.0.1:" + llamaPort, "BUDGETS", loose.toString()));
    assertThat(direct.exit()).as("k6 exit code (%s)", direct.log()).isEqualTo(99);
    assertThat(direct.output())
        .contains("thresholds on metrics 'phasemeter_missing_server_timing' have been crossed");
    assertThat(direct.summary().at("/metrics/http_req_failed/passes").asLong()).isZero();
    long reusedDirect = direct.requests().values().stream().filter(K6Request::reused).count();
    assertThat(reusedDirect).as("requests k6 sent on a kept-alive connection").isPositive();

    System.out.printf(
        Locale.ROOT,
        "K6Test llama: llama-server %s, k6 -> proxy -> llama-server at 3/s for 8s: %d requests,"
            + " exit %d, 0 failed, join coverage %d/%d, %d on reused connections, proxy stale"
            + " retries %.0f, envelope p50 %.2f ms, generation p50 %.1f ms; k6 -> llama-server"
            + " direct: %d requests, %d on reused connections, 0 failed, exit %d"
            + " (phasemeter_missing_server_timing), %.0f s%n",
        rw.llamaVersion,
        run.size(),
        run.exit(),
        found,
        run.size(),
        run.requests().values().stream().filter(K6Request::reused).count(),
        staleRetries,
        run.summary().at("/metrics/phasemeter_network_envelope/med").asDouble(),
        run.summary().at("/metrics/phasemeter_generation/med").asDouble(),
        direct.size(),
        reusedDirect,
        direct.exit(),
        seconds());
  }

  /**
   * The script over https against the proxy's {@code listen.tls}, k6 trusting the test CA through
   * {@code SSL_CERT_FILE} (Go reads it on Linux in place of the system's roots; k6 v0.48 has no CA
   * option of its own) and nothing else: a control run trusting another CA fails every request. k6
   * negotiates h2 by ALPN (its {@code proto} tag) and the proxy's records say the same. With
   * keep-alive (k6's default), phasemeter_tls has one value per connection opened, each above zero:
   * the requests k6 measured a connect for, no more than its VUs, fewer than its requests.
   */
  @Test
  void overHttpsToListenTlsTheEnvelopeHasTheHandshake() throws Exception {
    TestPki pki = TestPki.create(work.resolve("pki"), "k6-test-ca");
    TestPki.Issued cert = pki.server("proxy", "localhost", "127.0.0.1");
    Path otherCa = TestPki.create(work.resolve("pki-other"), "other-ca").caFile();
    simulatorAndProxy(); // its simulator, behind a proxy of this test's own
    startProxy(
        SIM_MODEL,
        simPort,
        ", tls: {cert_file: '" + cert.certFile() + "', key_file: '" + cert.keyFile() + "'}",
        work,
        processes);
    // Budgets a proxy that has just started meets (its first handshakes and requests run before
    // the JIT), with the connection phases k6 can see: tls and connect become thresholds too.
    Path budgets = work.resolve("budgets-https.yaml");
    Files.writeString(
        budgets,
        String.join(
            "\n",
            "budgets:",
            "  - name: https",
            "    model: \"*\"",
            "    quantile: 0.95",
            "    limits_ms: {network_envelope: 1000, gateway: 1000, queue: 10000,"
                + " generation: 30000, connect: 1000, tls: 5000}",
            "    max_error_rate: 0.01",
            ""));
    Map<String, String> https =
        Map.of("BASE_URL", "https://127.0.0.1:" + proxyPort, "BUDGETS", budgets.toString());

    K6Run untrusted =
        finish(
            startK6(
                "untrusted",
                SIM_MODEL,
                2,
                "1s",
                https,
                Map.of("SSL_CERT_FILE", otherCa.toString())));
    assertThat(untrusted.size()).isPositive();
    assertThat(untrusted.requests().values()).allSatisfy(r -> assertThat(r.status()).isZero());
    assertThat(untrusted.output()).contains("x509: certificate signed by unknown authority");

    Map<String, String> trust = Map.of("SSL_CERT_FILE", pki.caFile().toString());
    K6Run run = finish(startK6("https", SIM_MODEL, 5, "6s", https, trust));

    assertThat(run.exit()).as("k6 exit code (%s)", run.log()).isZero();
    assertThat(run.summary().at("/metrics/http_req_failed/passes").asLong()).isZero();
    int found = 0;
    for (K6Request r : run.requests().values()) {
      JsonNode rec = joined(r);
      if (rec == null) {
        continue;
      }
      found++;
      assertThat(r.proto()).as("what k6 negotiated").isEqualTo("HTTP/2.0");
      assertThat(rec.get("network_protocol_version").asText()).isEqualTo("2");
      assertThat(r.tlsVersion()).isEqualTo("tls" + rec.get("tls_protocol_version").asText());
    }
    assertThat(found).as("trace ids with a proxy record (join coverage)").isEqualTo(run.size());
    JsonNode tls = run.summary().at("/metrics/phasemeter_tls");
    long opened = run.requests().values().stream().filter(r -> !r.reused()).count();
    long vus = run.summary().at("/metrics/vus_max/max").asLong();
    assertThat(tls.get("count").asLong()).as("handshakes = connections opened").isEqualTo(opened);
    assertThat(opened).as("connections opened (keep-alive)").isBetween(1L, vus);
    assertThat(opened).as("requests on a reused connection have no tls").isLessThan(run.size());
    assertThat(tls.get("min").asDouble()).as("the shortest handshake, ms").isPositive();
    assertThat(tls.at("/thresholds").has("p(95)<5000")).as("the tls budget, judged").isTrue();
    assertThat(run.summary().at("/metrics/phasemeter_connect/count").asLong()).isEqualTo(opened);

    K6Request first = run.requests().values().iterator().next();
    System.out.printf(
        Locale.ROOT,
        "K6Test https: k6 %s over listen.tls (TestPki CA via SSL_CERT_FILE), %s %s; trusting"
            + " another CA: %d of %d failed (x509); keep-alive at 5/s for 6s: %d requests on %d"
            + " connections (vus_max %d), tls p50 %.2f max %.2f ms, connect p50 %.2f ms, envelope"
            + " p50 %.2f ms, join coverage %d/%d, %.0f s%n",
        rw.k6Version,
        first.proto(),
        first.tlsVersion(),
        untrusted.size(),
        untrusted.size(),
        run.size(),
        opened,
        vus,
        tls.get("med").asDouble(),
        tls.get("max").asDouble(),
        run.summary().at("/metrics/phasemeter_connect/med").asDouble(),
        run.summary().at("/metrics/phasemeter_network_envelope/med").asDouble(),
        found,
        run.size(),
        seconds());
  }

  // ---------------------------------------------------------------- processes

  /** The simulator, its logs in {@code dir}, added to {@code into}; its port. */
  private static int startSim(Path dir, List<Process> into) throws Exception {
    int port = Procs.freePort();
    Process sim =
        Procs.start(
            AccuracySuiteTest.SIM_JAR,
            List.of(),
            List.of(
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(port),
                "--model",
                SIM_MODEL,
                "--slots",
                "8",
                "--decode-step-ms",
                "5",
                "--decode-step-growth",
                "0"),
            Map.of(),
            dir,
            "simulator");
    into.add(sim);
    Procs.awaitOk("http://127.0.0.1:" + port + "/health", sim, Duration.ofSeconds(60));
    return port;
  }

  /**
   * The proxy with one pool for {@code model}, every request recorded and exported, its config and
   * logs in {@code dir}, added to {@code into}; proxyPort and adminPort are its.
   */
  private void startProxy(String model, int upstreamPort, Path dir, List<Process> into)
      throws Exception {
    startProxy(model, upstreamPort, "", dir, into);
  }

  /** As above, {@code listenMore} added to the {@code listen} block (", tls: {...}"). */
  private void startProxy(
      String model, int upstreamPort, String listenMore, Path dir, List<Process> into)
      throws Exception {
    proxyPort = Procs.freePort();
    adminPort = Procs.freePort();
    Path config = dir.resolve("proxy.yaml");
    Files.writeString(
        config,
        Procs.proxyConfig(
            proxyPort,
            listenMore,
            adminPort,
            "pools:",
            "  - name: default",
            "    models: [" + model + "]",
            "    upstreams: [http://127.0.0.1:" + upstreamPort + "]",
            "    slots: 2",
            "    queue: {max: 1000, timeout: 30s}",
            "telemetry:",
            "  sampling: {ratio: 1.0, keep_errors: true, keep_slower_than: 2s}",
            "  records: {max: 100000, ttl: 10m}",
            ""));
    Process proxy =
        Procs.start(
            AccuracySuiteTest.PROXY_JAR,
            List.of(),
            List.of("--config", config.toString()),
            Map.of(),
            dir,
            "proxy");
    into.add(proxy);
    Procs.awaitOk("http://127.0.0.1:" + adminPort + "/health/ready", proxy, Duration.ofSeconds(60));
  }

  // ---------------------------------------------------------------- k6

  /** One request as k6's JSON output tells it: the samples carrying its trace id as metadata. */
  record K6Request(
      String traceId,
      int status,
      double durationMs,
      boolean reused,
      String proto,
      String tlsVersion,
      Map<String, Double> trends) {
    double trend(String name) {
      Double v = trends.get(name);
      assertThat(v).as("%s of %s", name, traceId).isNotNull();
      return v;
    }
  }

  record K6Run(
      int exit, String output, String log, JsonNode summary, Map<String, K6Request> requests) {
    int size() {
      return requests.size();
    }
  }

  /**
   * Runs the script at {@code rate}/s for {@code duration} against the proxy (unless {@code env}
   * names another BASE_URL), k6's working directory the test's, with the summary exported (with
   * each Trend's count) and every sample written as JSON.
   */
  private K6Run k6(String name, String model, int rate, String duration, Map<String, String> env)
      throws Exception {
    return finish(startK6(name, model, rate, duration, env));
  }

  /** A k6 run under way, and where it writes. */
  record K6Started(String name, Process process, Path summary, Path samples) {}

  private K6Started startK6(
      String name, String model, int rate, String duration, Map<String, String> env)
      throws Exception {
    return startK6(name, model, rate, duration, env, Map.of());
  }

  /** As above, with {@code processEnv} in k6's environment (SSL_CERT_FILE: the CA k6 trusts). */
  private K6Started startK6(
      String name,
      String model,
      int rate,
      String duration,
      Map<String, String> env,
      Map<String, String> processEnv)
      throws Exception {
    Map<String, String> vars = new LinkedHashMap<>();
    vars.put("BASE_URL", "http://127.0.0.1:" + proxyPort);
    vars.put("MODEL", model);
    vars.put("RATE", Integer.toString(rate));
    vars.put("DURATION", duration);
    vars.put("MAX_TOKENS", Integer.toString(MAX_TOKENS));
    vars.putAll(env);
    List<String> args = new ArrayList<>();
    vars.forEach(
        (k, v) -> {
          args.add("-e");
          args.add(k + "=" + v);
        });
    Path summary = work.resolve(name + "-summary.json");
    Path samples = work.resolve(name + "-samples.json");
    args.addAll(
        List.of(
            "--quiet",
            "--summary-export",
            summary.toString(),
            "--summary-trend-stats",
            TREND_STATS,
            "--out",
            "json=" + samples,
            SCRIPT.toString()));
    Process p = rw.startK6(args, processEnv, work, "k6-" + name);
    processes.add(p);
    return new K6Started(name, p, summary, samples);
  }

  private K6Run finish(K6Started k6) throws Exception {
    String name = k6.name();
    Process p = k6.process();
    if (!p.waitFor(120, TimeUnit.SECONDS)) {
      Procs.stop(p);
      fail("k6 " + name + " did not finish within 120 s");
    }
    String output =
        Files.readString(work.resolve("k6-" + name + ".out"))
            + Files.readString(work.resolve("k6-" + name + ".err"));
    return new K6Run(
        p.exitValue(),
        output,
        "see " + work.resolve("k6-" + name + ".err"),
        json.readTree(k6.summary().toFile()),
        requests(k6.samples()));
  }

  /** Requests by trace id from k6's JSON output; a trace id sent twice fails the test. */
  private Map<String, K6Request> requests(Path samples) throws Exception {
    Map<String, Integer> sent = new LinkedHashMap<>();
    Map<String, Integer> status = new LinkedHashMap<>();
    Map<String, Double> duration = new LinkedHashMap<>();
    Map<String, Boolean> reused = new LinkedHashMap<>();
    Map<String, String> proto = new LinkedHashMap<>();
    Map<String, String> tlsVersion = new LinkedHashMap<>();
    Map<String, Map<String, Double>> trends = new LinkedHashMap<>();
    for (String line : Files.readAllLines(samples)) {
      JsonNode s = json.readTree(line);
      if (!"Point".equals(s.path("type").asText())) {
        continue;
      }
      String metric = s.get("metric").asText();
      JsonNode data = s.get("data");
      String id = data.at("/metadata/trace_id").asText(null);
      if (id == null) {
        continue; // setup()'s samples
      }
      double value = data.get("value").asDouble();
      switch (metric) {
        case "http_reqs" -> sent.merge(id, 1, Integer::sum);
        case "http_req_duration" -> {
          duration.put(id, value);
          status.put(id, data.at("/tags/status").asInt());
          proto.put(id, data.at("/tags/proto").asText(""));
          tlsVersion.put(id, data.at("/tags/tls_version").asText(""));
        }
        case "http_req_connecting" -> reused.put(id, value == 0.0);
        default -> {
          if (metric.startsWith("phasemeter_")) {
            trends.computeIfAbsent(id, k -> new LinkedHashMap<>()).put(metric, value);
          }
        }
      }
    }
    assertThat(sent)
        .as("trace ids k6 sent more than once")
        .allSatisfy((id, n) -> assertThat(n).isOne());
    Map<String, K6Request> out = new LinkedHashMap<>();
    for (String id : sent.keySet()) {
      out.put(
          id,
          new K6Request(
              id,
              status.getOrDefault(id, 0),
              duration.getOrDefault(id, Double.NaN),
              reused.getOrDefault(id, false),
              proto.getOrDefault(id, ""),
              tlsVersion.getOrDefault(id, ""),
              trends.getOrDefault(id, Map.of())));
    }
    return out;
  }

  /** Waits until {@code file} has a line starting with {@code prefix}; fails if {@code p} ends. */
  private static void awaitLine(Path file, String prefix, Process p) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      if (Files.exists(file)
          && Files.readAllLines(file).stream().anyMatch(l -> l.startsWith(prefix))) {
        return;
      }
      assertThat(p.isAlive()).as("%s: process alive, waiting for '%s'", file, prefix).isTrue();
      Thread.sleep(100);
    }
    fail("no line '" + prefix + "' in " + file + " within 60 s");
  }

  // ---------------------------------------------------------------- the proxy's records

  /** The proxy's record of {@code traceId}, or null when it has none after a short wait. */
  private JsonNode record(String traceId) throws Exception {
    // A record is published when the response's end() completes, a moment after its last byte.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (true) {
      HttpResponse<String> r = get("http://127.0.0.1:" + adminPort + "/admin/records/" + traceId);
      if (r.statusCode() == 200) {
        return json.readTree(r.body());
      }
      assertThat(r.statusCode()).as("GET /admin/records/%s", traceId).isEqualTo(404);
      if (System.nanoTime() > deadline) {
        return null;
      }
      Thread.sleep(100);
    }
  }

  private HttpResponse<String> get(String url) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private double seconds() {
    return (System.nanoTime() - started) / 1e9;
  }
}
