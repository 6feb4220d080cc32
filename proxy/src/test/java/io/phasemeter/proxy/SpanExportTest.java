package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.ReadableSpan;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.vertx.core.http.HttpServer;
import java.time.Duration;
import java.util.List;
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

  /** The traceparent of every request the upstream got. */
  private final List<String> upstreamTraceparents =
      new java.util.concurrent.CopyOnWriteArrayList<>();

  /** Every span the receiver got, decoded. */
  private final List<io.opentelemetry.proto.trace.v1.Span> received =
      new java.util.concurrent.CopyOnWriteArrayList<>();

  private ProxyTelemetry startWithReceiver(
      int receiverStatus, AtomicInteger posts, AtomicLong bytes) throws Exception {
    return startWithReceiver(receiverStatus, posts, bytes, null);
  }

  /**
   * {@code ratio} null: the default sampling (everything exported); else that ratio, errors kept.
   */
  private ProxyTelemetry startWithReceiver(
      int receiverStatus, AtomicInteger posts, AtomicLong bytes, Double ratio) throws Exception {
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
                                received.addAll(spansIn(b.getBytes()));
                              }
                              req.response()
                                  .setStatusCode(receiverStatus)
                                  .putHeader("content-type", "application/x-protobuf")
                                  .end();
                            }))
            .listen(0, "127.0.0.1")
            .await(5, TimeUnit.SECONDS);
    int backend = startCompletingBackend();
    ProxyConfig cfg = ratio == null ? config(backend, 4, null) : samplingConfig(backend, ratio);
    // Started as `phasemeter proxy` starts it, with an OTLP endpoint in the environment.
    ProxyMetrics metrics = ProxyMetrics.create();
    ProxyTelemetry telemetry =
        ProxyMain.telemetry(
            cfg,
            Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:" + receiver.actualPort()));
    proxy =
        ProxyMain.builder(vertx, cfg, telemetry, metrics, new Budgets(List.of()))
            .observer(ctx -> built.add(Built.of(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);
    return telemetry;
  }

  /** What a finished request's own spans were: the SDK's, or deferred, and their ids. */
  private record Built(
      String traceId, boolean sdkRoot, Map<Phase, String> phaseIds, int sdkPhases) {
    static Built of(RequestContext ctx) {
      Map<Phase, String> ids = new java.util.EnumMap<>(Phase.class);
      int sdk = 0;
      for (Phase p : Phase.values()) {
        io.opentelemetry.api.trace.Span s = ctx.phaseSpan(p);
        if (s != null) {
          ids.put(p, s.getSpanContext().getSpanId());
          sdk += s instanceof ReadableSpan ? 1 : 0;
        }
      }
      return new Built(ctx.traceId(), ctx.rootSpan() instanceof ReadableSpan, ids, sdk);
    }
  }

  /** Every request the proxy started by {@link #startWithReceiver} finished. */
  private final List<Built> built = new java.util.concurrent.CopyOnWriteArrayList<>();

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

  /** An upstream answering every request with a completion, keeping each traceparent it got. */
  private int startCompletingBackend() throws Exception {
    return startBackend(
        req -> {
          String traceparent = req.getHeader("traceparent");
          if (traceparent != null) {
            upstreamTraceparents.add(traceparent);
          }
          req.body()
              .onSuccess(
                  b ->
                      req.response()
                          .putHeader("content-type", "application/json")
                          .end(VllmScript.COMPLETION));
        });
  }

  /** One pool on {@code backend}; export sampling at {@code ratio}, errors kept, slow at 60 s. */
  private static ProxyConfig samplingConfig(int backend, double ratio) {
    return ConfigLoader.parse(
        "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
            + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams: [http://127.0.0.1:"
            + backend
            + "]\ntelemetry:\n  sampling: {ratio: "
            + ratio
            + ", keep_errors: true, keep_slower_than: 60s}\n",
        "sampling.yaml");
  }

  @Test
  void exportSharesFollowTheSamplingRule() throws Exception {
    // ratio 0, errors kept: only the failed request is exported.
    startProxy(samplingConfig(startCompletingBackend(), 0.0));
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

  private static List<io.opentelemetry.proto.trace.v1.Span> spansIn(byte[] body) {
    try {
      List<io.opentelemetry.proto.trace.v1.Span> out = new java.util.ArrayList<>();
      for (var rs :
          io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest.parseFrom(body)
              .getResourceSpansList()) {
        for (var ss : rs.getScopeSpansList()) {
          out.addAll(ss.getSpansList());
        }
      }
      return out;
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String hex(com.google.protobuf.ByteString id) {
    return java.util.HexFormat.of().formatHex(id.toByteArray());
  }

  /** The received spans by trace id: each trace's root and the root's children. */
  private Map<String, List<io.opentelemetry.proto.trace.v1.Span>> byTrace() {
    return received.stream()
        .collect(java.util.stream.Collectors.groupingBy(s -> hex(s.getTraceId())));
  }

  /** Every exported trace is whole: one server root and each of its phases as a child of it. */
  private static void assertWhole(List<io.opentelemetry.proto.trace.v1.Span> trace, int phases) {
    List<io.opentelemetry.proto.trace.v1.Span> roots =
        trace.stream()
            .filter(
                s -> s.getKind() == io.opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER)
            .toList();
    assertThat(roots).hasSize(1);
    String rootId = hex(roots.get(0).getSpanId());
    assertThat(trace).hasSize(phases + 1);
    assertThat(trace.stream().filter(s -> s != roots.get(0)).map(s -> hex(s.getParentSpanId())))
        .containsOnly(rootId);
    for (io.opentelemetry.proto.trace.v1.Span s : trace) {
      assertThat(s.getEndTimeUnixNano()).isGreaterThanOrEqualTo(s.getStartTimeUnixNano());
      assertThat(s.getStartTimeUnixNano())
          .isGreaterThanOrEqualTo(roots.get(0).getStartTimeUnixNano());
      assertThat(s.getEndTimeUnixNano()).isLessThanOrEqualTo(roots.get(0).getEndTimeUnixNano());
    }
  }

  @Test
  void deferredPhaseSpansAreExportedWholeWithTheIdsExemplarsAndTheUpstreamSaw() throws Exception {
    AtomicInteger posts = new AtomicInteger();
    List<String> upstreamParents = upstreamTraceparents;
    ProxyTelemetry telemetry = startWithReceiver(200, posts, new AtomicLong());
    try {
      for (int i = 0; i < 10; i++) {
        assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      }
      Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> received.size() == 80);
      Map<String, List<io.opentelemetry.proto.trace.v1.Span>> traces = byTrace();
      assertThat(traces).hasSize(10);
      traces.values().forEach(t -> assertWhole(t, 7));
      java.util.Set<String> phaseSpanIds = new java.util.HashSet<>();
      java.util.Set<String> rootSpanIds = new java.util.HashSet<>();
      for (io.opentelemetry.proto.trace.v1.Span s : received) {
        (s.getKind() == io.opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
                ? rootSpanIds
                : phaseSpanIds)
            .add(hex(s.getSpanId()));
      }
      // The upstream's traceparent named the generation span that was later exported.
      assertThat(upstreamParents).hasSize(10);
      for (String tp : upstreamParents) {
        String parentId = tp.split("-")[2];
        assertThat(
                received.stream()
                    .filter(s -> hex(s.getSpanId()).equals(parentId))
                    .map(io.opentelemetry.proto.trace.v1.Span::getName))
            .containsExactly("inference.generate");
      }
      // Phase exemplars name exported spans.
      String om = admin("/metrics", "accept", "application/openmetrics-text; version=1.0.0").text();
      Matcher m =
          Pattern.compile(
                  "(?m)^llm_phase_duration_seconds_bucket\\{([^}]*)\\} \\S+ # \\{span_id=\"([0-9a-f]{16})\"")
              .matcher(om);
      int exemplars = 0;
      while (m.find()) {
        // A phase's exemplar names that phase's span; gateway and unattributed, which are sums
        // over phases, name the root.
        boolean sum = m.group(1).matches(".*llm_phase=\"(gateway|unattributed)\".*");
        assertThat(sum ? rootSpanIds : phaseSpanIds).as(m.group()).contains(m.group(2));
        exemplars++;
      }
      assertThat(exemplars).as("phase exemplars in\n" + om).isPositive();
    } finally {
      telemetry.close();
    }
  }

  @Test
  void onlyExportedRequestsAreBuiltAsSdkSpansAndTheyAreWhole() throws Exception {
    // ratio 0, errors kept: the three successes export nothing, the failure all of its spans.
    AtomicInteger posts = new AtomicInteger();
    ProxyTelemetry telemetry = startWithReceiver(200, posts, new AtomicLong(), 0.0);
    try {
      for (int i = 0; i < 3; i++) {
        assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      }
      assertThat(call("/v1/chat/completions", "{\"model\":\"nope\",\"messages\":[1]}").status())
          .isEqualTo(404);
      Awaitility.await()
          .atMost(Duration.ofSeconds(15))
          .until(() -> metric(admin("/metrics").text(), "llm_traces_exported_ratio") == 0.25);
      Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> !received.isEmpty());
      telemetry.decisions().forceFlush().join(5, TimeUnit.SECONDS);
      Map<String, List<io.opentelemetry.proto.trace.v1.Span>> traces = byTrace();
      assertThat(traces).hasSize(1);
      List<io.opentelemetry.proto.trace.v1.Span> failed = traces.values().iterator().next();
      // The unknown model is found by route: the phases before it and the error's write ran.
      assertThat(failed.stream().map(io.opentelemetry.proto.trace.v1.Span::getName))
          .containsExactlyInAnyOrder(
              "POST /v1/chat/completions",
              "auth.check",
              "request.receive",
              "request.prepare",
              "route.select",
              "response.write");
      assertWhole(failed, 5);
      assertThat(telemetry.health().exportedSpans()).isEqualTo(6);
      assertThat(telemetry.decisions().evictedSpans()).isZero();
    } finally {
      telemetry.close();
    }
  }

  @Test
  void theShippedProxyBuildsOnlyTheRootOfARequestNotExportedAsAnSdkSpan() throws Exception {
    // ratio 0, errors kept: the success is not exported, the failure is.
    ProxyTelemetry telemetry = startWithReceiver(200, new AtomicInteger(), new AtomicLong(), 0.0);
    try {
      assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      assertThat(call("/v1/chat/completions", "{\"model\":\"nope\",\"messages\":[1]}").status())
          .isEqualTo(404);
      Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> built.size() == 2);
      String failedTrace = built.get(1).traceId();
      Awaitility.await()
          .atMost(Duration.ofSeconds(15))
          .until(() -> byTrace().getOrDefault(failedTrace, List.of()).size() == 6);
    } finally {
      // Flushes whatever is still queued for export.
      telemetry.close();
    }
    Built ok = built.get(0);
    Built failed = built.get(1);

    // Not exported: the root is the SDK's span (the export decision is made on it); the seven
    // phases ran as deferred spans and were never built as the SDK's.
    assertThat(ok.sdkRoot()).isTrue();
    assertThat(ok.phaseIds()).hasSize(7);
    assertThat(ok.sdkPhases()).as("phase spans built as SDK spans").isZero();
    assertThat(byTrace()).doesNotContainKey(ok.traceId());

    // Exported: its deferred phase spans became SDK spans with the ids they had handed out.
    assertThat(failed.sdkRoot()).isTrue();
    assertThat(failed.sdkPhases()).isZero();
    List<io.opentelemetry.proto.trace.v1.Span> trace = byTrace().get(failed.traceId());
    assertWhole(trace, failed.phaseIds().size());
    assertThat(
            trace.stream()
                .filter(
                    s ->
                        s.getKind()
                            != io.opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER)
                .map(s -> hex(s.getSpanId())))
        .containsExactlyInAnyOrderElementsOf(failed.phaseIds().values());
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
