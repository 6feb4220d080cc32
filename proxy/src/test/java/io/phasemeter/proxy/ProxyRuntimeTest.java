package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.vertx.core.Vertx;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The runtime the proxy is built from: its meters, its close order, and a failed start. */
class ProxyRuntimeTest {
  @TempDir Path dir;
  private Vertx vertx;

  @BeforeEach
  void vertx() {
    vertx = Vertx.vertx();
  }

  @AfterEach
  void close() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static ProxyConfig config(String extra) {
    return ConfigLoader.parse(
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + extra
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: [http://127.0.0.1:1, http://127.0.0.1:2]\n"
            + "    slots: 3\n"
            + "    health: {path: null}\n",
        "test.yaml");
  }

  private ProxyConfig withKeys(ProxyConfig cfg, String keysYaml) throws Exception {
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(keys, keysYaml);
    return cfg.withAuth(
        new ProxyConfig.Auth(
            true, keys.toString(), Duration.ofSeconds(5), Duration.ofMinutes(5), 100));
  }

  private static final String BUDGETS =
      """
      budgets:
        - name: all
          model: "*"
          quantile: 0.95
          window: 1m
          limits_ms: {queue: 250}
          max_error_rate: 0.1
          min_join_coverage: 0.9
      """;

  @Test
  void eachComponentsMetersAppearOnTheScrape() throws Exception {
    ProxyConfig cfg =
        withKeys(
            config("telemetry: {per_upstream_metrics: true, engine_spans: {enabled: true}}\n"),
            "keys:\n  - {name: a, sha256: \"" + HashKeyMain.hash("sk-a") + "\"}\n...\n");
    ProxyRuntime runtime =
        ProxyRuntime.builder(vertx, cfg)
            .openTelemetry(OpenTelemetry.noop())
            .budgets(Budgets.parse(BUDGETS, "budgets.yaml"))
            .build();
    try {
      String text = runtime.metrics().registry().scrape();
      assertThat(text)
          // InFlight
          .contains("llm_requests_in_flight{llm_pool=\"default\"} 0.0")
          .contains("llm_requests_in_flight{llm_pool=\"none\"} 0.0")
          // SlotPool
          .contains("llm_queue_depth{llm_pool=\"default\"} 0.0")
          .contains("llm_slots_in_use{llm_pool=\"default\"} 0.0")
          .contains("llm_slots_capacity{llm_pool=\"default\"} 3.0")
          // UpstreamPool, and one series per upstream
          .contains("llm_upstreams_configured{llm_pool=\"default\"} 2.0")
          .contains("llm_upstreams_available{llm_pool=\"default\"}")
          .contains("llm_upstream_ejections_total{llm_pool=\"default\"} 0.0")
          .contains("llm_upstream_retries_total{llm_pool=\"default\"} 0.0")
          .contains("llm_upstream_stale_retries_total{llm_pool=\"default\"} 0.0")
          .contains("llm_upstream_available{llm_pool=\"default\",upstream=\"127.0.0.1:1\"}")
          .contains("llm_upstream_in_flight{llm_pool=\"default\",upstream=\"127.0.0.1:2\"} 0.0")
          // KeyStore
          .contains("llm_auth_keys 1.0")
          .contains("llm_auth_reloads_total{result=\"reloaded\"} 0.0")
          .contains("llm_auth_reloads_total{result=\"failed\"} 0.0")
          // EngineSpans
          .contains("llm_engine_spans_total{result=\"matched\"} 0.0")
          .contains("llm_engine_spans_evicted_total{held=\"timings\"} 0.0")
          .contains("llm_engine_spans_held{held=\"records\"} 0.0")
          // BodyBudget
          .contains("llm_request_uploads 0.0")
          // BudgetTracker
          .contains("llm_budget_ratio{budget=\"all\",llm_phase=\"queue\"} NaN")
          // Trace export without the proxy's own SDK: the records' rule, nothing dropped
          .contains("llm_traces_exported_ratio 1.0")
          .contains("llm_telemetry_dropped_total{signal=\"spans\"} 0.0")
          .contains("llm_telemetry_dropped_total{signal=\"records\"} 0.0")
          // Each gauge once: no two writers of one series.
          .containsOnlyOnce("llm_traces_exported_ratio 1.0");
      assertThat(text).doesNotContain("llm_telemetry_span_queue_size");
    } finally {
      runtime.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void perUpstreamSeriesOnlyWhenAskedFor() throws Exception {
    ProxyRuntime runtime =
        ProxyRuntime.builder(vertx, config("")).openTelemetry(OpenTelemetry.noop()).build();
    try {
      String text = runtime.metrics().registry().scrape();
      assertThat(text).contains("llm_upstreams_configured{llm_pool=\"default\"} 2.0");
      assertThat(text).doesNotContain("llm_upstream_available{").doesNotContain("llm_auth_keys");
    } finally {
      runtime.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void aRunningProxyClosesInTheOrderItWasBuiltReversed() throws Exception {
    PhasemeterProxy proxy =
        PhasemeterProxy.builder(vertx, config(""))
            .openTelemetry(OpenTelemetry.noop())
            .start()
            .await(10, TimeUnit.SECONDS);
    assertThat(proxy.runtime().closeSteps())
        .containsExactly("timers", "record feed", "listeners", "upstream pool default", "metrics");
    proxy.close().await(10, TimeUnit.SECONDS);
    assertThat(proxy.runtime().closeSteps()).isEmpty();
    assertThat(proxy.metrics().registry().isClosed()).isTrue();
  }

  @Test
  void theTelemetryTheProxyBuiltClosesBeforeTheMetrics() throws Exception {
    ProxyRuntime runtime = ProxyRuntime.builder(vertx, config("")).build();
    assertThat(runtime.closeSteps())
        .containsExactly("upstream pool default", "telemetry", "metrics");
    assertThat(runtime.metrics().registry().scrape())
        .contains("llm_telemetry_span_queue_size 0.0")
        .containsOnlyOnce("llm_traces_exported_ratio 1.0");
    runtime.close().await(10, TimeUnit.SECONDS);
  }

  @Test
  void aListenerThatCannotBindClosesEverythingBuilt() throws Exception {
    int adminPort;
    try (ServerSocket free = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      adminPort = free.getLocalPort();
    }
    ProxyMetrics metrics = ProxyMetrics.create();
    try (ServerSocket taken = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      ProxyConfig cfg =
          ConfigLoader.parse(
              "listen: {host: 127.0.0.1, port: "
                  + taken.getLocalPort()
                  + "}\n"
                  + "admin: {host: 127.0.0.1, port: "
                  + adminPort
                  + "}\n"
                  + "pools:\n"
                  + "  - name: default\n"
                  + "    models: [sim-llama]\n"
                  + "    upstreams: [http://127.0.0.1:1]\n"
                  + "    health: {path: null}\n",
              "test.yaml");
      assertThatThrownBy(
              () ->
                  PhasemeterProxy.builder(vertx, cfg)
                      .openTelemetry(OpenTelemetry.noop())
                      .metrics(metrics)
                      .start()
                      .await(10, TimeUnit.SECONDS))
          .hasMessageContaining("in use");
    }
    // By the time start failed, the admin listener that did bind is closed again, and so is the
    // rest.
    assertThat(metrics.registry().isClosed()).isTrue();
    try (ServerSocket again = new ServerSocket(adminPort, 50, InetAddress.getLoopbackAddress())) {
      assertThat(again.getLocalPort()).isEqualTo(adminPort);
    }
  }

  @Test
  void aBadKeysFileClosesWhatWasBuiltBeforeIt() throws Exception {
    ProxyMetrics metrics = ProxyMetrics.create();
    ProxyConfig cfg = withKeys(config(""), "keys: [{name: broken, sha256: nothex}]\n...\n");
    assertThatThrownBy(
            () ->
                PhasemeterProxy.builder(vertx, cfg)
                    .openTelemetry(OpenTelemetry.noop())
                    .metrics(metrics)
                    .start()
                    .await(10, TimeUnit.SECONDS))
        .isInstanceOf(ConfigException.class);
    assertThat(metrics.registry().isClosed()).isTrue();
  }

  @Test
  void aMissingProviderKeyFailsBeforeAnythingIsBuilt() {
    ProxyConfig cfg =
        ConfigLoader.parse(
            "pools:\n"
                + "  - name: hosted\n"
                + "    models: [m]\n"
                + "    upstreams: [https://api.example.com]\n"
                + "    api_key_env: PROVIDER_KEY\n",
            "test.yaml");
    ProxyMetrics metrics = ProxyMetrics.create();
    assertThatThrownBy(
            () ->
                PhasemeterProxy.builder(vertx, cfg)
                    .metrics(metrics)
                    .environment(Map.of())
                    .start()
                    .await(10, TimeUnit.SECONDS))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("pools[0].api_key_env: the environment variable PROVIDER_KEY");
    // Nothing was built, so nothing took the metrics over: the caller still holds them open.
    assertThat(metrics.registry().isClosed()).isFalse();
    metrics.close();
  }
}
