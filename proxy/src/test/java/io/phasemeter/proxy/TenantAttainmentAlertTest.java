package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.budget.ShortForRules;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
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
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 37's end-to-end check: two tenants ({@code fast}, {@code slow}, named by {@code
 * x-tenant-id}) through the proxy to the simulator under one budget for every tenant ({@code
 * server_ttft} {@value #SLO_MS} ms, {@code min_attainment} 0.9, over 10 s), a real Prometheus
 * scraping the proxy every second with the rules {@code phasemeter alerts} renders (every {@code
 * for:} shortened). The simulator holds every first token of {@code slow} for {@value
 * #SLOW_HOLD_MS} ms ({@code x-sim-ttft-ms}; an event loop can be late, never early), so each of its
 * requests misses; {@code fast}'s are held for nothing. Only {@code slow}'s attainment alert fires,
 * {@code fast}'s attainment stays 1 in Prometheus, no active alert ever names {@code fast}, and the
 * proxy's {@code /admin/stats} says the same.
 *
 * <p>Traffic runs over many scrapes, not in one burst: {@code rate()} does not count the first
 * sample of a new series, and {@code llm_slo_requests_total} has a series only once a request of
 * that tenant and result was judged.
 */
class TenantAttainmentAlertTest extends ProxyTestBase {
  static final int SLO_MS = 1000;
  static final int SLOW_HOLD_MS = 2500;
  static final String BUDGET = "tenant-ttft";
  static final String ALERT = "PhasemeterTenantTtftAttainmentBreached";

  static final String BUDGETS =
      String.join(
          "\n",
          "budgets:",
          "  - name: " + BUDGET,
          "    tenant: \"*\"",
          "    quantile: 0.95",
          "    window: 10s",
          "    slo_ms: {server_ttft: " + SLO_MS + "}",
          "    min_attainment: 0.9",
          "    max_error_rate: 1",
          "    min_join_coverage: 0",
          "");

  private final HttpClient http = HttpClient.newHttpClient();
  private int promPort;

  @TempDir Path tmp;

  @Test
  void onlyTheSlowTenantsAttainmentAlertFiresAndTheFastTenantHolds() throws Exception {
    PrometheusIntegrationTest.requirePrometheus();
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(32)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    Budgets budgets = Budgets.parse(BUDGETS, "budgets.yaml");
    proxy =
        PhasemeterProxy.builder(
                vertx,
                ConfigLoader.parse(
                    yaml(
                        sim.port(),
                        "    slots: 32\n"
                            + "tenants: {header: x-tenant-id, names: [fast, slow]}\n"),
                    "proxy.yaml"))
            .openTelemetry(otel)
            .budgets(budgets)
            .start()
            .await(10, TimeUnit.SECONDS);
    Path rules = tmp.resolve("alerts.yaml");
    Files.writeString(rules, ShortForRules.render(budgets, Duration.ofSeconds(1)));
    Process prometheus = startPrometheus(proxy.adminPort(), rules);
    List<Future<Response>> sent = new ArrayList<>();
    try {
      // While Prometheus starts: a fresh JVM's first requests (classes loading, JIT) can take
      // hundreds of ms on a loaded machine, so fast's first few carry a day-long x-slo-ttft-ms;
      // judged and met, they also give fast's met series its first sample before any scrape.
      for (int i = 0; i < 5; i++) {
        MultiMap h = MultiMap.caseInsensitiveMultiMap();
        h.add("x-tenant-id", "fast");
        h.add("x-slo-ttft-ms", "86400000");
        assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("hello", true), h).status())
            .isEqualTo(200);
      }
      // Prometheus answers 503 (not JSON) until it is ready: keep asking.
      Awaitility.await()
          .atMost(Duration.ofSeconds(60))
          .ignoreExceptions()
          .until(() -> query("up{job=\"phasemeter\"} == 1").size() == 1);

      // Both tenants, a request each every 200 ms (slow's run side by side, each held), until
      // slow's alert fires; at no evaluation may an alert be active for fast.
      Set<String> seen = new LinkedHashSet<>();
      JsonObject firing = null;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (firing == null) {
        if (System.nanoTime() > deadline) {
          fail("%s did not fire for slow within 60 s; alerts seen %s", ALERT, seen);
        }
        sent.add(send("fast", 0));
        sent.add(send("slow", SLOW_HOLD_MS));
        firing = checkAlerts(seen);
        Thread.sleep(200);
      }
      assertThat(firing.getJsonObject("labels").getString("budget")).isEqualTo(BUDGET);
      assertThat(firing.getJsonObject("labels").getString("llm_pool")).isEqualTo("default");

      // A few more evaluations with both tenants' series in Prometheus: fast's attainment is 1
      // (it held), slow's under the target, and still no alert names fast.
      long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      while (System.nanoTime() < settle) {
        sent.add(send("fast", 0));
        sent.add(send("slow", SLOW_HOLD_MS));
        checkAlerts(seen);
        Thread.sleep(200);
      }
      Map<String, Double> attainment = new TreeMap<>();
      for (Object o : query(attainmentExpr())) {
        JsonObject s = (JsonObject) o;
        attainment.put(
            s.getJsonObject("metric").getString("llm_tenant"),
            Double.parseDouble(s.getJsonArray("value").getString(1)));
      }
      assertThat(attainment).as("attainment by tenant, as Prometheus computes it").hasSize(2);
      assertThat(attainment.get("fast")).isEqualTo(1.0);
      assertThat(attainment.get("slow")).isLessThan(0.9);

      // The proxy's own count over the budget's window agrees.
      Map<String, JsonObject> live = new TreeMap<>();
      JsonArray slo = new JsonObject(admin("/admin/stats").text()).getJsonArray("slo");
      assertThat(slo).hasSize(1);
      assertThat(slo.getJsonObject(0).getString("budget")).isEqualTo(BUDGET);
      assertThat(slo.getJsonObject(0).getDouble("min_attainment")).isEqualTo(0.9);
      for (Object o : slo.getJsonObject(0).getJsonArray("tenants")) {
        live.put(((JsonObject) o).getString("tenant"), (JsonObject) o);
      }
      assertThat(live).as("/admin/stats slo tenants").containsOnlyKeys("fast", "slow");
      assertThat(live.get("fast").getDouble("attainment")).isEqualTo(1.0);
      assertThat(live.get("fast").getBoolean("attainment_breached")).isFalse();
      assertThat(live.get("slow").getDouble("attainment")).isLessThan(0.9);
      assertThat(live.get("slow").getBoolean("attainment_breached")).isTrue();
      assertThat(live.get("slow").getJsonObject("first_missed").fieldNames())
          .containsExactly("server_ttft");
      System.out.printf(
          "attainment: prometheus %s, proxy fast %s slow %s; alerts seen %s%n",
          attainment,
          live.get("fast").getDouble("attainment"),
          live.get("slow").getDouble("attainment"),
          seen);

      for (Future<Response> f : sent) {
        assertThat(f.await(30, TimeUnit.SECONDS).status()).isEqualTo(200);
      }
    } finally {
      prometheus.destroy();
      if (!prometheus.waitFor(10, TimeUnit.SECONDS)) {
        prometheus.destroyForcibly();
      }
    }
  }

  /** A streamed chat request of {@code tenant}, its first token held {@code holdMs} upstream. */
  private Future<Response> send(String tenant, int holdMs) {
    MultiMap h = MultiMap.caseInsensitiveMultiMap();
    h.add("x-tenant-id", tenant);
    if (holdMs > 0) {
      h.add("x-sim-ttft-ms", Integer.toString(holdMs));
    }
    return callAsync(HttpMethod.POST, "/v1/chat/completions", chat("hello", true), h);
  }

  /**
   * Every active alert (pending or firing) into {@code seen}; fails on one that is not slow's
   * attainment alert; returns slow's attainment alert once it is firing, else null.
   */
  private JsonObject checkAlerts(Set<String> seen) throws Exception {
    JsonObject firing = null;
    for (Object o : get("/api/v1/alerts").getJsonObject("data").getJsonArray("alerts")) {
      JsonObject a = (JsonObject) o;
      JsonObject labels = a.getJsonObject("labels");
      String state = a.getString("state");
      seen.add(labels.getString("alertname") + "{" + labels.getString("llm_tenant") + "}=" + state);
      assertThat(labels.getString("alertname")).as("an active alert: %s", a).isEqualTo(ALERT);
      assertThat(labels.getString("llm_tenant"))
          .as("an active alert's tenant: %s", a)
          .isEqualTo("slow");
      if ("firing".equals(state)) {
        firing = a;
      }
    }
    return firing;
  }

  /** The attainment alert's expression without its comparison: met ÷ judged per tenant. */
  private String attainmentExpr() throws Exception {
    JsonArray groups = get("/api/v1/rules").getJsonObject("data").getJsonArray("groups");
    for (Object g : groups) {
      for (Object r : ((JsonObject) g).getJsonArray("rules")) {
        JsonObject rule = (JsonObject) r;
        if (ALERT.equals(rule.getString("name"))) {
          return rule.getString("query").replaceFirst("\\s*<\\s*[0-9.]+\\s*$", "");
        }
      }
    }
    throw new AssertionError("Prometheus has no rule " + ALERT + ": " + groups);
  }

  private Process startPrometheus(int adminPort, Path rules) throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      promPort = s.getLocalPort();
    }
    Path config = tmp.resolve("prometheus.yml");
    Files.writeString(
        config,
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            + "rule_files: ['"
            + rules
            + "']\n"
            + "scrape_configs:\n"
            + "  - job_name: phasemeter\n"
            + "    metrics_path: /metrics\n"
            + "    static_configs: [{targets: ['127.0.0.1:"
            + adminPort
            + "']}]\n");
    return new ProcessBuilder(
            "prometheus",
            "--config.file=" + config,
            "--storage.tsdb.path=" + tmp.resolve("data"),
            "--web.listen-address=127.0.0.1:" + promPort)
        .redirectErrorStream(true)
        .redirectOutput(tmp.resolve("prometheus.log").toFile())
        .start();
  }

  private JsonArray query(String expr) throws Exception {
    JsonObject r = get("/api/v1/query?query=" + URLEncoder.encode(expr, StandardCharsets.UTF_8));
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
}
