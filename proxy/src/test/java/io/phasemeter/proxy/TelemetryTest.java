package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/** What a user sees on the admin port: metrics with exemplars, records, the feed, the stats. */
class TelemetryTest extends ProxyTestBase {
  private static final Pattern EXEMPLAR =
      Pattern.compile(
          "gen_ai_server_time_to_first_token_seconds_bucket\\{[^}]*\\} \\S+ # \\{span_id=\"([0-9a-f]{16})\",trace_id=\"([0-9a-f]{32})\"\\}");

  private Simulator simulator() throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(0)
                .withSlots(64)
                .withDecodeStepMs(1)
                .withPrefillTokensPerSecond(1_000_000))
        .await(10, TimeUnit.SECONDS);
  }

  private static String exact(int tokens, boolean stream) {
    return "{\"model\":\"sim-llama\",\"stream\":"
        + stream
        + ",\"max_tokens\":"
        + tokens
        + ",\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  }

  @Test
  void telemetryOffStillProxiesButRecordsNoSpanRecordOrRequestMetric() throws Exception {
    int upstream = simulator().port();
    String yaml =
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + "telemetry: {enabled: false}\n"
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: [http://127.0.0.1:"
            + upstream
            + "]\n"
            + "    health: {path: null}\n";
    startProxy(io.phasemeter.proxy.config.ConfigLoader.parse(yaml, "off.yaml"));
    assertThat(call("/v1/chat/completions", exact(4, false)).status()).isEqualTo(200);
    assertThat(call("/v1/chat/completions", exact(4, true)).status()).isEqualTo(200);
    awaitFinished(2);
    assertThat(spansStarted.get()).isZero();
    assertThat(spans.getFinishedSpanItems()).isEmpty();
    assertThat(proxy.records().size()).isZero();
    String metrics = admin("/metrics").text();
    assertThat(metrics).doesNotContain("gen_ai_server_request_duration_seconds_count");
    assertThat(metrics).contains("jvm_memory_used_bytes");
  }

  @Test
  void histogramsCarryExemplarsThatResolveToRecords() throws Exception {
    startProxy(config(simulator().port(), 8, null));
    for (int i = 0; i < 5; i++) {
      assertThat(call("/v1/chat/completions", exact(4, true)).status()).isEqualTo(200);
    }
    awaitFinished(5);
    Response om = admin("/metrics", "accept", "application/openmetrics-text; version=1.0.0");
    assertThat(om.status()).isEqualTo(200);
    assertThat(om.headers().get("content-type")).startsWith("application/openmetrics-text");
    Matcher m = EXEMPLAR.matcher(om.text());
    assertThat(m.find()).as("a TTFT bucket with an exemplar in:\n" + om.text()).isTrue();
    String traceId = m.group(2);
    Response record = admin("/admin/records/" + traceId);
    assertThat(record.status()).isEqualTo(200);
    assertThat(new JsonObject(record.text()).getString("trace_id")).isEqualTo(traceId);
    assertThat(om.text()).contains("# EOF");
    // OpenMetrics 1.0 (and Prometheus 2.x) allow exemplars on buckets and counters only.
    assertThat(om.text()).doesNotContainPattern("(?m)_(count|sum)\\{[^}]*\\} \\S+ # \\{");

    // A scraper asking for protobuf gets text, not binary mangled into a string.
    Response proto =
        admin(
            "/metrics",
            "accept",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.9,text/plain;version=0.0.4;q=0.5");
    assertThat(proto.headers().get("content-type")).startsWith("text/plain");
    assertThat(proto.text()).contains("gen_ai_server_time_to_first_token_seconds_bucket");
    Response text = admin("/metrics");
    assertThat(text.headers().get("content-type")).startsWith("text/plain");
    assertThat(text.text()).doesNotContain("trace_id=");
  }

  @Test
  void everyDesignedMetricIsExposedWithItsLabels() throws Exception {
    startProxy(config(simulator().port(), 8, null));
    call("/v1/chat/completions", exact(4, true));
    call("/v1/completions", "{\"model\":\"sim-llama\",\"prompt\":[1,2,3],\"max_tokens\":2}");
    call(
        "/v1/chat/completions",
        "{\"model\":\"gpt-x\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    awaitFinished(3);
    String t = admin("/metrics").text();
    assertThat(t)
        .contains(
            "gen_ai_server_request_duration_seconds_bucket{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"sim-llama\",llm_pool=\"default\",llm_streaming=\"true\",llm_tenant=\"other\",outcome=\"success\",le=\"0.01\"}",
            "gen_ai_server_request_duration_seconds_bucket{gen_ai_operation_name=\"text_completion\",gen_ai_request_model=\"sim-llama\",llm_pool=\"default\",llm_streaming=\"false\",llm_tenant=\"other\",outcome=\"success\",le=\"655.36\"}",
            "gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"other\",llm_pool=\"none\",llm_streaming=\"false\",llm_tenant=\"other\",outcome=\"client_error\"} 1",
            "gen_ai_server_time_to_first_token_seconds_count{gen_ai_request_model=\"sim-llama\",llm_pool=\"default\",llm_tenant=\"other\"} 1",
            "gen_ai_server_time_per_output_token_seconds_count{gen_ai_request_model=\"sim-llama\",llm_pool=\"default\",llm_tenant=\"other\"} 1",
            "llm_inter_token_latency_seconds_count{gen_ai_request_model=\"sim-llama\",llm_pool=\"default\"} 3",
            "llm_tokens_total{gen_ai_request_model=\"sim-llama\",gen_ai_token_type=\"output\",llm_pool=\"default\",llm_tenant=\"other\"} 6.0",
            "llm_requests_in_flight{llm_pool=\"default\"} 0.0",
            "llm_requests_in_flight{llm_pool=\"none\"} 0.0",
            "llm_queue_depth{llm_pool=\"default\"} 0.0",
            "llm_slots_in_use{llm_pool=\"default\"} 0.0",
            "llm_slots_capacity{llm_pool=\"default\"} 8.0",
            "llm_traces_exported_ratio 1.0",
            "llm_telemetry_dropped_total{signal=\"records\"} 0.0",
            "llm_telemetry_dropped_total{signal=\"spans\"} 0.0",
            "jvm_memory_used_bytes",
            "process_cpu_usage");
    for (Phase p : Phase.values()) {
      assertThat(t)
          .contains(
              "llm_phase_duration_seconds_count{gen_ai_request_model=\"sim-llama\",llm_phase=\""
                  + p.label()
                  + "\"");
    }
    assertThat(t).contains("llm_phase=\"gateway\"", "llm_phase=\"unattributed\"");
  }

  @Test
  void tenThousandRandomModelNamesKeepTheSeriesBounded() throws Exception {
    startProxy(config(simulator().port(), 8, null));
    call(
        "/v1/chat/completions",
        "{\"model\":\"warm-up\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    awaitFinished(1);
    Set<String> before = series(admin("/metrics").text());
    HttpClient pooled =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(true), new PoolOptions().setHttp1MaxSize(32));
    int total = 10_000;
    List<Future<Integer>> inFlight = new ArrayList<>();
    io.vertx.core.Context clientContext = vertx.getOrCreateContext();
    for (int i = 0; i < total; i++) {
      String body =
          "{\"model\":\""
              + UUID.randomUUID()
              + "\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
      // Issued from a Vert.x context: the client's handlers are then set on the event loop
      // that delivers the response (from a foreign thread a body can be missed).
      Promise<Integer> sent = Promise.promise();
      String traceparent = "00-" + String.format("%032x", 0xabc0000L + i) + "-00f067aa0ba902b7-01";
      clientContext.runOnContext(
          v ->
              pooled
                  .request(
                      new RequestOptions()
                          .setMethod(HttpMethod.POST)
                          .setHost("127.0.0.1")
                          .setPort(proxy.port())
                          .setURI("/v1/chat/completions")
                          .putHeader("content-type", "application/json")
                          .putHeader("traceparent", traceparent))
                  .compose(r -> r.send(body))
                  .compose(r -> r.body().map(b -> r.statusCode()))
                  .onComplete(sent));
      inFlight.add(sent.future());
      if (inFlight.size() == 256) {
        try {
          Future.all(inFlight).await(60, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
          final int last = i;
          long done = inFlight.stream().filter(Future::isComplete).count();
          throw new AssertionError(
              "i="
                  + i
                  + " done="
                  + done
                  + " inFlight="
                  + proxy.inFlight()
                  + " finished="
                  + finished.size()
                  + " stuck="
                  + java.util.stream.IntStream.range(0, inFlight.size())
                      .filter(k -> !inFlight.get(k).isComplete())
                      .mapToObj(
                          k ->
                              proxy
                                  .records()
                                  .get(String.format("%032x", 0xabc0000L + last - 255 + k)))
                      .toList()
                  + " failed="
                  + inFlight.stream()
                      .filter(Future::failed)
                      .map(f -> String.valueOf(f.cause()))
                      .distinct()
                      .toList());
        }
        inFlight.clear();
      }
    }
    Future.all(inFlight).await(60, TimeUnit.SECONDS);
    Awaitility.await().until(() -> finished.size() == total + 1);
    String after = admin("/metrics").text();
    assertThat(series(after)).isEqualTo(before);
    assertThat(after)
        .contains(
            "gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"other\",llm_pool=\"none\",llm_streaming=\"false\",llm_tenant=\"other\",outcome=\"client_error\"} "
                + (total + 1));
  }

  /** The proxy's own series (name and labels, without values); JVM and process series vary. */
  private static Set<String> series(String text) {
    Set<String> out = new java.util.TreeSet<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty()
          && !line.startsWith("#")
          && !line.startsWith("jvm_")
          && !line.startsWith("process_")
          && !line.startsWith("system_")) {
        out.add(line.substring(0, line.lastIndexOf(' ')));
      }
    }
    return out;
  }

  @Test
  void theFeedDeliversOneRecordPerRequestAndServerTimingEqualsTheRecord() throws Exception {
    startProxy(config(simulator().port(), 64, null));
    Set<String> fed = ConcurrentHashMap.newKeySet();
    List<String> duplicates = new ArrayList<>();
    Promise<Void> subscribed = Promise.promise();
    HttpClient feedClient = vertx.createHttpClient();
    feedClient
        .request(
            new RequestOptions()
                .setMethod(HttpMethod.GET)
                .setHost("127.0.0.1")
                .setPort(proxy.adminPort())
                .setURI("/admin/records/stream"))
        .compose(r -> r.send())
        .onSuccess(
            resp -> {
              assertThat(resp.headers().get("content-type")).isEqualTo("text/event-stream");
              StringBuilder pending = new StringBuilder();
              resp.handler(
                  b -> {
                    pending.append(b.toString());
                    int end;
                    while ((end = pending.indexOf("\n\n")) >= 0) {
                      String event = pending.substring(0, end);
                      pending.delete(0, end + 2);
                      if (event.startsWith("data: ")) {
                        // The event's data line; an id line follows it.
                        String data = event.lines().findFirst().orElseThrow();
                        String id = new JsonObject(data.substring(6)).getString("trace_id");
                        if (!fed.add(id)) {
                          duplicates.add(id);
                        }
                      }
                    }
                  });
              subscribed.complete();
            });
    subscribed.future().await(10, TimeUnit.SECONDS);
    Awaitility.await().until(() -> proxy.records().feed().subscribers() == 1);

    HttpClient pooled =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(true), new PoolOptions().setHttp1MaxSize(32));
    int total = 1000;
    List<Future<String[]>> batch = new ArrayList<>();
    List<String[]> timings = new ArrayList<>();
    for (int i = 0; i < total; i++) {
      boolean stream = i % 2 == 0;
      String traceId = String.format("%032x", 0x5eed0000L + i);
      String body = exact(2, stream);
      batch.add(
          onClientContext(
              () ->
                  pooled
                      .request(
                          new RequestOptions()
                              .setMethod(HttpMethod.POST)
                              .setHost("127.0.0.1")
                              .setPort(proxy.port())
                              .setURI("/v1/chat/completions")
                              .putHeader("content-type", "application/json")
                              .putHeader("traceparent", "00-" + traceId + "-00f067aa0ba902b7-01"))
                      .compose(r -> r.send(body))
                      .compose(
                          r ->
                              r.body()
                                  .map(
                                      b ->
                                          new String[] {
                                            traceId,
                                            r.getHeader("server-timing"),
                                            Integer.toString(r.statusCode())
                                          }))));
      if (batch.size() == 100) {
        for (Future<String[]> f : batch) {
          timings.add(f.await(60, TimeUnit.SECONDS));
        }
        batch.clear();
      }
    }
    for (Future<String[]> f : batch) {
      timings.add(f.await(60, TimeUnit.SECONDS));
    }
    Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).until(() -> fed.size() == total);
    assertThat(duplicates).isEmpty();
    Set<String> expected = new HashSet<>();
    for (String[] t : timings) {
      assertThat(t[2]).isEqualTo("200");
      expected.add(t[0]);
    }
    assertThat(fed).isEqualTo(expected);

    // Server-Timing of whole responses equals the record's phases to the printed precision.
    int compared = 0;
    for (String[] t : timings) {
      JsonObject record = new JsonObject(admin("/admin/records/" + t[0]).text());
      JsonObject phases = record.getJsonObject("phases_ms");
      for (String part : t[1].split(", ")) {
        String name = part.substring(0, part.indexOf(';'));
        double dur = Double.parseDouble(part.substring(part.indexOf("dur=") + 4));
        assertThat(dur)
            .as(t[0] + " " + name)
            .isCloseTo(phases.getDouble(name), org.assertj.core.data.Offset.offset(0.0011));
        compared++;
      }
      if (!record.getBoolean("stream")) {
        assertThat(t[1]).contains("generation;dur=");
      } else {
        assertThat(t[1]).doesNotContain("generation").contains("queue;dur=");
      }
    }
    assertThat(compared).isGreaterThan(total * 5);
    assertThat(proxy.records().feed().dropped()).isZero();
  }

  @Test
  void statsGiveRollingQuantilesPerModelPoolAndPhase() throws Exception {
    startProxy(config(simulator().port(), 8, null));
    for (int i = 0; i < 20; i++) {
      call("/v1/chat/completions", exact(3, true));
    }
    awaitFinished(20);
    JsonObject stats = new JsonObject(admin("/admin/stats?window=1m").text());
    assertThat(stats.getLong("window_s")).isEqualTo(60);
    assertThat(stats.getInteger("record_schema")).isEqualTo(1);
    assertThat(stats.getString("sampling")).contains("ratio=1.0");
    var total =
        stats.getJsonArray("series").stream()
            .map(JsonObject.class::cast)
            .filter(s -> s.getString("phase").equals("total"))
            .findFirst()
            .orElseThrow();
    assertThat(total.getString("model")).isEqualTo("sim-llama");
    assertThat(total.getLong("count")).isEqualTo(20);
    assertThat(total.getDouble("p50_ms")).isPositive();
    assertThat(total.getDouble("p99_ms")).isGreaterThanOrEqualTo(total.getDouble("p50_ms"));
    assertThat(admin("/admin/stats?window=soon").status()).isEqualTo(400);
  }

  @Test
  void aQueueBudgetBreachShowsOnItsOwnPhaseOnly() throws Exception {
    Simulator sim = simulator();
    proxy =
        PhasemeterProxy.builder(vertx, config(sim.port(), 1, null))
            .openTelemetry(otel)
            .budgets(
                io.phasemeter.proxy.budget.Budgets.parse(
                    """
                    budgets:
                      - name: tight-queue
                        quantile: 0.95
                        window: 1m
                        limits_ms: {queue: 50, gateway: 1000, total: 60000}
                        max_error_rate: 0.5
                        min_join_coverage: 0.9
                    """,
                    "test-budgets.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
    // One slot, four requests that each hold it for 150 ms: three of them queue 150-450 ms.
    List<Future<Response>> all = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      all.add(
          callAsync(
              HttpMethod.POST,
              "/v1/chat/completions",
              exact(2, true),
              io.vertx.core.MultiMap.caseInsensitiveMultiMap().add("x-sim-ttft-ms", "150")));
    }
    for (Future<Response> f : all) {
      assertThat(f.await(20, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
    String metrics = admin("/metrics").text();
    Matcher queue =
        Pattern.compile("llm_budget_ratio\\{budget=\"tight-queue\",llm_phase=\"queue\"\\} (\\S+)")
            .matcher(metrics);
    Matcher gateway =
        Pattern.compile("llm_budget_ratio\\{budget=\"tight-queue\",llm_phase=\"gateway\"\\} (\\S+)")
            .matcher(metrics);
    assertThat(queue.find()).as(metrics).isTrue();
    assertThat(gateway.find()).isTrue();
    assertThat(Double.parseDouble(queue.group(1))).isGreaterThan(1.0);
    assertThat(Double.parseDouble(gateway.group(1))).isLessThan(1.0);
    JsonObject budget =
        new JsonObject(admin("/admin/stats").text()).getJsonArray("budgets").getJsonObject(0);
    assertThat(budget.getLong("requests")).isEqualTo(4);
    List<String> breached =
        budget.getJsonArray("phases").stream()
            .map(JsonObject.class::cast)
            .filter(p -> p.getBoolean("breached", false))
            .map(p -> p.getString("phase"))
            .toList();
    assertThat(breached).containsExactly("queue");
  }

  @Test
  void theRecordStoreKeepsAtMostItsConfiguredNumber() throws Exception {
    int backend = simulator().port();
    var cfg =
        io.phasemeter.proxy.config.ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams: [http://127.0.0.1:"
                + backend
                + "]\ntelemetry:\n  records: {max: 5, ttl: 10m}\n",
            "records.yaml");
    startProxy(cfg);
    for (int i = 0; i < 20; i++) {
      call("/v1/chat/completions", exact(1, false));
    }
    List<Finished> all = awaitFinished(20);
    assertThat(proxy.records().size()).isLessThanOrEqualTo(5);
    // The newest survive; the oldest are gone (404), and the feed had published all 20.
    Finished newest = all.get(all.size() - 1);
    assertThat(admin("/admin/records/" + newest.traceId()).status()).isEqualTo(200);
    assertThat(admin("/admin/records/" + all.get(0).traceId()).status()).isEqualTo(404);
  }

  @Test
  void adminTokenGuardsEverythingButHealth() throws Exception {
    var cfg = config(simulator().port(), 8, null);
    cfg =
        new io.phasemeter.proxy.config.ProxyConfig(
            cfg.listen(),
            new io.phasemeter.proxy.config.ProxyConfig.Admin("127.0.0.1", 0, "s3cret"),
            cfg.limits(),
            cfg.auth(),
            cfg.pools(),
            cfg.telemetry(),
            cfg.budgets(),
            cfg.drain());
    startProxy(cfg);
    assertThat(admin("/health/live").status()).isEqualTo(200);
    assertThat(admin("/health/ready").status()).isEqualTo(200);
    assertThat(admin("/metrics").status()).isEqualTo(401);
    assertThat(admin("/metrics", "authorization", "Bearer wrong").status()).isEqualTo(401);
    assertThat(admin("/metrics", "authorization", "Bearer s3cret").status()).isEqualTo(200);
    assertThat(admin("/admin/records/" + "0".repeat(32), "authorization", "Bearer s3cret").status())
        .isEqualTo(404);
    assertThat(admin("/admin/records/xyz", "authorization", "Bearer s3cret").status())
        .isEqualTo(400);
  }
}
