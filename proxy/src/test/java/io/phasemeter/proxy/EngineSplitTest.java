package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.OtlpTraceDecoderTest;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The engine's own spans, end to end: the simulator exports vLLM's {@code llm_request} span to the
 * proxy's admin port, the proxy matches it to the record and splits generation. Injected truth: the
 * proxy admits 8 requests, the simulator runs 2 at a time, and every request takes a known time, so
 * the simulator's queue is known in whole multiples of one request's duration.
 */
class EngineSplitTest extends ProxyTestBase {
  private static final long HOLD_MS = 200;
  private static final long STEP_MS = 50;
  private static final int TOKENS = 5;

  /** One request's time in the engine: the hold before the first token, then the decode steps. */
  private static final double REQUEST_MS = HOLD_MS + (TOKENS - 1) * STEP_MS;

  /**
   * Tolerance: a third of one request. The test tells apart waits that differ by a whole request;
   * arrivals spread by a few milliseconds and timers that fire late on a busy machine stay far
   * inside it.
   */
  private static final double TOLERANCE_MS = REQUEST_MS / 3;

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /** {@code config(...)} with {@code telemetry.engine_spans} set. */
  static ProxyConfig engineConfig(int upstreamPort, int slots, boolean enabled, String wait) {
    ProxyConfig base = config(upstreamPort, slots, null);
    ProxyConfig.Telemetry t = base.telemetry();
    return new ProxyConfig(
        base.listen(),
        base.admin(),
        base.limits(),
        base.auth(),
        base.pools(),
        new ProxyConfig.Telemetry(
            t.enabled(),
            t.serviceName(),
            t.otlp(),
            t.sampling(),
            t.records(),
            t.perUpstreamMetrics(),
            new ProxyConfig.EngineSpans(enabled, io.phasemeter.core.Durations.parse(wait), 1000)),
        base.budgets(),
        base.drain());
  }

  private Simulator simulator(int port, int slots, String otlpEndpoint) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(port)
                .withSlots(slots)
                .withDecodeStepMs(STEP_MS)
                .withDecodeStepGrowth(0)
                .withPrefillTokensPerSecond(1_000_000)
                .withOtlpTracesEndpoint(otlpEndpoint))
        .await(10, TimeUnit.SECONDS);
  }

  private Future<Response> send() {
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("x-sim-ttft-ms", Long.toString(HOLD_MS));
    return callAsync(
        HttpMethod.POST,
        "/v1/chat/completions",
        "{\"model\":\"sim-llama\",\"stream\":true,\"max_tokens\":"
            + TOKENS
            + ",\"min_tokens\":"
            + TOKENS
            + ",\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        h);
  }

  /** The record of {@code traceId} once published (it waits for the engine span). */
  private JsonObject record(String traceId) {
    Response[] r = new Response[1];
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(
            () -> {
              r[0] = admin("/admin/records/" + traceId);
              return r[0].status() == 200;
            });
    return new JsonObject(r[0].body());
  }

  @Test
  void theEnginesQueueShowsUpInEngineQueueNotInTheProxysQueue() throws Exception {
    int simPort = freePort();
    startProxy(engineConfig(simPort, 8, true, "5s"));
    simulator(simPort, 2, "http://127.0.0.1:" + proxy.adminPort() + "/v1/traces");
    // Warm up proxy, simulator and exporter, so class loading is not part of the truth.
    assertThat(send().await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    record(awaitFinished(1).get(0).traceId());
    finished.clear();

    List<Future<Response>> all = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      all.add(send());
    }
    for (Future<Response> f : all) {
      assertThat(f.await(30, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    List<JsonObject> records = new ArrayList<>();
    for (Finished f : awaitFinished(8)) {
      records.add(record(f.traceId()));
    }
    records.sort(
        Comparator.comparingDouble(r -> r.getJsonObject("phases_ms").getDouble("engine_queue")));

    List<Double> engineQueues = new ArrayList<>();
    for (int i = 0; i < records.size(); i++) {
      JsonObject r = records.get(i);
      JsonObject phases = r.getJsonObject("phases_ms");
      assertThat(r.getString("engine_status")).isEqualTo("matched");
      // Two run at once: the 1st and 2nd wait nothing, the 3rd and 4th one request, and so on.
      double truth = (i / 2) * REQUEST_MS;
      double engineQueue = phases.getDouble("engine_queue");
      engineQueues.add(engineQueue);
      assertThat(engineQueue)
          .as("engine_queue of request %d (truth %.0f ms)", i + 1, truth)
          .isBetween(truth - TOLERANCE_MS, truth + TOLERANCE_MS);
      assertThat(phases.getDouble("queue")).as("the proxy's own queue").isLessThan(TOLERANCE_MS);
      // The engine's prefill includes the requested hold; decode is the steps after the first
      // token. Steps are due on the simulator's schedule, so a late first token shortens decode.
      assertThat(phases.getDouble("prefill")).isBetween(HOLD_MS - 1.0, HOLD_MS + TOLERANCE_MS);
      assertThat(phases.getDouble("decode"))
          .isBetween((TOKENS - 1) * STEP_MS - TOLERANCE_MS, (TOKENS - 1) * STEP_MS + TOLERANCE_MS);
      double split = engineQueue + phases.getDouble("prefill") + phases.getDouble("decode");
      double e2e = r.getJsonObject("engine").getDouble("e2e_ms");
      assertThat(split)
          .as("the split adds up to the engine's e2e")
          .isCloseTo(e2e, org.assertj.core.api.Assertions.within(0.01));
      // Proxy and simulator share this JVM's clock: the engine's time lies inside generation.
      assertThat(e2e)
          .as("e2e within generation")
          .isLessThanOrEqualTo(phases.getDouble("generation") + 0.01);
    }
    System.out.println(
        "engine_queue ms (sorted) " + engineQueues + ", one request " + REQUEST_MS + " ms");

    String metrics = admin("/metrics").text();
    assertThat(metrics).contains("llm_engine_spans_total{result=\"matched\"} 9.0");
    assertThat(metrics).contains("llm_engine_spans_total{result=\"missing\"} 0.0");
    assertThat(metrics)
        .containsPattern(
            "llm_phase_duration_seconds_count\\{gen_ai_request_model=\"sim-llama\",llm_phase=\"engine_queue\",llm_pool=\"default\"} 9");
    JsonObject stats = new JsonObject(admin("/admin/stats").body());
    assertThat(stats.getJsonObject("engine_spans").getDouble("coverage")).isEqualTo(1.0);
    Set<String> phases = new HashSet<>();
    stats.getJsonArray("series").forEach(s -> phases.add(((JsonObject) s).getString("phase")));
    assertThat(phases).contains("engine_queue", "prefill", "decode", "generation", "queue");
    assertIdle();
  }

  @Test
  void withoutEngineSpansTheRecordSaysMissingAndNothingElseChanges() throws Exception {
    // The same request through a proxy with engine spans off, then on with a silent engine.
    Simulator sim = simulator(0, 2, null);
    startProxy(engineConfig(sim.port(), 8, false, "2s"));
    assertThat(send().await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    JsonObject off = record(awaitFinished(1).get(0).traceId());
    // Off: an engine span posted anyway is refused unread (404, saying why) and changes nothing.
    Response posted = postTraces(OtlpTraceDecoderTest.export(), "application/x-protobuf");
    assertThat(posted.status()).isEqualTo(404);
    assertThat(posted.body().toString()).contains("telemetry.engine_spans.enabled: false");
    assertThat(admin("/metrics").text())
        .contains("llm_engine_span_exports_total{result=\"disabled\"} 1.0");
    assertThat(off.containsKey("engine_status")).isFalse();
    assertThat(off.containsKey("engine")).isFalse();
    assertThat(off.getJsonObject("phases_ms").fieldNames())
        .containsExactlyInAnyOrder(
            "auth", "receive", "prepare", "route", "queue", "generation", "write");
    JsonObject offStats = new JsonObject(admin("/admin/stats").body());
    assertThat(offStats.getJsonObject("engine_spans").getBoolean("enabled")).isFalse();
    proxy.close().await(10, TimeUnit.SECONDS);
    finished.clear();

    startProxy(engineConfig(sim.port(), 8, true, "300ms"));
    assertThat(send().await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    JsonObject on = record(awaitFinished(1).get(0).traceId());
    assertThat(on.getString("engine_status")).isEqualTo("missing");
    assertThat(on.containsKey("engine")).isTrue();
    assertThat(on.getValue("engine")).isNull();
    assertThat(on.getJsonObject("phases_ms").fieldNames())
        .isEqualTo(off.getJsonObject("phases_ms").fieldNames());
    Set<String> onFields = new HashSet<>(on.fieldNames());
    onFields.removeAll(Set.of("engine_status", "engine"));
    assertThat(onFields).isEqualTo(off.fieldNames());
    assertThat(admin("/metrics").text()).contains("llm_engine_spans_total{result=\"missing\"} 1.0");
    assertThat(
            new JsonObject(admin("/admin/stats").body())
                .getJsonObject("engine_spans")
                .getDouble("coverage"))
        .isEqualTo(0.0);
  }

  @Test
  void theReceiverSpeaksOtlpHttpProtobufBehindTheAdminToken() throws Exception {
    Simulator sim = simulator(0, 2, null);
    ProxyConfig c = engineConfig(sim.port(), 8, true, "2s");
    startProxy(
        new ProxyConfig(
            c.listen(),
            new ProxyConfig.Admin(c.admin().host(), c.admin().port(), "s3cret"),
            c.limits(),
            c.auth(),
            c.pools(),
            c.telemetry(),
            c.budgets(),
            c.drain()));
    byte[] export =
        OtlpTraceDecoderTest.export(
            OtlpTraceDecoderTest.vllmSpan(OtlpTraceDecoderTest.TRACE, 0.5, 0.1, 0.2));
    assertThat(postTraces(export, "application/x-protobuf").status()).isEqualTo(401);
    Response ok = postTraces(export, "application/x-protobuf", "authorization", "Bearer s3cret");
    assertThat(ok.status()).isEqualTo(200);
    assertThat(ok.headers().get("content-type")).isEqualTo("application/x-protobuf");
    assertThat(ExportTraceServiceResponse.parseFrom(ok.body().getBytes()))
        .isEqualTo(ExportTraceServiceResponse.getDefaultInstance());
    assertThat(proxy.engineSpans().stats().heldTimings()).isEqualTo(1);
    assertThat(
            postTraces("{}".getBytes(), "application/json", "authorization", "Bearer s3cret")
                .status())
        .isEqualTo(415);
    assertThat(
            postTraces(
                    new byte[] {(byte) 0xff, 1, 2},
                    "application/x-protobuf",
                    "authorization",
                    "Bearer s3cret")
                .status())
        .isEqualTo(400);
  }

  private Response postTraces(byte[] body, String type, String... headers) throws Exception {
    RequestOptions options =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost("127.0.0.1")
            .setPort(proxy.adminPort())
            .setURI("/v1/traces")
            .putHeader("content-type", type);
    for (int i = 0; i + 1 < headers.length; i += 2) {
      options.putHeader(headers[i], headers[i + 1]);
    }
    return onClientContext(
            () ->
                client
                    .request(options)
                    .compose(req -> req.send(Buffer.buffer(body)))
                    .compose(
                        resp ->
                            resp.body()
                                .map(b -> new Response(resp.statusCode(), resp.headers(), b))))
        .await(30, TimeUnit.SECONDS);
  }
}
