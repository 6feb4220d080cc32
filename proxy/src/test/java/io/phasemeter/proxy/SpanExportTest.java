package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.telemetry.NanoClock;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.vertx.core.http.HttpServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The proxy's own span export, end to end over OTLP/HTTP to a receiver in the test: spans arrive,
 * and when the receiver refuses them the drops show on /metrics while requests carry on.
 */
class SpanExportTest extends ProxyTestBase {

  private double metric(String text, String name) {
    Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name) + " (\\S+)$").matcher(text);
    return m.find() ? Double.parseDouble(m.group(1)) : Double.NaN;
  }

  private ProxyTelemetry startWithReceiver(
      int receiverStatus, AtomicInteger posts, AtomicLong bytes) throws Exception {
    HttpServer receiver =
        vertx
            .createHttpServer()
            .requestHandler(
                req ->
                    req.body()
                        .onSuccess(
                            b -> {
                              if (req.path().equals("/v1/traces")) {
                                posts.incrementAndGet();
                                bytes.addAndGet(b.length());
                              }
                              req.response()
                                  .setStatusCode(receiverStatus)
                                  .putHeader("content-type", "application/x-protobuf")
                                  .end();
                            }))
            .listen(0, "127.0.0.1")
            .await(5, TimeUnit.SECONDS);
    int backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION)));
    ProxyConfig cfg = config(backend, 4, null);
    ProxyTelemetry telemetry =
        ProxyTelemetry.create(
            cfg.telemetry(),
            Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:" + receiver.actualPort()),
            "test",
            NanoClock.system());
    ProxyMetrics metrics = ProxyMetrics.create();
    telemetry.bindTo(metrics);
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(telemetry.openTelemetry())
            .metrics(metrics)
            .start()
            .await(10, TimeUnit.SECONDS);
    return telemetry;
  }

  @Test
  void spansReachAnOtlpReceiverAndExportIsMeasured() throws Exception {
    AtomicInteger posts = new AtomicInteger();
    AtomicLong bytes = new AtomicLong();
    ProxyTelemetry telemetry = startWithReceiver(200, posts, bytes);
    try {
      for (int i = 0; i < 10; i++) {
        assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      }
      Awaitility.await()
          .atMost(Duration.ofSeconds(15))
          .until(() -> telemetry.health().exportedSpans() == 80);
      assertThat(posts.get()).isPositive();
      assertThat(bytes.get()).isPositive();
      String text = admin("/metrics").text();
      assertThat(metric(text, "llm_telemetry_dropped_total{signal=\"spans\"}")).isZero();
      assertThat(metric(text, "llm_telemetry_exports_total")).isPositive();
      assertThat(metric(text, "llm_telemetry_span_queue_size")).isZero();
      assertThat(metric(text, "llm_traces_exported_ratio")).isEqualTo(1.0);
    } finally {
      telemetry.close();
    }
  }

  @Test
  void aReceiverThatRefusesSpansCostsDropsNotRequests() throws Exception {
    AtomicInteger posts = new AtomicInteger();
    ProxyTelemetry telemetry = startWithReceiver(400, posts, new AtomicLong());
    try {
      for (int i = 0; i < 10; i++) {
        assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      }
      Awaitility.await()
          .atMost(Duration.ofSeconds(15))
          .untilAsserted(
              () ->
                  assertThat(
                          metric(
                              admin("/metrics").text(),
                              "llm_telemetry_dropped_total{signal=\"spans\"}"))
                      .isEqualTo(80.0));
      assertThat(telemetry.health().exportedSpans()).isZero();
    } finally {
      telemetry.close();
    }
  }

  @Test
  void exportSharesFollowTheSamplingRule() throws Exception {
    // ratio 0, errors kept: only the failed request is exported.
    int backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION)));
    ProxyConfig cfg =
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams: [http://127.0.0.1:"
                + backend
                + "]\ntelemetry:\n  sampling: {ratio: 0.0, keep_errors: true, keep_slower_than: 60s}\n",
            "sampling.yaml");
    startProxy(cfg);
    for (int i = 0; i < 3; i++) {
      call("/v1/chat/completions", chat("x", false));
    }
    call("/v1/chat/completions", "{\"model\":\"nope\",\"messages\":[1]}");
    awaitFinished(4);
    assertThat(metric(admin("/metrics").text(), "llm_traces_exported_ratio")).isEqualTo(0.25);
    long sampled =
        finished.stream()
            .map(f -> admin0("/admin/records/" + recordIdOf(f)))
            .filter(r -> r.contains("\"sampled\":true"))
            .count();
    assertThat(sampled).isEqualTo(1);
  }

  private String admin0(String path) {
    try {
      return admin(path).text();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static String recordIdOf(Finished f) {
    return f.traceId();
  }
}
