package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.Phases;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Issue 34's validations of {@code phasemeter load search} where the truth is known: the phase a
 * search names as the one that gave first is the one a fault was injected into. The simulator
 * ({@code --decode-step-growth 0}, slots to spare) behind the proxy, every piece a separate process
 * on real loopback sockets, and a {@link DelayRelay} in this JVM where the fault is: a slow Redis
 * under {@code auth.shared_limits} (the relay between the proxy and a real {@code redis-server})
 * must be named {@code gateway}; a slow network between the load client and the proxy, {@code
 * network_envelope}. Both faults cost the same at every load, so nothing holds down to the floor,
 * and the search must still name them. Against llama-server from the kit, behind one proxy slot, a
 * search completes and names a phase of the catalogue. Each test prints one line of figures;
 * nothing is asserted on a time.
 */
class SearchLimitingPhaseTest {
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

  private Path work;
  private Vertx vertx;
  private final List<Process> processes = Collections.synchronizedList(new ArrayList<>());
  private final List<DelayRelay> relays = new ArrayList<>();
  private int proxyPort;
  private int adminPort;

  @BeforeEach
  void setUp(TestInfo info) throws Exception {
    assertThat(SIM_JAR).as("build the modules first (mvn package -DskipTests)").exists();
    assertThat(PROXY_JAR).exists();
    assertThat(LOAD_JAR).exists();
    work = ROOT.resolve("accuracy/target/capacity").resolve(info.getTestMethod().get().getName());
    AccuracySuiteTest.deleteTree(work);
    Files.createDirectories(work);
    vertx = Vertx.vertx();
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
    // round trip to Redis through the relay, so gateway holds 2 x 2 x 15 ms at every load, three
    // times the budget below. At 16 req/s on a busy 2-core machine gateway once grew from 80 ms
    // to over a second within 3 s (decisions timing out at 1 s), so the search starts at 6 (one
    // halving to the floor, 3), and the 5 s timeout keeps every decision Redis's (fail_closed
    // would turn a fallback into a 503).
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
            + "'], timeout: 5s, on_failure: fail_closed}");
    // The engine holds queue and TTFT with room to spare at every load probed; gateway never.
    Path budgets = budgets("slow-redis", "{gateway: 20, queue: 2000, ttft: 5000}");

    Search s =
        search(
            "search",
            MODEL,
            proxyUrl(),
            budgets,
            INPUT_TOKENS,
            OUTPUT_TOKENS,
            KEY_ENV,
            "--rate",
            "6",
            "--min-capacity",
            "3");
    assertNothingHolds(s, 3);
    assertThat(s.phase()).as(s.why()).isEqualTo("gateway");
    assertThat(s.json().at("/limiting_phase/owner").asText()).isEqualTo("gateway");
    assertThat(metric("llm_shared_limits_fallbacks_total"))
        .as("decisions made without Redis")
        .isZero();
    s.print(
        "slow Redis under shared limits (15 ms each way)",
        "gateway",
        "; the proxy held " + redisInfo(redis, "connected_clients") + " connections to Redis");
  }

  @Test
  void aSlowNetworkBeforeTheProxyIsNamedNetworkEnvelope() throws Exception {
    startSim(64);
    startProxy(64);
    DelayRelay slowNetwork = relay(proxyPort, 20);
    Path budgets = budgets("slow-network", "{network_envelope: 25, queue: 2000, ttft: 5000}");

    Search s =
        search(
            "search",
            MODEL,
            "http://127.0.0.1:" + slowNetwork.port(),
            budgets,
            INPUT_TOKENS,
            OUTPUT_TOKENS,
            null,
            "--rate",
            "6",
            "--min-capacity",
            "3");
    assertNothingHolds(s, 3);
    assertThat(s.phase()).as(s.why()).isEqualTo("network_envelope");
    s.print("slow network before the proxy (20 ms each way)", "network_envelope", "");
  }

  @Test
  void llamaServerBehindTheProxyCompletesAndNamesAPhase() throws Exception {
    RealWorld rw = RealWorld.require();
    int llama = Procs.freePort();
    // One sequence at a time behind one proxy slot: 64:16 takes about 100 ms on this engine with
    // one thread, so the knee lies near 10 req/s, where a probe's 20 requests take 2 s. Arrivals
    // at a constant pace queue only past the engine's pace, so the knee is sharp; on a busy
    // machine it may lie lower, and the halving stops at 2 req/s (exit 3 then, still naming the
    // phase).
    processes.add(rw.startLlama(llama, 1, List.of(), work, "llama"));
    startProxy(RealWorld.MODEL, "http://127.0.0.1:" + llama, 1);
    Path budgets = budgets("llama-queue", "{queue: 250}");

    Search s =
        search(
            "search",
            RealWorld.MODEL,
            proxyUrl(),
            budgets,
            64,
            16,
            null,
            "--rate",
            "8",
            "--min-capacity",
            "2",
            "--arrival",
            "constant",
            "--duration",
            "2s");
    assertThat(s.exit()).as(s.why()).isIn(0, 3);
    assertThat(s.phase()).as(s.why()).isNotEmpty();
    assertThat(Phases.fromKey(s.phase())).as("a phase of the catalogue").isPresent();
    assertThat(s.json().at("/limiting_phase/owner").asText())
        .isEqualTo(Phases.fromKey(s.phase()).get().owner());
    if (s.exit() == 0) {
      JsonNode c = s.json().path("capacity");
      assertThat(c.path("rate").asDouble()).as(s.why()).isPositive();
      assertThat(c.path("ci95_low").asDouble()).isLessThanOrEqualTo(c.path("rate").asDouble());
      assertThat(c.path("ci95_high").asDouble()).isGreaterThanOrEqualTo(c.path("rate").asDouble());
      assertThat(s.json().path("probes").findValuesAsText("stage")).contains("confirm");
    }
    s.print("llama-server behind one proxy slot (64:16)", "any", "");
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

  /**
   * The simulator: 20 ms prefill and 15 steps of 5 ms a request, no slow-down with the batch, no
   * prefix cache.
   */
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
                "10000",
                // 20 ms of prefill is every request's: searches on one simulator send the same
                // seeds' prompts again, which the prefix cache would serve.
                "--prefix-cache-blocks",
                "0"),
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

  /** What a search left: its exit code, its standard output, search.json and its directory. */
  private record Search(int exit, String out, JsonNode json, Path dir, double seconds) {
    String phase() {
      return json.at("/limiting_phase/phase").asText("");
    }

    /** What to show when an assertion fails: the verdict and where to look. */
    String why() {
      return "exit "
          + exit
          + ", status "
          + json.path("status").asText()
          + ", limiting phase "
          + json.path("limiting_phase")
          + " (see "
          + dir
          + ")";
    }

    /** The one line of figures. */
    void print(String what, String expected, String more) {
      JsonNode c = json.path("capacity");
      List<String> probes = new ArrayList<>();
      for (JsonNode p : json.path("probes")) {
        probes.add(
            String.format(Locale.ROOT, "%s %s", num(p.path("rate")), p.path("verdict").asText()));
      }
      System.out.printf(
          Locale.ROOT,
          "search, %s: exit %d (%s), capacity %s req/s [%s, %s], limiting phase %s (expected %s,"
              + " page %s), %d probes (%s)%s, %.0f s%n",
          what,
          exit,
          json.path("status").asText(),
          num(c.path("rate")),
          num(c.path("ci95_low")),
          num(c.path("ci95_high")),
          phase(),
          expected,
          json.at("/limiting_phase/owner").asText(),
          probes.size(),
          String.join(", ", probes),
          more,
          seconds);
    }

    private static String num(JsonNode n) {
      return n.isNumber() ? String.format(Locale.ROOT, "%.2f", n.asDouble()) : "-";
    }
  }

  /**
   * {@code phasemeter-load.jar search} against {@code url} with these budgets, probes of 3 s
   * (unless {@code searchArgs} say otherwise) after 1 s at load, resolution 20 %, 3 confirmation
   * blocks, at most 3 minutes, and {@code searchArgs}; its search.json, after the structural checks
   * every search must pass: every probe listed with its load and verdict, and each valid one's own
   * report beside it.
   */
  private Search search(
      String name,
      String model,
      String url,
      Path budgets,
      int input,
      int output,
      String keyEnv,
      String... searchArgs)
      throws Exception {
    Path out = work.resolve(name);
    List<String> args =
        new ArrayList<>(
            List.of(
                "search",
                "--url",
                url,
                "--admin",
                adminUrl(),
                "--model",
                model,
                "--input-tokens",
                Integer.toString(input),
                "--output-tokens",
                Integer.toString(output),
                "--budgets",
                budgets.toString(),
                "--warmup-duration",
                "1s",
                "--repeats",
                "3",
                "--resolution",
                "0.2",
                "--max-duration",
                "3m",
                "--join-grace",
                "1s",
                "--report-interval",
                "60s",
                "--out",
                out.toString()));
    args.addAll(List.of(searchArgs));
    if (!args.contains("--duration")) {
      args.add("--duration");
      args.add("3s");
    }
    if (keyEnv != null) {
      args.add("--api-key-env");
      args.add(keyEnv);
    }
    Map<String, String> env = keyEnv == null ? Map.of() : Map.of(keyEnv, API_KEY);
    long t0 = System.nanoTime();
    Process p = Procs.start(LOAD_JAR, List.of(), args, env, work, "load-" + name);
    processes.add(p);
    assertThat(p.waitFor(240, TimeUnit.SECONDS)).as(name + ": search finished").isTrue();
    double took = (System.nanoTime() - t0) / 1e9;
    String stdout = Files.readString(work.resolve("load-" + name + ".out"));
    Path file = out.resolve("search.json");
    assertThat(file).as("search.json (exit " + p.exitValue() + "): " + stdout).exists();
    Search s = new Search(p.exitValue(), stdout, JSON.readTree(file.toFile()), out, took);
    JsonNode probes = s.json().path("probes");
    assertThat(probes.isArray() && probes.size() > 0).as("probes listed: " + s.why()).isTrue();
    for (JsonNode probe : probes) {
      String what = "probe " + probe.path("index").asInt() + ": " + probe;
      assertThat(probe.path("rate").asDouble()).as(what).isPositive();
      assertThat(probe.path("verdict").asText()).as(what).isNotEmpty();
      if (!probe.path("verdict").asText().equals("invalid")) {
        assertThat(out.resolve(probe.path("dir").asText()).resolve("summary.json"))
            .as(what + ": its report")
            .exists();
      }
    }
    assertThat(s.json().at("/limiting_phase/reason").asText()).as(s.why()).isNotEmpty();
    return s;
  }

  /**
   * Nothing held down to the floor: the promise is exit 3 (below --min-capacity), no probe passed
   * (one may be invalid on a busy machine: the client late on its own schedule), the halving went
   * down to the floor, and no capacity is claimed.
   */
  private static void assertNothingHolds(Search s, double floor) {
    assertThat(s.exit()).as(s.why()).isEqualTo(3);
    assertThat(s.json().path("status").asText()).as(s.why()).isEqualTo("nothing_holds");
    double lowest = Double.MAX_VALUE;
    int failed = 0;
    for (JsonNode probe : s.json().path("probes")) {
      assertThat(probe.path("verdict").asText()).as(probe.toString()).isIn("fail", "invalid");
      failed += probe.path("verdict").asText().equals("fail") ? 1 : 0;
      lowest = Math.min(lowest, probe.path("rate").asDouble());
    }
    assertThat(failed).as("probes that failed: " + s.why()).isPositive();
    assertThat(lowest).as("the halving's last load").isEqualTo(floor);
    assertThat(s.json().at("/capacity/rate").isNumber()).as(s.why()).isFalse();
  }

  private String proxyUrl() {
    return "http://127.0.0.1:" + proxyPort;
  }

  private String adminUrl() {
    return "http://127.0.0.1:" + adminPort;
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

  /** A field of Redis's {@code INFO} (e.g. {@code connected_clients}), asked directly. */
  private static String redisInfo(int port, String field) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(5000);
      s.getOutputStream().write("INFO\r\nQUIT\r\n".getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      String reply = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return reply
          .lines()
          .filter(l -> l.startsWith(field + ":"))
          .map(l -> l.substring(field.length() + 1).trim())
          .findFirst()
          .orElse("?");
    }
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
