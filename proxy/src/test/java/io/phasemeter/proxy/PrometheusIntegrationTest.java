package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.phasemeter.proxy.budget.AlertRules;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.budget.DashboardQueries;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.io.File;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real Prometheus (Debian's package, exemplar storage on) scrapes a running proxy under simulator
 * load. Its exemplar API must return trace ids for TTFT that resolve to records, and every PromQL
 * expression of the committed dashboard and alert rules must execute and return data.
 */
class PrometheusIntegrationTest extends ProxyTestBase {
  private static final Path REPO = Path.of("..").toAbsolutePath().normalize();
  private final HttpClient http = HttpClient.newHttpClient();
  private int promPort;

  @TempDir Path tmp;

  static void requirePrometheus() {
    boolean present =
        java.util.Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
            .anyMatch(d -> Files.isExecutable(Path.of(d, "prometheus")));
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("prometheus is not on PATH but CI=true: .ci/run should have installed it");
    }
    Assumptions.assumeTrue(present, "prometheus is not on PATH (apt-get install prometheus)");
  }

  @Test
  void prometheusScrapesExemplarsAndEveryQueryReturnsData() throws Exception {
    requirePrometheus();
    // The simulator exports its engine spans to the proxy, so the engine panels have data too.
    int simPort = EngineSplitTest.freePort();
    proxy =
        PhasemeterProxy.builder(vertx, EngineSplitTest.engineConfig(simPort, 2, true, "5s"))
            .openTelemetry(otel)
            .budgets(Budgets.load(REPO.resolve("config/budgets.yaml")))
            .observer(ctx -> finished.add(null))
            .start()
            .await(10, TimeUnit.SECONDS);
    Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(simPort)
                .withSlots(8)
                .withDecodeStepMs(2)
                .withPrefillTokensPerSecond(200_000)
                .withOtlpTracesEndpoint("http://127.0.0.1:" + proxy.adminPort() + "/v1/traces"))
        .await(10, TimeUnit.SECONDS);
    Process prometheus = startPrometheus(proxy.adminPort());
    try {
      // Prometheus answers 503 (not JSON) until it is ready: keep asking.
      Awaitility.await()
          .atMost(Duration.ofSeconds(60))
          .ignoreExceptions()
          .until(() -> query("up{job=\"phasemeter\"} == 1").size() == 1);
      System.gc(); // so the JVM's GC pause series exist for the dashboard's GC panels
      drive(Duration.ofSeconds(8));
      // Several scrapes after the load, so every rate() has at least two samples with data.
      Thread.sleep(4000);

      JsonArray exemplars =
          get("/api/v1/query_exemplars?query="
                  + enc("gen_ai_server_time_to_first_token_seconds_bucket")
                  + "&start="
                  + (System.currentTimeMillis() / 1000 - 600)
                  + "&end="
                  + (System.currentTimeMillis() / 1000 + 60))
              .getJsonArray("data");
      Set<String> traceIds = new LinkedHashSet<>();
      for (Object series : exemplars) {
        for (Object e : ((JsonObject) series).getJsonArray("exemplars")) {
          traceIds.add(((JsonObject) e).getJsonObject("labels").getString("trace_id"));
        }
      }
      assertThat(traceIds).as("exemplar trace ids from Prometheus").isNotEmpty();
      for (String id : traceIds) {
        Response r = admin("/admin/records/" + id);
        assertThat(r.status()).as("record of exemplar " + id).isEqualTo(200);
        assertThat(new JsonObject(r.text()).getDouble("server_ttft_ms")).isNotNull();
      }
      System.out.printf("prometheus: %d exemplar trace ids, all resolved%n", traceIds.size());

      List<String> expressions =
          new ArrayList<>(DashboardQueries.expressions(REPO.resolve("dashboards/phasemeter.json")));
      for (String alert : AlertRules.expressions(REPO.resolve("dashboards/alerts.yaml"))) {
        // An alert returns data only while it fires: check the measured side of the comparison
        // (a number, or "(1 - q)" for a share above a limit, or "< m" for an attainment; a bucket
        // le="<limit>" that the proxy did not expose would return nothing).
        expressions.add(alert.replaceFirst("\\s*[<>]\\s*(\\(1 - [0-9.]+\\)|[0-9.eE+-]+)\\s*$", ""));
      }
      assertThat(expressions).hasSizeGreaterThan(25);
      List<String> empty = new ArrayList<>();
      for (String expr : expressions) {
        JsonArray result = query(expr);
        if (result.isEmpty()) {
          empty.add(expr);
        }
      }
      assertThat(empty).as("expressions that returned no data").isEmpty();
      System.out.printf(
          "prometheus: %d expressions executed, all returned data%n", expressions.size());
    } finally {
      prometheus.destroy();
      if (!prometheus.waitFor(10, TimeUnit.SECONDS)) {
        prometheus.destroyForcibly();
      }
    }
  }

  /** Streams, whole responses, client errors and upstream errors, four at a time. */
  private void drive(Duration duration) throws Exception {
    long end = System.nanoTime() + duration.toNanos();
    int i = 0;
    while (System.nanoTime() < end) {
      List<Future<Response>> batch = new ArrayList<>();
      for (int k = 0; k < 4; k++, i++) {
        MultiMap h = MultiMap.caseInsensitiveMultiMap();
        String body =
            "{\"model\":\"sim-llama\",\"stream\":"
                + (i % 3 != 0)
                + ",\"max_tokens\":6,\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}";
        if (i % 10 == 7) {
          body =
              "{\"model\":\"no-such-model\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
        } else if (i % 10 == 9) {
          h.add("x-sim-fault", "error");
        }
        batch.add(callAsync(HttpMethod.POST, "/v1/chat/completions", body, h));
      }
      // A pass-through (the simulator serves /version) for the dashboard's pass-through panel, and
      // a Responses request for the operation split.
      batch.add(callAsync(HttpMethod.GET, "/version", null, MultiMap.caseInsensitiveMultiMap()));
      batch.add(
          callAsync(
              HttpMethod.POST,
              "/v1/responses",
              "{\"model\":\"sim-llama\",\"input\":\"hello\",\"max_output_tokens\":6,"
                  + "\"stream\":true}",
              MultiMap.caseInsensitiveMultiMap()));
      for (Future<Response> f : batch) {
        f.await(30, TimeUnit.SECONDS);
      }
    }
  }

  private Process startPrometheus(int adminPort) throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      promPort = s.getLocalPort();
    }
    Path config = tmp.resolve("prometheus.yml");
    Files.writeString(
        config,
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            + "rule_files: ['"
            + REPO.resolve("dashboards/alerts.yaml")
            + "']\n"
            + "scrape_configs:\n"
            + "  - job_name: phasemeter\n"
            + "    metrics_path: /metrics\n"
            + "    static_configs: [{targets: ['127.0.0.1:"
            + adminPort
            + "']}]\n");
    Path log = tmp.resolve("prometheus.log");
    return new ProcessBuilder(
            "prometheus",
            "--config.file=" + config,
            "--storage.tsdb.path=" + tmp.resolve("data"),
            "--web.listen-address=127.0.0.1:" + promPort,
            "--enable-feature=exemplar-storage")
        .redirectErrorStream(true)
        .redirectOutput(log.toFile())
        .start();
  }

  private JsonArray query(String expr) throws Exception {
    JsonObject r = get("/api/v1/query?query=" + enc(expr));
    assertThat(r.getString("status")).as(expr + " -> " + r).isEqualTo("success");
    return r.getJsonObject("data").getJsonArray("result");
  }

  private JsonObject get(String pathAndQuery) throws Exception {
    HttpResponse<String> resp =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + promPort + pathAndQuery))
                .timeout(Duration.ofSeconds(10))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return new JsonObject(resp.body());
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }
}
