package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A real Prometheus server (the Debian package's, 2.42, which {@code .ci/run} installs) scraping
 * the real {@code phasemeter proxy} jar in front of the simulator, every second, with the alert
 * rules that {@code phasemeter alerts} renders from a budgets file this test writes: a queue budget
 * that light load keeps and overload breaks, and generous budgets on phases overload leaves alone
 * (gateway, generation, write). Under light load no budget alert is pending or firing; under
 * overload (16 clients on one slot) the queue alert goes pending then firing, no alert names
 * another phase, and the proxy's own live verdict says queue breached too. Exemplars scraped as
 * OpenMetrics come back through {@code query_exemplars}, and their trace ids resolve to the proxy's
 * records.
 *
 * <p>The assertions are on alert state by the {@code llm_phase} and {@code owner} labels the rules
 * carry, not on their expressions, so the test judges whatever form the generator writes. The one
 * edit to the generated file: every {@code for:} becomes {@value #FOR}, since the generator's
 * shortest is one minute. Processes' logs and the files Prometheus read stay under {@code
 * accuracy/target/prometheus}; its data directory is removed.
 */
class PrometheusTest {
  static final Path ROOT = AccuracySuiteTest.ROOT;
  static final String MODEL = "sim-llama";
  static final String BUDGET = "prom-test";

  /** What every {@code for:} of the generated rules becomes, so a breach fires within seconds. */
  static final String FOR = "2s";

  /**
   * The budgets: p95 over 10 s. Queue 250 ms, which one client at a time never waits and 16 clients
   * on one slot wait about 15 requests' generation (~60 ms each) for; the other limits are far
   * above anything either load gives (generation is a few tens of ms: the simulator has slots to
   * spare).
   */
  static final String BUDGETS =
      String.join(
          "\n",
          "budgets:",
          "  - name: " + BUDGET,
          "    model: \"*\"",
          "    quantile: 0.95",
          "    window: 10s",
          "    limits_ms: {gateway: 500, queue: 250, generation: 3000, write: 500}",
          "    max_error_rate: 0.5",
          "    min_join_coverage: 0.95",
          "");

  static final Duration DEADLINE = Duration.ofSeconds(60);
  static final Duration LIGHT = Duration.ofSeconds(8);
  static final int OVERLOAD_CLIENTS = 16;
  static final String BODY =
      "{\"model\":\""
          + MODEL
          + "\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

  private static final Pattern FOR_LINE = Pattern.compile("(?m)^(\\s*)for: \\S+$");

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(2))
          .build();
  private final List<Process> processes = new ArrayList<>();
  private final List<Load> loads = new ArrayList<>();
  private Path work;
  private Path data;
  private int proxyPort;
  private int adminPort;
  private int promPort;
  private long started;

  @BeforeEach
  void setUp() throws Exception {
    requirePrometheus();
    assertThat(AccuracySuiteTest.SIM_JAR).as("build the modules first (mvn install)").exists();
    assertThat(AccuracySuiteTest.PROXY_JAR).exists();
    work = ROOT.resolve("accuracy/target/prometheus");
    AccuracySuiteTest.deleteTree(work);
    Files.createDirectories(work);
    data = Files.createTempDirectory("phasemeter-prometheus-");
    started = System.nanoTime();
  }

  @AfterEach
  void tearDown() throws Exception {
    for (Load l : loads) {
      l.stop();
    }
    List<Process> reversed = new ArrayList<>(processes);
    Collections.reverse(reversed);
    for (Process p : reversed) {
      Procs.stop(p);
    }
    if (data != null) {
      AccuracySuiteTest.deleteTree(data);
    }
  }

  @Test
  void theQueueAlertFiresUnderOverloadAndOnlyWhereTheProxysVerdictBreaches() throws Exception {
    startProxy(startSim());
    Path rules = renderRules();
    startPrometheus(rules);
    awaitTargetUp();
    Map<String, String> ownerByPhase = awaitRules();
    assertThat(ownerByPhase).as("phases the rules judge").containsKeys("queue", "gateway");
    long t0 = System.currentTimeMillis();

    // Light load: one client, one request at a time with pauses, so nothing ever waits for the
    // slot. Nothing may be pending or firing at any point, and the proxy's verdict agrees.
    Load light = startLoad(1, 150);
    Map<String, Set<String>> seen = new LinkedHashMap<>();
    long until = System.nanoTime() + LIGHT.toNanos();
    while (System.nanoTime() < until) {
      JsonNode active = activeAlerts();
      assertThat(active).as("alerts under light load").isEmpty();
      Thread.sleep(250);
    }
    assertThat(scalar("sum(llm_phase_duration_seconds_count{llm_phase=\"queue\"})"))
        .as("queue observations Prometheus scraped under light load")
        .isGreaterThan(10);
    awaitRulesEvaluatedHealthy();
    assertThat(activeAlerts()).as("alerts after light load").isEmpty();
    JsonNode lightVerdict = liveBudget();
    assertThat(breached(lightVerdict)).as("the proxy's live verdict under light load").isEmpty();
    light.stop();
    assertThat(light.failed.sum()).as("failed requests under light load").isZero();

    // Overload: 16 clients back to back on one slot. The queue alert goes pending, then firing;
    // no alert ever names another phase (or none: the error-rate alert), and when it fires the
    // proxy's own verdict says queue breached and nothing else.
    Load over = startLoad(OVERLOAD_CLIENTS, 0);
    long overStart = System.nanoTime();
    long overStartMs = System.currentTimeMillis();
    double pendingAfter = Double.NaN;
    double firingAfter = Double.NaN;
    JsonNode firingAlert = null;
    long deadline = overStart + DEADLINE.toNanos();
    while (firingAlert == null) {
      if (System.nanoTime() > deadline) {
        fail(
            "the queue alert did not fire within %s of overload; states seen %s; proxy says %s",
            DEADLINE, seen, liveBudget());
      }
      for (JsonNode a : activeAlerts()) {
        String phase = a.at("/labels/llm_phase").asText("(none)");
        String state = a.get("state").asText();
        seen.computeIfAbsent(phase, k -> new LinkedHashSet<>()).add(state);
        assertThat(phase)
            .as("the phase of an active alert under overload: %s", a)
            .isEqualTo("queue");
        assertThat(a.at("/labels/budget").asText()).isEqualTo(BUDGET);
        assertThat(a.at("/labels/owner").asText()).isEqualTo(ownerByPhase.get("queue"));
        double after = (System.nanoTime() - overStart) / 1e9;
        if ("pending".equals(state) && Double.isNaN(pendingAfter)) {
          pendingAfter = after;
        }
        if ("firing".equals(state)) {
          firingAfter = after;
          firingAlert = a;
        }
      }
      Thread.sleep(200);
    }
    // Pending for at least the rule's for: before it fired, and first active only once overload
    // had begun (Prometheus and this JVM read the same clock; 1 s for scrape timestamp jitter).
    long activeAt = Instant.parse(firingAlert.get("activeAt").asText()).toEpochMilli();
    assertThat(activeAt).as("when the queue alert became active").isGreaterThan(overStartMs - 1000);
    assertThat(System.currentTimeMillis() - activeAt)
        .as("pending before firing, ms")
        .isGreaterThanOrEqualTo(Duration.parse("PT" + FOR).toMillis());
    assertThat(seen.get("queue")).as("the queue alert's states, in order").endsWith("firing");
    JsonNode overVerdict = liveBudget();
    assertThat(breached(overVerdict))
        .as("the proxy's live verdict while the queue alert fires: %s", overVerdict)
        .containsExactly("queue");
    double ratio = scalar("max(llm_budget_ratio{budget=\"" + BUDGET + "\",llm_phase=\"queue\"})");
    assertThat(ratio).as("llm_budget_ratio of queue, as Prometheus scraped it").isGreaterThan(1);
    // A few more evaluations: the unaffected phases still say nothing.
    long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
    while (System.nanoTime() < settle) {
      for (JsonNode a : activeAlerts()) {
        assertThat(a.at("/labels/llm_phase").asText("(none)"))
            .as("an active alert under overload: %s", a)
            .isEqualTo("queue");
      }
      Thread.sleep(250);
    }
    over.stop();
    assertThat(over.failed.sum()).as("failed requests under overload").isZero();

    // Exemplars: the queue histogram's, from Prometheus's exemplar storage; each trace id is a
    // record on the proxy whose queue phase is the exemplar's value.
    JsonNode exemplars =
        api(
            "/api/v1/query_exemplars?query="
                + enc("llm_phase_duration_seconds_bucket{llm_phase=\"queue\"}")
                + "&start="
                + (t0 / 1000 - 60)
                + "&end="
                + (System.currentTimeMillis() / 1000 + 1));
    Map<String, Double> byTrace = new LinkedHashMap<>();
    for (JsonNode series : exemplars) {
      for (JsonNode e : series.path("exemplars")) {
        String trace = e.at("/labels/trace_id").asText("");
        assertThat(trace).as("exemplar %s", e).matches("[0-9a-f]{32}");
        assertThat(e.at("/labels/span_id").asText("")).matches("[0-9a-f]{16}");
        byTrace.put(trace, e.get("value").asDouble());
      }
    }
    assertThat(byTrace).as("queue exemplars Prometheus stored").isNotEmpty();
    int resolved = 0;
    for (Map.Entry<String, Double> e : byTrace.entrySet()) {
      HttpResponse<String> r = get(admin("/admin/records/" + e.getKey()));
      assertThat(r.statusCode()).as("record of exemplar %s", e.getKey()).isEqualTo(200);
      JsonNode rec = json.readTree(r.body());
      assertThat(rec.get("trace_id").asText()).isEqualTo(e.getKey());
      assertThat(rec.at("/phases_ms/queue").asDouble())
          .as("queue of %s: the record's vs the exemplar's", e.getKey())
          .isCloseTo(e.getValue() * 1000, within(0.01));
      resolved++;
    }

    System.out.printf(
        Locale.ROOT,
        "PrometheusTest: %s; light load %d requests, no alert, proxy's queue p95 %.2f ms; overload"
            + " (%d clients, 1 slot) %d requests, queue alert pending after %.1f s, firing after"
            + " %.1f s (value %s), proxy's queue p95 %.0f ms (ratio %.2f), states seen %s; %d queue"
            + " exemplars, %d resolved to records; %.0f s%n",
        promVersion(),
        light.ok.sum(),
        observedMs(lightVerdict, "queue"),
        OVERLOAD_CLIENTS,
        over.ok.sum(),
        pendingAfter,
        firingAfter,
        firingAlert.get("value").asText(),
        observedMs(overVerdict, "queue"),
        ratio,
        seen,
        byTrace.size(),
        resolved,
        (System.nanoTime() - started) / 1e9);
  }

  // ---------------------------------------------------------------- fixtures

  /** The server binary, or a skip (laptop) / failure (CI, where .ci/run installs it). */
  static void requirePrometheus() {
    boolean present = false;
    String path = System.getenv("PATH");
    if (path != null) {
      for (String dir : path.split(File.pathSeparator)) {
        if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "prometheus"))) {
          present = true;
        }
      }
    }
    String msg = "prometheus is not on PATH (apt-get install prometheus)";
    if (!present && "true".equals(System.getenv("CI"))) {
      fail(msg + " but CI=true: .ci/run should have installed it");
    }
    Assumptions.assumeTrue(present, msg);
  }

  private int startSim() throws Exception {
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
                MODEL,
                "--slots",
                "8",
                "--decode-step-ms",
                "5",
                "--decode-step-growth",
                "0"),
            Map.of(),
            work,
            "simulator");
    processes.add(sim);
    Procs.awaitOk("http://127.0.0.1:" + port + "/health", sim, Duration.ofSeconds(60));
    return port;
  }

  /** The proxy jar with one pool of one slot, judging the test's budgets live. */
  private void startProxy(int upstreamPort) throws Exception {
    proxyPort = Procs.freePort();
    adminPort = Procs.freePort();
    Path budgets = work.resolve("budgets.yaml");
    Files.writeString(budgets, BUDGETS);
    Path config = work.resolve("proxy.yaml");
    Files.writeString(
        config,
        Procs.proxyConfig(
            proxyPort,
            adminPort,
            "pools:",
            "  - name: default",
            "    models: [" + MODEL + "]",
            "    upstreams: [http://127.0.0.1:" + upstreamPort + "]",
            "    slots: 1",
            "    queue: {max: 1000, timeout: 30s}",
            "telemetry:",
            "  sampling: {ratio: 1.0, keep_errors: true, keep_slower_than: 2s}",
            "  records: {max: 100000, ttl: 10m}",
            "budgets: " + budgets,
            ""));
    Process proxy =
        Procs.start(
            AccuracySuiteTest.PROXY_JAR,
            List.of(),
            List.of("--config", config.toString()),
            Map.of(),
            work,
            "proxy");
    processes.add(proxy);
    Procs.awaitOk(admin("/health/ready"), proxy, Duration.ofSeconds(60));
  }

  /**
   * {@code phasemeter alerts --budgets budgets.yaml --out alerts.yaml}, as the launcher runs it;
   * then the copy Prometheus loads, with every {@code for:} shortened to {@value #FOR}.
   */
  private Path renderRules() throws Exception {
    Path generated = work.resolve("alerts.yaml");
    Process p =
        Procs.start(
            List.of(
                Procs.java(),
                "-cp",
                AccuracySuiteTest.PROXY_JAR.toString(),
                "io.phasemeter.proxy.AlertsMain",
                "--budgets",
                work.resolve("budgets.yaml").toString(),
                "--out",
                generated.toString()),
            Map.of(),
            work,
            "alerts");
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("phasemeter alerts finished").isTrue();
    assertThat(p.exitValue())
        .as("phasemeter alerts: %s", Files.readString(work.resolve("alerts.err")))
        .isZero();
    String text = Files.readString(generated);
    Matcher m = FOR_LINE.matcher(text);
    assertThat(m.find()).as("a for: in the generated rules").isTrue();
    Path loaded = work.resolve("alerts-short-for.yaml");
    Files.writeString(loaded, FOR_LINE.matcher(text).replaceAll("$1for: " + FOR));
    return loaded;
  }

  private void startPrometheus(Path rules) throws Exception {
    promPort = Procs.freePort();
    Path config = work.resolve("prometheus.yml");
    Files.writeString(
        config,
        String.join(
            "\n",
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            "  evaluation_interval: 1s",
            "rule_files: ['" + rules + "']",
            "scrape_configs:",
            "  - job_name: phasemeter",
            "    static_configs:",
            "      - targets: ['127.0.0.1:" + adminPort + "']",
            ""));
    Process prom =
        Procs.start(
            List.of(
                "prometheus",
                "--config.file=" + config,
                "--storage.tsdb.path=" + data,
                "--web.listen-address=127.0.0.1:" + promPort,
                "--enable-feature=exemplar-storage",
                "--log.level=info"),
            Map.of(),
            work,
            "prometheus");
    processes.add(prom);
    Procs.awaitOk(prom("/-/ready"), prom, Duration.ofSeconds(60));
  }

  /** Until Prometheus has scraped the proxy's admin /metrics successfully. */
  private void awaitTargetUp() throws Exception {
    JsonNode last = null;
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (System.nanoTime() < deadline) {
      for (JsonNode t : api("/api/v1/targets").path("activeTargets")) {
        last = t;
        if ("up".equals(t.path("health").asText())) {
          return;
        }
      }
      Thread.sleep(200);
    }
    fail("Prometheus never scraped the proxy within %s: %s", DEADLINE, last);
  }

  /** The alerting rules Prometheus loaded: each rule's llm_phase label and its owner. */
  private Map<String, String> awaitRules() throws Exception {
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (true) {
      Map<String, String> owners = new LinkedHashMap<>();
      for (JsonNode rule : alertingRules()) {
        JsonNode labels = rule.path("labels");
        assertThat(labels.path("budget").asText()).as("rule %s", rule).isEqualTo(BUDGET);
        if (labels.has("llm_phase")) {
          owners.put(labels.get("llm_phase").asText(), labels.path("owner").asText());
        }
      }
      if (!owners.isEmpty()) {
        return owners;
      }
      if (System.nanoTime() > deadline) {
        fail("no alerting rules loaded within %s", DEADLINE);
      }
      Thread.sleep(200);
    }
  }

  /** Until every rule has been evaluated at least once, and every one without error. */
  private void awaitRulesEvaluatedHealthy() throws Exception {
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (true) {
      List<JsonNode> rules = alertingRules();
      boolean all = !rules.isEmpty();
      for (JsonNode r : rules) {
        assertThat(r.path("health").asText())
            .as("rule %s: %s", r.path("name").asText(), r.path("lastError").asText())
            .isNotEqualTo("err");
        all &= "ok".equals(r.path("health").asText());
      }
      if (all) {
        return;
      }
      if (System.nanoTime() > deadline) {
        fail("rules not all evaluated within %s: %s", DEADLINE, rules);
      }
      Thread.sleep(200);
    }
  }

  private List<JsonNode> alertingRules() throws Exception {
    List<JsonNode> out = new ArrayList<>();
    for (JsonNode g : api("/api/v1/rules?type=alert").path("groups")) {
      g.path("rules").forEach(out::add);
    }
    return out;
  }

  /** Every alert pending or firing. */
  private JsonNode activeAlerts() throws Exception {
    return api("/api/v1/alerts").path("alerts");
  }

  private double scalar(String promql) throws Exception {
    JsonNode result = api("/api/v1/query?query=" + enc(promql)).path("result");
    assertThat(result).as("result of %s", promql).hasSize(1);
    return Double.parseDouble(result.get(0).path("value").get(1).asText());
  }

  /** The test's budget as the proxy judges it live ({@code /admin/stats}). */
  private JsonNode liveBudget() throws Exception {
    HttpResponse<String> r = get(admin("/admin/stats?window=10s"));
    assertThat(r.statusCode()).as("/admin/stats: %s", r.body()).isEqualTo(200);
    for (JsonNode b : json.readTree(r.body()).path("budgets")) {
      if (BUDGET.equals(b.path("name").asText())) {
        return b;
      }
    }
    throw new AssertionError("no budget " + BUDGET + " in /admin/stats: " + r.body());
  }

  private static List<String> breached(JsonNode budget) {
    List<String> out = new ArrayList<>();
    for (JsonNode p : budget.path("phases")) {
      if (p.path("breached").asBoolean(false)) {
        out.add(p.path("phase").asText());
      }
    }
    if (budget.path("error_rate_breached").asBoolean(false)) {
      out.add("error_rate");
    }
    return out;
  }

  private static double observedMs(JsonNode budget, String phase) {
    for (JsonNode p : budget.path("phases")) {
      if (phase.equals(p.path("phase").asText())) {
        return p.path("observed_ms").asDouble(Double.NaN);
      }
    }
    return Double.NaN;
  }

  private String promVersion() {
    try {
      return "Prometheus " + api("/api/v1/status/buildinfo").path("version").asText();
    } catch (Exception e) {
      return "Prometheus (version unknown)";
    }
  }

  /** A Prometheus HTTP API call that must succeed; its {@code data}. */
  private JsonNode api(String pathAndQuery) throws Exception {
    HttpResponse<String> r = get(prom(pathAndQuery));
    JsonNode body = json.readTree(r.body());
    assertThat(body.path("status").asText())
        .as("%s: %s", pathAndQuery, r.body())
        .isEqualTo("success");
    return body.path("data");
  }

  private String prom(String path) {
    return "http://127.0.0.1:" + promPort + path;
  }

  private String admin(String path) {
    return "http://127.0.0.1:" + adminPort + path;
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private HttpResponse<String> get(String url) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  // ---------------------------------------------------------------- load

  /** {@code clients} closed-loop clients, each pausing {@code pauseMs} between requests. */
  private Load startLoad(int clients, long pauseMs) {
    Load l = new Load(clients, pauseMs);
    loads.add(l);
    return l;
  }

  /** Closed-loop chat completions through the proxy until stopped; counts what came back. */
  private final class Load {
    final LongAdder ok = new LongAdder();
    final LongAdder failed = new LongAdder();
    private final AtomicBoolean running = new AtomicBoolean(true);
    private final ExecutorService pool;

    Load(int clients, long pauseMs) {
      pool = Executors.newFixedThreadPool(clients);
      HttpRequest request =
          HttpRequest.newBuilder(
                  URI.create("http://127.0.0.1:" + proxyPort + "/v1/chat/completions"))
              .timeout(Duration.ofSeconds(30))
              .header("content-type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(BODY))
              .build();
      for (int i = 0; i < clients; i++) {
        pool.execute(
            () -> {
              while (running.get()) {
                try {
                  int s = http.send(request, HttpResponse.BodyHandlers.discarding()).statusCode();
                  (s == 200 ? ok : failed).increment();
                  if (pauseMs > 0) {
                    Thread.sleep(pauseMs);
                  }
                } catch (InterruptedException e) {
                  return;
                } catch (Exception e) {
                  if (running.get()) {
                    failed.increment();
                  }
                }
              }
            });
      }
    }

    /** Stops sending and waits for the requests in flight. */
    void stop() throws InterruptedException {
      if (running.getAndSet(false)) {
        pool.shutdown();
        if (!pool.awaitTermination(40, TimeUnit.SECONDS)) {
          pool.shutdownNow();
        }
      }
    }
  }
}
