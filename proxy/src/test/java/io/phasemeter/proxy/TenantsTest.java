package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Tenants through the whole proxy (docs/design.md, "Tenants"): where the tenant comes from (an
 * allowlisted key's name, else an allowlisted header value, else {@code other}), that nothing a
 * client sends adds an {@code llm_tenant} value, that the record, the root span and the metrics
 * carry the same tenant, the phase histograms' label only on request, a keys reload past the bound
 * refused, and a tenant's budget judged on its own requests. The proxy runs on a hand-advanced
 * clock, so a "slow" request is slow by exactly what the backend adds.
 */
class TenantsTest extends ProxyTestBase {
  private static final String TEAM_A = "pm-team-a-key";
  private static final String OPS = "pm-ops-key";
  private static final Pattern TENANT_LABEL = Pattern.compile("llm_tenant=\"([^\"]*)\"");
  private static final AttributeKey<String> LLM_TENANT = AttributeKey.stringKey("llm.tenant");

  @TempDir Path dir;
  private Path keysFile;
  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final NanoClock clock =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return now.get();
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return 1_700_000_000_000_000_000L + nanoTime;
        }
      };
  private int backend;
  private int traces;

  @BeforeEach
  void backend() throws Exception {
    keysFile = dir.resolve("keys.yaml");
    // Answers like vLLM; a request whose prompt says "slow" takes a second of the proxy's clock.
    backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          if (b.toString().contains("slow")) {
                            now.addAndGet(Duration.ofSeconds(1).toNanos());
                          }
                          if (b.toString().contains("\"stream\":true")) {
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(VllmScript.stream(false));
                          } else {
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION);
                          }
                        }));
  }

  private void start(String topLevelYaml, Budgets budgets) throws Exception {
    start(topLevelYaml, budgets, EXPORT_EVERY_REQUEST);
  }

  private void start(
      String topLevelYaml, Budgets budgets, io.phasemeter.proxy.pipeline.SpanDeferral deferral)
      throws Exception {
    ProxyConfig cfg = ConfigLoader.parse(yaml(backend, "    slots: 8\n" + topLevelYaml), "t.yaml");
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(otel)
            .spanDeferral(deferral)
            .clock(clock)
            .budgets(budgets)
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  private void writeKeys(String... entries) throws Exception {
    Path tmp = dir.resolve("keys.tmp");
    Files.writeString(tmp, "keys:\n" + String.join("", entries) + "...\n");
    Files.move(tmp, keysFile, StandardCopyOption.REPLACE_EXISTING);
  }

  private static String key(String name, String key, boolean tenantMetrics) {
    return "  - {name: "
        + name
        + ", sha256: \""
        + HashKeyMain.hash(key)
        + "\", tenant_metrics: "
        + tenantMetrics
        + "}\n";
  }

  private String auth() {
    return "auth: {enabled: true, keys_file: " + keysFile + ", reload_interval: 50ms}\n";
  }

  /** A trace id of our own (traceparent), to find the request's record and root span by. */
  private String nextTraceId() {
    return String.format("%032x", ++traces);
  }

  private Future<Response> sendAsync(String traceId, String key, String tenant, String body) {
    MultiMap h = MultiMap.caseInsensitiveMultiMap();
    h.add("traceparent", "00-" + traceId + "-00000000000000a1-01");
    if (key != null) {
      h.add("authorization", "Bearer " + key);
    }
    if (tenant != null) {
      h.add("x-tenant-id", tenant);
    }
    return callAsync(HttpMethod.POST, "/v1/chat/completions", body, h);
  }

  private Response send(String traceId, String key, String tenant) throws Exception {
    return sendAsync(traceId, key, tenant, chat("hi", true)).await(30, TimeUnit.SECONDS);
  }

  private JsonObject record(String traceId) {
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> proxy.records().get(traceId) != null);
    return new JsonObject(proxy.records().get(traceId));
  }

  private String rootTenant(List<SpanData> spans, String traceId) {
    return spans.stream()
        .filter(s -> s.getTraceId().equals(traceId) && s.getParentSpanContext().isRemote())
        .findFirst()
        .orElseThrow()
        .getAttributes()
        .get(LLM_TENANT);
  }

  /** Every value of {@code llm_tenant} on lines of {@code /metrics} that start with a prefix. */
  private static Set<String> tenantValues(String metrics, String prefix) {
    Set<String> out = new TreeSet<>();
    for (String line : metrics.split("\n")) {
      if (line.startsWith(prefix)) {
        Matcher m = TENANT_LABEL.matcher(line);
        while (m.find()) {
          out.add(m.group(1));
        }
      }
    }
    return out;
  }

  /** The sum of the {@code _count} series of request durations, by tenant. */
  private static Map<String, Long> requestsByTenant(String metrics) {
    Map<String, Long> out = new HashMap<>();
    for (String line : metrics.split("\n")) {
      if (line.startsWith("gen_ai_server_request_duration_seconds_count{")) {
        Matcher m = TENANT_LABEL.matcher(line);
        assertThat(m.find()).as(line).isTrue();
        long n = (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        out.merge(m.group(1), n, Long::sum);
      }
    }
    return out;
  }

  @Test
  void anAllowlistedKeyOrHeaderNamesTheTenantAndTheRecordSpanAndMetricsAgree() throws Exception {
    writeKeys(key("team-a", TEAM_A, true), key("ops", OPS, false));
    start(auth() + "tenants: {header: x-tenant-id, names: [team-b]}\n", new Budgets(List.of()));
    Map<String, String> expected = new java.util.LinkedHashMap<>();
    Map<String, Integer> status = new HashMap<>();
    // {key, header, tenant, status}
    String[][] cases = {
      {TEAM_A, null, "team-a", "200"},
      {TEAM_A, "team-b", "team-a", "200"}, // an allowlisted key's name wins
      {OPS, "team-b", "team-b", "200"}, // a key that names no tenant: the header's
      {OPS, "team-c", "other", "200"},
      {OPS, null, "other", "200"},
      {null, "team-b", "team-b", "401"}, // refused before a key is known: the header's
      {"pm-wrong", "TEAM-B", "other", "401"}, // exactly an allowlisted value, or other
      {null, "other", "other", "401"},
    };
    for (String[] c : cases) {
      String traceId = nextTraceId();
      Response r = send(traceId, c[0], c[1]);
      assertThat(r.status()).as("%s", (Object) c).isEqualTo(Integer.parseInt(c[3]));
      expected.put(traceId, c[2]);
    }
    List<SpanData> spans = awaitRoots(cases.length);
    for (Map.Entry<String, String> e : expected.entrySet()) {
      JsonObject rec = record(e.getKey());
      assertThat(rec.getString("tenant")).as(rec.encode()).isEqualTo(e.getValue());
      assertThat(rootTenant(spans, e.getKey())).isEqualTo(e.getValue());
    }
    assertThat(record(expected.keySet().iterator().next()).getString("key_name"))
        .isEqualTo("team-a");
    String metrics = admin("/metrics").text();
    assertThat(requestsByTenant(metrics))
        .containsExactlyInAnyOrderEntriesOf(Map.of("team-a", 2L, "team-b", 2L, "other", 4L));
    assertThat(metrics)
        .contains(
            "gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"chat\","
                + "gen_ai_request_model=\"other\",llm_pool=\"none\",llm_streaming=\"false\","
                + "llm_tenant=\"team-b\",outcome=\"client_error\"} 1");
    assertThat(tenantValues(metrics, "gen_ai_server_time_to_first_token_seconds_count"))
        .containsExactlyInAnyOrder("team-a", "team-b", "other");
    assertThat(tenantValues(metrics, "llm_tokens_total"))
        .containsExactlyInAnyOrder("team-a", "team-b", "other");
    assertThat(tenantValues(metrics, "llm_phase_duration_seconds"))
        .as("no tenant on the phase histogram by default")
        .isEmpty();
  }

  @Test
  void aThousandRandomTenantHeadersAddNoLabelValueBeyondTheAllowlistAndOther() throws Exception {
    // No trace exported: the spans are not what this test counts.
    start(
        "tenants: {header: x-tenant-id, names: [team-a, team-b]}\n",
        new Budgets(List.of()),
        io.phasemeter.proxy.telemetry.PresetIdGenerator.deferral((failed, nanos, id) -> false));
    Random random = new Random(37);
    String alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.*,;:/ ";
    List<String> nearMisses =
        List.of("TEAM-A", "team-a,team-b", "team-a;", "*", "other", "team-", "team-ab", "");
    int total = 1000;
    for (int sent = 0; sent < total; ) {
      List<Future<Response>> batch = new ArrayList<>();
      for (int i = 0; i < 100; i++, sent++) {
        String value;
        if (sent % 50 == 0) {
          value = sent % 100 == 0 ? "team-a" : "team-b";
        } else if (sent % 7 == 0) {
          value = nearMisses.get(random.nextInt(nearMisses.size()));
        } else {
          StringBuilder sb = new StringBuilder();
          for (int k = 1 + random.nextInt(24); k > 0; k--) {
            sb.append(alphabet.charAt(random.nextInt(alphabet.length())));
          }
          value = sb.toString();
        }
        batch.add(sendAsync(nextTraceId(), null, value, chat("hi", sent % 2 == 0)));
      }
      for (Future<Response> f : batch) {
        assertThat(f.await(30, TimeUnit.SECONDS).status()).isEqualTo(200);
      }
    }
    awaitFinished(total);

    String metrics = admin("/metrics").text();
    assertThat(tenantValues(metrics, ""))
        .as("every llm_tenant value on /metrics")
        .containsExactlyInAnyOrder("team-a", "team-b", "other");
    assertThat(requestsByTenant(metrics))
        .containsExactlyInAnyOrderEntriesOf(Map.of("team-a", 10L, "team-b", 10L, "other", 980L));
    assertThat(tenantValues(metrics, "llm_inter_token_latency_seconds")).isEmpty();
  }

  @Test
  void phaseHistogramsTrueLabelThePhaseHistogramAndNeverTheInterTokenLatency() throws Exception {
    start(
        "tenants: {header: x-tenant-id, names: [team-a], phase_histograms: true}\n",
        new Budgets(List.of()));
    sendAsync(nextTraceId(), null, "team-a", chat("hi", true)).await(30, TimeUnit.SECONDS);
    sendAsync(nextTraceId(), null, "team-z", chat("hi", true)).await(30, TimeUnit.SECONDS);
    awaitFinished(2);

    String metrics = admin("/metrics").text();
    assertThat(tenantValues(metrics, "llm_phase_duration_seconds_count"))
        .containsExactlyInAnyOrder("team-a", "other");
    for (String line : metrics.split("\n")) {
      if (line.startsWith("llm_phase_duration_seconds")) {
        assertThat(line).as("one set of label keys per metric").contains("llm_tenant=\"");
      }
    }
    assertThat(metrics).contains("llm_inter_token_latency_seconds_count{");
    assertThat(tenantValues(metrics, "llm_inter_token_latency_seconds")).isEmpty();
  }

  @Test
  void aKeysReloadPastTheBoundIsRefusedAndTheOldKeysAndTenantsStay() throws Exception {
    StringBuilder names = new StringBuilder();
    for (int i = 0; i < 63; i++) {
      names.append(i == 0 ? "" : ", ").append("n").append(i);
    }
    writeKeys(key("team-a", TEAM_A, true));
    start(auth() + "tenants: {names: [" + names + "]}\n", new Budgets(List.of()));
    assertThat(send(nextTraceId(), TEAM_A, null).status()).isEqualTo(200);

    writeKeys(key("team-a", TEAM_A, true), key("ops", OPS, true));
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics").text().contains("llm_auth_reloads_total{result=\"failed\"} 1.0"));

    assertThat(send(nextTraceId(), OPS, null).status()).as("the new key is not in").isEqualTo(401);
    String traceId = nextTraceId();
    assertThat(send(traceId, TEAM_A, null).status()).isEqualTo(200);
    assertThat(record(traceId).getString("tenant")).isEqualTo("team-a");
    assertThat(admin("/metrics").text()).contains("llm_auth_keys 1.0");
  }

  @Test
  void aTenantsBudgetIsJudgedLiveOnItsOwnTenantsRequestsOnly() throws Exception {
    String common =
        "quantile: 0.95, window: 1m, limits_ms: {total: 500, ttft: 500}, max_error_rate: 0.5,"
            + " min_join_coverage: 0";
    Budgets budgets =
        Budgets.parse(
            "budgets:\n"
                + "  - {name: fast-team, tenant: team-a, "
                + common
                + "}\n"
                + "  - {name: slow-team, tenant: team-b, "
                + common
                + "}\n"
                + "  - {name: everyone, "
                + common
                + "}\n",
            "b.yaml");
    start("tenants: {header: x-tenant-id, names: [team-a, team-b]}\n", budgets);
    for (int i = 0; i < 4; i++) {
      assertThat(
              sendAsync(nextTraceId(), null, "team-a", chat("hi", false))
                  .await(30, TimeUnit.SECONDS)
                  .status())
          .isEqualTo(200);
      // A second of the proxy's clock passes while the upstream answers.
      assertThat(
              sendAsync(nextTraceId(), null, "team-b", chat("slow", false))
                  .await(30, TimeUnit.SECONDS)
                  .status())
          .isEqualTo(200);
    }
    awaitFinished(8);

    JsonArray status = new JsonObject(admin("/admin/stats").text()).getJsonArray("budgets");
    Map<String, JsonObject> byName = new HashMap<>();
    status.forEach(o -> byName.put(((JsonObject) o).getString("name"), (JsonObject) o));
    assertThat(byName.get("fast-team").getString("tenant")).isEqualTo("team-a");
    assertThat(byName.get("fast-team").getLong("requests")).isEqualTo(4);
    assertThat(byName.get("slow-team").getLong("requests")).isEqualTo(4);
    assertThat(byName.get("everyone").getString("tenant")).isEqualTo("*");
    assertThat(byName.get("everyone").getLong("requests")).isEqualTo(8);
    assertThat(breached(byName.get("fast-team"), "total")).isFalse();
    assertThat(breached(byName.get("slow-team"), "total")).isTrue();
    assertThat(breached(byName.get("everyone"), "total")).isTrue();
    String metrics = admin("/metrics").text();
    assertThat(ratio(metrics, "fast-team", "total")).isLessThanOrEqualTo(1.0);
    assertThat(ratio(metrics, "slow-team", "total")).isGreaterThan(1.0);
  }

  private static boolean breached(JsonObject budget, String phase) {
    for (Object o : budget.getJsonArray("phases")) {
      JsonObject p = (JsonObject) o;
      if (p.getString("phase").equals(phase)) {
        return p.getBoolean("breached");
      }
    }
    throw new AssertionError("no phase " + phase + " in " + budget.encode());
  }

  private static double ratio(String metrics, String budget, String phase) {
    String prefix = "llm_budget_ratio{budget=\"" + budget + "\",llm_phase=\"" + phase + "\"} ";
    for (String line : metrics.split("\n")) {
      if (line.startsWith(prefix)) {
        return Double.parseDouble(line.substring(prefix.length()));
      }
    }
    throw new AssertionError("no " + prefix);
  }
}
