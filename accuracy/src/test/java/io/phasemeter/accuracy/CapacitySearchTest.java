package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Where the truth is known, the phase a budget run blames is the one a fault was injected into: the
 * simulator ({@code --decode-step-growth 0}, slots to spare) behind the proxy, every piece a
 * separate process on real loopback sockets, and a {@link DelayRelay} in this JVM where the fault
 * is. A slow Redis under {@code auth.shared_limits} (the relay between the proxy and a real {@code
 * redis-server}) must be named {@code gateway}; a slow network between the load client and the
 * proxy, {@code network_envelope}. Against llama-server from the kit the run completes and names a
 * phase of the catalogue. Each test prints one line of figures; nothing is asserted on a time.
 */
class CapacitySearchTest {
  private static final Path ROOT = AccuracySuiteTest.ROOT;
  private static final Path SIM_JAR = AccuracySuiteTest.SIM_JAR;
  private static final Path PROXY_JAR = AccuracySuiteTest.PROXY_JAR;
  private static final Path LOAD_JAR = AccuracySuiteTest.LOAD_JAR;
  private static final String MODEL = AccuracySuiteTest.MODEL;

  /** One request on the simulator: 200 tokens at 10,000/s (20 ms) + 15 steps of 5 ms. */
  private static final int INPUT_TOKENS = 200;

  private static final int OUTPUT_TOKENS = 16;

  /** The API key the load client sends when auth is on (a test value, never a real one). */
  private static final String API_KEY = "pm-test-capacity-search-key-0001";

  private static final String KEY_ENV = "PHASEMETER_TEST_API_KEY";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern BREACH = Pattern.compile("BREACH (\\S+): (\\S+) .*\\(page: (.+)\\)");

  private Path work;
  private Vertx vertx;
  private final List<Process> processes = Collections.synchronizedList(new ArrayList<>());
  private final List<DelayRelay> relays = new ArrayList<>();
  private int proxyPort;
  private int adminPort;
  private long started;

  @BeforeEach
  void setUp(TestInfo info) throws Exception {
    assertThat(SIM_JAR).as("build the modules first (mvn package -DskipTests)").exists();
    assertThat(PROXY_JAR).exists();
    assertThat(LOAD_JAR).exists();
    work = ROOT.resolve("accuracy/target/capacity").resolve(info.getTestMethod().get().getName());
    AccuracySuiteTest.deleteTree(work);
    Files.createDirectories(work);
    vertx = Vertx.vertx();
    started = System.nanoTime();
  }

  @AfterEach
  void tearDown() throws Exception {
    List<Process> all;
    synchronized (processes) {
      all = new ArrayList<>(processes);
    }
    Collections.reverse(all);
    for (Process p : all) {
      Procs.stop(p);
    }
    for (DelayRelay r : relays) {
      r.close();
    }
    vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  // ------------------------------------------------------------------------------------ tests

  @Test
  void aSlowSharedLimitsRedisIsNamedGateway() throws Exception {
    requireRedis();
    int redis = startRedis();
    // Each of the key's two decisions (auth: the request, prepare: the token estimate) is one
    // round trip to Redis through the relay: 2 x 2 x 15 ms in gateway, far under the 1 s
    // timeout, so no decision falls back to the replica's own buckets.
    DelayRelay slowRedis = relay(redis, 15);
    Path keys = work.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: capacity, sha256: \""
            + sha256(API_KEY)
            + "\", rpm: 10000000, tpm: 1000000000}\n...\n");
    startSim(64);
    startProxy(
        64,
        "auth:",
        "  enabled: true",
        "  keys_file: " + keys,
        "  shared_limits: {enabled: true, endpoints: ['redis://127.0.0.1:"
            + slowRedis.port()
            + "'], timeout: 1s, on_failure: fail_closed}");
    Path budgets = budgets("slow-redis", "{gateway: 20, queue: 2000, ttft: 5000}");

    Run run = loadRun("breach", proxyUrl(), budgets, 10, KEY_ENV);
    assertThat(run.exit()).as("budget run exit code (see " + work + ")").isEqualTo(3);
    assertThat(run.breachedPhases()).as(run.out()).containsExactly("gateway");
    assertThat(run.pages()).as(run.out()).containsExactly("gateway");
    assertThat(run.summary().at("/requests/errors").asLong()).as("errors").isZero();
    assertThat(metric("llm_shared_limits_fallbacks_total"))
        .as("decisions made without Redis")
        .isZero();
    System.out.printf(
        Locale.ROOT,
        "capacity, slow Redis (15 ms each way, shared limits): load run at 10/s: %d ok, gateway"
            + " p95 %.1f ms against 20, queue p95 %.1f ms; BREACH named %s; %.0f s%n",
        run.summary().at("/requests/ok").asLong(),
        p95(run.summary(), "gateway"),
        p95(run.summary(), "queue"),
        run.breachedPhases(),
        seconds());
  }

  @Test
  void aSlowNetworkBeforeTheProxyIsNamedNetworkEnvelope() throws Exception {
    startSim(64);
    startProxy(64);
    DelayRelay slowNetwork = relay(proxyPort, 20);
    Path budgets = budgets("slow-network", "{network_envelope: 25, queue: 2000, ttft: 5000}");

    Run run = loadRun("breach", "http://127.0.0.1:" + slowNetwork.port(), budgets, 10, null);
    assertThat(run.exit()).as("budget run exit code (see " + work + ")").isEqualTo(3);
    assertThat(run.breachedPhases()).as(run.out()).containsExactly("network_envelope");
    assertThat(run.summary().at("/requests/errors").asLong()).as("errors").isZero();
    System.out.printf(
        Locale.ROOT,
        "capacity, slow network (20 ms each way before the proxy): load run at 10/s: %d ok,"
            + " network_envelope p95 %.1f ms against 25, gateway p95 %.1f ms; BREACH named %s;"
            + " %.0f s%n",
        run.summary().at("/requests/ok").asLong(),
        p95(run.summary(), "network_envelope"),
        p95(run.summary(), "gateway"),
        run.breachedPhases(),
        seconds());
  }

  @Test
  void llamaServerBehindTheProxyCompletesAndNamesAPhase() throws Exception {
    RealWorld rw = RealWorld.require();
    int llama = Procs.freePort();
    // One sequence at a time, so the knee lies at a few requests a second (64:32 takes about
    // 200 ms on this engine with one thread), and the proxy's one slot queues the rest.
    processes.add(rw.startLlama(llama, 1, List.of(), work, "llama"));
    startProxy(RealWorld.MODEL, "http://127.0.0.1:" + llama, 1);
    Path budgets = budgets("llama-queue", "{queue: 250}");

    Run run = loadRun("breach", RealWorld.MODEL, proxyUrl(), budgets, 12, 64, 32, null);
    assertThat(run.exit()).as("budget run exit code (see " + work + ")").isEqualTo(3);
    assertThat(run.breachedPhases()).as(run.out()).containsExactly("queue");
    System.out.printf(
        Locale.ROOT,
        "capacity, llama-server (1 slot, 64:32): load run at 12/s: %d ok, queue p95 %.1f ms"
            + " against 250, generation p50 %.1f ms; BREACH named %s; %.0f s%n",
        run.summary().at("/requests/ok").asLong(),
        p95(run.summary(), "queue"),
        run.summary().at("/phases/generation/p50_ms").asDouble(),
        run.breachedPhases(),
        seconds());
  }

  // -------------------------------------------------------------------------------- fixtures

  /** A budgets file of one budget at p95 with these limits. */
  private Path budgets(String name, String limits) throws IOException {
    Path file = work.resolve("budgets.yaml");
    Files.writeString(
        file,
        String.join(
            "\n",
            "budgets:",
            "  - name: " + name,
            "    model: \"*\"",
            "    quantile: 0.95",
            "    window: 10m",
            "    limits_ms: " + limits,
            ""));
    return file;
  }

  /** The simulator: 20 ms prefill and 15 steps of 5 ms a request, no slow-down with the batch. */
  private void startSim(int slots) throws Exception {
    int port = Procs.freePort();
    Process p =
        Procs.start(
            SIM_JAR,
            List.of(),
            List.of(
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(port),
                "--model",
                MODEL,
                "--slots",
                Integer.toString(slots),
                "--decode-step-ms",
                "5",
                "--decode-step-growth",
                "0",
                "--prefill-tokens-per-s",
                "10000"),
            Map.of(),
            work,
            "simulator");
    processes.add(p);
    Procs.awaitOk("http://127.0.0.1:" + port + "/health", p, Duration.ofSeconds(60));
    simPort = port;
  }

  private int simPort;

  /** The proxy in front of the simulator, {@code slots} of it, and {@code rest} of the config. */
  private void startProxy(int slots, String... rest) throws Exception {
    startProxy(MODEL, "http://127.0.0.1:" + simPort, slots, rest);
  }

  /**
   * The proxy in front of {@code upstream} serving {@code model}, and {@code rest} of the config.
   */
  private void startProxy(String model, String upstream, int slots, String... rest)
      throws Exception {
    proxyPort = Procs.freePort();
    adminPort = Procs.freePort();
    List<String> lines = new ArrayList<>();
    lines.add("listen: {host: 127.0.0.1, port: " + proxyPort + "}");
    lines.add("admin: {host: 127.0.0.1, port: " + adminPort + ", token: \"\"}");
    if (rest.length == 0) {
      lines.add("auth: {enabled: false, keys_file: null}");
    }
    lines.addAll(List.of(rest));
    lines.addAll(
        List.of(
            "pools:",
            "  - name: default",
            "    models: [" + model + "]",
            "    upstreams: [" + upstream + "]",
            "    slots: " + slots,
            "    queue: {max: 1000, timeout: 30s}",
            "telemetry:",
            "  sampling: {ratio: 1.0, keep_errors: true, keep_slower_than: 2s}",
            ""));
    Path config = work.resolve("proxy.yaml");
    Files.writeString(config, String.join("\n", lines));
    Process p =
        Procs.start(
            PROXY_JAR, List.of(), List.of("--config", config.toString()), Map.of(), work, "proxy");
    processes.add(p);
    Procs.awaitOk(adminUrl() + "/health/ready", p, Duration.ofSeconds(60));
  }

  private DelayRelay relay(int targetPort, long oneWayMs) throws Exception {
    DelayRelay r = DelayRelay.start(vertx, "127.0.0.1", targetPort, oneWayMs);
    relays.add(r);
    return r;
  }

  /** What a load client run left: its exit code, its standard output and its summary. */
  private record Run(int exit, String out, JsonNode summary) {
    /** The phases its BREACH lines name (the live table's and the verdict's, once each). */
    List<String> breachedPhases() {
      return breaches(2);
    }

    /** Whom its BREACH lines page. */
    List<String> pages() {
      return breaches(3);
    }

    private List<String> breaches(int group) {
      List<String> found = new ArrayList<>();
      for (String line : out.lines().toList()) {
        Matcher m = BREACH.matcher(line);
        if (m.find() && !found.contains(m.group(group))) {
          found.add(m.group(group));
        }
      }
      return found;
    }
  }

  /** {@code phasemeter-load.jar run} at {@code rate}/s for 3 s, judged against {@code budgets}. */
  private Run loadRun(String name, String url, Path budgets, int rate, String keyEnv)
      throws Exception {
    return loadRun(name, MODEL, url, budgets, rate, INPUT_TOKENS, OUTPUT_TOKENS, keyEnv);
  }

  private Run loadRun(
      String name,
      String model,
      String url,
      Path budgets,
      int rate,
      int input,
      int output,
      String keyEnv)
      throws Exception {
    Path out = work.resolve(name);
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                url,
                "--admin",
                adminUrl(),
                "--model",
                model,
                "--rate",
                Integer.toString(rate),
                "--duration",
                "3s",
                "--warmup-duration",
                "2s",
                "--input-tokens",
                Integer.toString(input),
                "--output-tokens",
                Integer.toString(output),
                "--budgets",
                budgets.toString(),
                "--join-grace",
                "1s",
                "--report-interval",
                "60s",
                "--out",
                out.toString()));
    if (keyEnv != null) {
      args.add("--api-key-env");
      args.add(keyEnv);
    }
    Map<String, String> env = keyEnv == null ? Map.of() : Map.of(keyEnv, API_KEY);
    Process p = Procs.start(LOAD_JAR, List.of(), args, env, work, "load-" + name);
    processes.add(p);
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).as(name + ": load client finished").isTrue();
    String stdout = Files.readString(work.resolve("load-" + name + ".out"));
    return new Run(p.exitValue(), stdout, JSON.readTree(out.resolve("summary.json").toFile()));
  }

  private String proxyUrl() {
    return "http://127.0.0.1:" + proxyPort;
  }

  private String adminUrl() {
    return "http://127.0.0.1:" + adminPort;
  }

  private double seconds() {
    return (System.nanoTime() - started) / 1e9;
  }

  private static double p95(JsonNode summary, String phase) {
    return summary.at("/phases/" + phase + "/p95_ms").asDouble(Double.NaN);
  }

  /** The sum over its series of a metric on the proxy's admin {@code /metrics}. */
  private double metric(String name) throws Exception {
    java.net.http.HttpResponse<String> r =
        java.net.http.HttpClient.newHttpClient()
            .send(
                java.net.http.HttpRequest.newBuilder(java.net.URI.create(adminUrl() + "/metrics"))
                    .timeout(Duration.ofSeconds(5))
                    .build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
    double sum = 0;
    for (String line : r.body().split("\n")) {
      if (line.startsWith(name + "{") || line.startsWith(name + " ")) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return sum;
  }

  private static String sha256(String s) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
  }

  // ---------------------------------------------------------------------------------- redis

  /** Skips on a laptop without {@code redis-server}; fails under {@code CI=true}. */
  private static void requireRedis() {
    boolean present =
        java.util.Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
            .anyMatch(d -> Files.isExecutable(Path.of(d, "redis-server")));
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("redis-server is not on PATH but CI=true: .ci/run should have installed it");
    }
    Assumptions.assumeTrue(present, "redis-server is not on PATH (apt-get install redis-server)");
  }

  /** A real {@code redis-server} on a free loopback port, persisting nothing; its port. */
  private int startRedis() throws Exception {
    int port = Procs.freePort();
    Process p =
        Procs.start(
            List.of(
                "redis-server",
                "--port",
                Integer.toString(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                work.toString()),
            Map.of(),
            work,
            "redis");
    processes.add(p);
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < deadline) {
      if (!p.isAlive()) {
        fail("redis-server exited: " + Files.readString(work.resolve("redis.out")));
      }
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.setSoTimeout(2000);
        OutputStream out = s.getOutputStream();
        out.write("PING\r\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
        InputStream in = s.getInputStream();
        byte[] reply = in.readNBytes(5);
        if (new String(reply, StandardCharsets.UTF_8).equals("+PONG")) {
          return port;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      Thread.sleep(20);
    }
    fail("redis-server did not answer PING within 20 s");
    return -1;
  }
}
