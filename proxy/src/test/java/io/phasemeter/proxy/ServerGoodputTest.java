package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Server-side goodput (issue 37) through real sockets, the simulator upstream: which budget gives a
 * request its objectives, the x-slo-* headers overriding them per request, which endings count, the
 * verdict on the record, the span and {@code llm_slo_requests_total}, and the attainment in {@code
 * /admin/stats} equal to a recount from the records.
 *
 * <p>The truth is injected: the simulator holds the first token for {@code x-sim-ttft-ms}, so a
 * request's server TTFT is at least that (an event loop can be late, never early); objectives sit
 * far on either side of it.
 */
class ServerGoodputTest extends ProxyTestBase {
  private static final String TEAM = "sk-team";
  private static final String LOCKED = "sk-locked";
  private static final String SLOW = "sk-slow";

  private static final String BUDGETS =
      """
      budgets:
        - name: never-served
          model: gpt-none
          quantile: 0.95
          window: 5m
          slo_ms: {server_ttft: 0.001}
          max_error_rate: 1
          min_join_coverage: 0
        - name: team-a-only
          tenant: team-a
          quantile: 0.95
          window: 5m
          slo_ms: {server_ttft: 0.001}
          max_error_rate: 1
          min_join_coverage: 0
        - name: chat
          model: sim-llama
          tenant: other
          quantile: 0.95
          window: 5m
          limits_ms: {total: 60000}
          slo_ms: {client_ttft: 0.001, server_ttft: 1000, tpot: 1000}
          min_attainment: 0.9
          max_error_rate: 1
          min_join_coverage: 0
        - name: chat-late
          model: sim-llama
          quantile: 0.95
          window: 5m
          slo_ms: {server_ttft: 0.001}
          max_error_rate: 1
          min_join_coverage: 0
        - name: mini-client-only
          model: sim-mini
          quantile: 0.95
          window: 5m
          slo_ms: {client_ttft: 100}
          max_error_rate: 1
          min_join_coverage: 0
      """;

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(8)
                    .withModels(List.of("sim-llama", "sim-mini"))
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n"
            + key("team", TEAM, "")
            + key("locked", LOCKED, ", slo_override: false")
            + key("slow", SLOW, ", rpm: 1")
            + "...\n");
    String yaml =
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama, sim-mini]\n"
            + "    upstreams: [http://127.0.0.1:"
            + sim.port()
            + "]\n"
            + "    health: {path: null}\n"
            + "    slots: 4\n"
            // team-a is allowlisted so that its budget is valid; no request here is team-a's.
            + "tenants: {names: [team-a]}\n"
            + "auth: {enabled: true, keys_file: "
            + keys
            + "}\n";
    ProxyConfig config = ConfigLoader.parse(yaml, "test.yaml");
    proxy =
        PhasemeterProxy.builder(vertx, config)
            .openTelemetry(otel)
            .spanDeferral(EXPORT_EVERY_REQUEST)
            .budgets(Budgets.parse(BUDGETS, "budgets.yaml"))
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);
    // One request first, so that class loading and the JIT are not in the verdicts that follow
    // (it is judged and counted like any other).
    assertThat(send(TEAM, body("sim-llama", true)).status()).isEqualTo(200);
    awaitFinished(1);
  }

  private static String key(String name, String key, String extra) {
    return "  - {name: " + name + ", sha256: \"" + HashKeyMain.hash(key) + "\"" + extra + "}\n";
  }

  private static String body(String model, boolean stream) {
    return "{\"model\":\""
        + model
        + "\",\"stream\":"
        + stream
        + ",\"max_tokens\":4,\"min_tokens\":4,\"ignore_eos\":true,"
        + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  }

  private Response send(String key, String body, String... headers) throws Exception {
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer " + key);
    for (int i = 0; i + 1 < headers.length; i += 2) {
      h.add(headers[i], headers[i + 1]);
    }
    return call(HttpMethod.POST, "/v1/chat/completions", body, h);
  }

  /** The record of the {@code i}-th request to finish. */
  private JsonObject record(int i) throws Exception {
    String traceId = awaitFinished(i + 1).get(i).traceId();
    Response r = admin("/admin/records/" + traceId);
    assertThat(r.status()).as("record of request %d", i).isEqualTo(200);
    return new JsonObject(r.text());
  }

  private static void assertSlo(
      JsonObject record, String budget, String result, String objective, String... overridden) {
    JsonObject slo = record.getJsonObject("slo");
    assertThat(slo).as("slo of %s", record).isNotNull();
    assertThat(slo.getString("budget")).as("budget of %s", record).isEqualTo(budget);
    assertThat(slo.getString("result")).as("result of %s", record).isEqualTo(result);
    assertThat(slo.getString("objective")).as("objective of %s", record).isEqualTo(objective);
    assertThat(slo.getJsonArray("overridden").getList()).containsExactly((Object[]) overridden);
  }

  @Test
  void headersOverrideTheBudgetPerRequestAndTheVerdictIsOnRecordSpanAndMetric() throws Exception {
    int n = 1;
    // The budget chat: the first that matches sim-llama and tenant other (never-served names
    // another model, team-a-only another tenant; chat-late, which every request would miss, comes
    // after); client_ttft is the load client's, so server_ttft 300 ms and tpot 1 s are judged.
    assertThat(send(TEAM, body("sim-llama", true)).status()).isEqualTo(200);
    JsonObject met = record(n++);
    assertSlo(met, "chat", "met", "none");
    assertThat(met.getJsonObject("slo").getJsonObject("objectives_ms").getMap())
        .containsExactly(Map.entry("server_ttft", 1000.0), Map.entry("tpot", 1000.0));
    assertThat(met.getJsonObject("slo").getJsonArray("missed")).isEmpty();

    // The injected truth: a first token held 1,100 ms misses 1,000 ms.
    assertThat(send(TEAM, body("sim-llama", true), "x-sim-ttft-ms", "1100").status())
        .isEqualTo(200);
    JsonObject slow = record(n++);
    assertSlo(slow, "chat", "missed", "server_ttft");
    assertThat(slow.getDouble("server_ttft_ms")).isGreaterThanOrEqualTo(1100.0);
    assertThat(slow.getJsonObject("slo").getJsonArray("missed").getList())
        .containsExactly("server_ttft");

    // A loose header meets where the budget misses...
    assertThat(
            send(TEAM, body("sim-llama", true), "x-sim-ttft-ms", "1100", "x-slo-ttft-ms", "30000")
                .status())
        .isEqualTo(200);
    JsonObject loose = record(n++);
    assertSlo(loose, "chat", "met", "none", "server_ttft");
    assertThat(loose.getJsonObject("slo").getJsonObject("objectives_ms").getDouble("server_ttft"))
        .isEqualTo(30000.0);

    // ...a tight one misses where the budget meets, and the held truth sits between the two.
    assertThat(send(TEAM, body("sim-llama", true), "x-slo-ttft-ms", "0.001").status())
        .isEqualTo(200);
    assertSlo(record(n++), "chat", "missed", "server_ttft", "server_ttft");
    assertThat(
            send(TEAM, body("sim-llama", true), "x-sim-ttft-ms", "400", "x-slo-ttft-ms", "250.5")
                .status())
        .isEqualTo(200);
    assertSlo(record(n++), "chat", "missed", "server_ttft", "server_ttft");

    // tpot and e2e: a header-set tpot keeps its place, an added server_root comes after.
    assertThat(send(TEAM, body("sim-llama", true), "x-slo-tpot-ms", "0.001").status())
        .isEqualTo(200);
    assertSlo(record(n++), "chat", "missed", "tpot", "tpot");
    assertThat(send(TEAM, body("sim-llama", true), "x-slo-e2e-ms", "0.001").status())
        .isEqualTo(200);
    JsonObject e2e = record(n++);
    assertSlo(e2e, "chat", "missed", "server_root", "server_root");
    assertThat(e2e.getJsonObject("slo").getJsonObject("objectives_ms").fieldNames())
        .containsExactly("server_ttft", "tpot", "server_root");

    // A response not streamed has no first token and no gaps between tokens: server_ttft and tpot
    // do not apply (as the load client refuses them for --no-stream), so chat's budget leaves it
    // nothing to judge: not counted, rather than missed on figures it could never have...
    assertThat(send(TEAM, body("sim-llama", false)).status()).isEqualTo(200);
    assertThat(record(n++).getValue("slo")).isNull();
    // ...while its own x-slo-e2e-ms applies; its x-slo-ttft-ms does not.
    assertThat(
            send(TEAM, body("sim-llama", false), "x-slo-e2e-ms", "0.001", "x-slo-ttft-ms", "1")
                .status())
        .isEqualTo(200);
    JsonObject whole = record(n++);
    assertSlo(whole, null, "missed", "server_root", "server_root");
    assertThat(whole.getJsonObject("slo").getJsonObject("objectives_ms").fieldNames())
        .containsExactly("server_root");

    // sim-mini's budget gives only a client-side objective: nothing for the proxy to judge...
    assertThat(send(TEAM, body("sim-mini", true)).status()).isEqualTo(200);
    assertThat(record(n++).getValue("slo")).isNull();
    // ...unless the request brings its own: then only headers gave objectives (budget none).
    assertThat(send(TEAM, body("sim-mini", true), "x-slo-ttft-ms", "30000").status())
        .isEqualTo(200);
    assertSlo(record(n++), null, "met", "none", "server_ttft");

    // The verdict is on the root span, only where the request was counted.
    List<SpanData> roots = awaitRoots(n);
    assertThat(root(roots, met).getAttributes().get(SpanAttributes.SLO_RESULT)).isEqualTo("met");
    assertThat(root(roots, met).getAttributes().get(SpanAttributes.SLO_OBJECTIVE))
        .isEqualTo("none");
    assertThat(root(roots, slow).getAttributes().get(SpanAttributes.SLO_RESULT))
        .isEqualTo("missed");
    assertThat(root(roots, slow).getAttributes().get(SpanAttributes.SLO_OBJECTIVE))
        .isEqualTo("server_ttft");
    assertThat(root(roots, record(8)).getAttributes().get(SpanAttributes.SLO_RESULT)).isNull();

    assertTheCountsEqualARecountFromTheRecords(n);
  }

  @Test
  void failuresAreErrorsAndClientErrorsCancelsAndTheKeysOwnRateLimitAreNotCounted()
      throws Exception {
    int n = 1;
    assertThat(send(TEAM, "{not json").status()).isEqualTo(400);
    assertThat(record(n++).getValue("slo")).isNull();
    assertThat(send(SLOW, body("sim-llama", true)).status()).isEqualTo(200);
    assertSlo(record(n++), "chat", "met", "none");
    Response limited = send(SLOW, body("sim-llama", true));
    assertThat(limited.status()).isEqualTo(429);
    assertThat(record(n++).getValue("slo")).as("the key's own rate limit").isNull();

    // The client goes away while the first token is held.
    try (Socket s = new Socket("127.0.0.1", proxy.port())) {
      String b = body("sim-llama", true);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  + "authorization: Bearer "
                  + TEAM
                  + "\r\nx-sim-ttft-ms: 5000\r\ncontent-length: "
                  + b.length()
                  + "\r\n\r\n"
                  + b)
              .getBytes(StandardCharsets.UTF_8));
      out.flush();
      Awaitility.await().until(() -> proxy.slotPools().get("default").inUse() == 1);
    }
    JsonObject cancelled = record(n++);
    assertThat(cancelled.getString("outcome")).isEqualTo("cancelled");
    assertThat(cancelled.getValue("slo")).isNull();

    // The engine fails: counted, missed, objective error, whatever the objectives.
    Response failed =
        send(TEAM, body("sim-llama", true), "x-sim-fault", "error", "x-slo-tpot-ms", "5000");
    assertThat(failed.status()).isEqualTo(502);
    JsonObject error = record(n++);
    assertThat(error.getString("outcome")).isEqualTo("upstream_error");
    assertSlo(error, "chat", "missed", "error", "tpot");
    assertThat(error.getJsonObject("slo").getJsonArray("missed")).isEmpty();

    assertTheCountsEqualARecountFromTheRecords(n);
  }

  @Test
  void badHeadersGet400NamingTheHeaderAndADeniedKey403() throws Exception {
    String[][] bad = {
      {"x-slo-ttft-ms", "fast"},
      {"x-slo-ttft-ms", "-5"},
      {"x-slo-tpot-ms", "0"},
      {"x-slo-tpot-ms", "0.0000001"},
      {"x-slo-e2e-ms", "86400000.5"},
      {"x-slo-e2e-ms", "1e3"},
      {"x-slo-ttft-ms", "250ms"},
      {"x-slo-ttft-ms", "1.0000000000000001"},
      {"x-slo-ttft-ms", ""},
    };
    for (String[] h : bad) {
      Response r = send(TEAM, body("sim-llama", true), h[0], h[1]);
      assertThat(r.status()).as("%s: %s", h[0], h[1]).isEqualTo(400);
      JsonObject e = new JsonObject(r.text()).getJsonObject("error");
      assertThat(e.getString("code")).isEqualTo("invalid_slo_header");
      assertThat(e.getString("type")).isEqualTo("invalid_request_error");
      assertThat(e.getString("param")).isEqualTo(h[0]);
      assertThat(e.getString("message")).contains(h[0]);
    }
    Response twice =
        send(TEAM, body("sim-llama", true), "x-slo-tpot-ms", "50", "x-slo-tpot-ms", "60");
    assertThat(twice.status()).isEqualTo(400);
    assertThat(new JsonObject(twice.text()).getJsonObject("error").getString("message"))
        .isEqualTo("The x-slo-tpot-ms header is given more than once; give it once.");
    // At the bounds: a day, and 16 characters.
    assertThat(send(TEAM, body("sim-llama", true), "x-slo-e2e-ms", "86400000").status())
        .isEqualTo(200);
    assertThat(send(TEAM, body("sim-llama", true), "x-slo-ttft-ms", "1.00000000000000").status())
        .isEqualTo(200);

    Response denied = send(LOCKED, body("sim-llama", true), "x-slo-e2e-ms", "1000");
    assertThat(denied.status()).isEqualTo(403);
    JsonObject e = new JsonObject(denied.text()).getJsonObject("error");
    assertThat(e.getString("code")).isEqualTo("slo_override_denied");
    assertThat(e.getString("type")).isEqualTo("permission_error");
    assertThat(e.getString("param")).isEqualTo("x-slo-e2e-ms");
    // Without the headers the denied key is served, judged by its budget.
    assertThat(send(LOCKED, body("sim-llama", true)).status()).isEqualTo(200);
    List<Finished> all = awaitFinished(1 + bad.length + 5);
    assertThat(all).extracting(Finished::status).filteredOn(s -> s >= 400).hasSize(bad.length + 2);
    assertThat(all.stream().filter(f -> f.status() >= 400))
        .allSatisfy(f -> assertThat(f.outcome()).isEqualTo("client_error"));
  }

  private static SpanData root(List<SpanData> spans, JsonObject record) {
    return spans.stream()
        .filter(s -> s.getTraceId().equals(record.getString("trace_id")))
        .filter(s -> s.getSpanId().equals(record.getString("span_id")))
        .findFirst()
        .orElseThrow();
  }

  private static final Pattern SLO_LINE =
      Pattern.compile("^llm_slo_requests_total\\{([^}]*)\\} ([0-9.eE+]+)$", Pattern.MULTILINE);
  private static final Pattern LABEL = Pattern.compile("(\\w+)=\"([^\"]*)\"");

  /**
   * Every request's record is read back and recounted: per budget, judged, met and first missed
   * must be what {@code /admin/stats} shows, and per label set what {@code /metrics} counts.
   */
  private void assertTheCountsEqualARecountFromTheRecords(int requests) throws Exception {
    List<Finished> all = awaitFinished(requests);
    assertThat(all).hasSize(requests);
    Map<String, long[]> byBudget = new TreeMap<>();
    Map<String, Map<String, Long>> firstMissed = new HashMap<>();
    Map<String, Long> byLabels = new TreeMap<>();
    for (Finished f : all) {
      JsonObject r = new JsonObject(admin("/admin/records/" + f.traceId()).text());
      JsonObject slo = r.getJsonObject("slo");
      if (slo == null) {
        continue;
      }
      String budget = slo.getString("budget") == null ? "none" : slo.getString("budget");
      boolean met = slo.getString("result").equals("met");
      byLabels.merge(
          "budget="
              + budget
              + ",llm_pool="
              + r.getString("pool")
              + ",llm_tenant=other,objective="
              + slo.getString("objective")
              + ",result="
              + slo.getString("result"),
          1L,
          Long::sum);
      if (slo.getString("budget") == null) {
        continue;
      }
      long[] c = byBudget.computeIfAbsent(budget, b -> new long[2]);
      c[0]++;
      if (met) {
        c[1]++;
      } else {
        firstMissed
            .computeIfAbsent(budget, b -> new TreeMap<>())
            .merge(slo.getString("objective"), 1L, Long::sum);
      }
    }
    JsonArray stats = new JsonObject(admin("/admin/stats").text()).getJsonArray("slo");
    Map<String, long[]> live = new TreeMap<>();
    for (int i = 0; i < stats.size(); i++) {
      JsonObject b = stats.getJsonObject(i);
      for (Object o : b.getJsonArray("tenants")) {
        JsonObject t = (JsonObject) o;
        assertThat(t.getString("tenant")).isEqualTo("other");
        long judged = t.getLong("judged");
        long met = t.getLong("met");
        live.put(b.getString("budget"), new long[] {judged, met});
        assertThat(t.getDouble("attainment")).isEqualTo((double) met / judged);
        Map<String, Long> shown = new TreeMap<>();
        t.getJsonObject("first_missed")
            .forEach(e -> shown.put(e.getKey(), ((Number) e.getValue()).longValue()));
        assertThat(shown).isEqualTo(firstMissed.getOrDefault(b.getString("budget"), Map.of()));
        if (b.getString("budget").equals("chat")) {
          assertThat(b.getDouble("min_attainment")).isEqualTo(0.9);
          assertThat(t.getBoolean("attainment_breached")).isEqualTo((double) met / judged < 0.9);
        }
      }
    }
    assertThat(live).hasSameSizeAs(byBudget);
    byBudget.forEach((b, c) -> assertThat(live.get(b)).as("budget %s", b).containsExactly(c));

    Map<String, Long> scraped = new TreeMap<>();
    Matcher m = SLO_LINE.matcher(admin("/metrics").text());
    while (m.find()) {
      List<String> labels = new ArrayList<>();
      Matcher l = LABEL.matcher(m.group(1));
      while (l.find()) {
        labels.add(l.group(1) + "=" + l.group(2));
      }
      scraped.put(
          String.join(",", labels.stream().sorted().toList()),
          (long) Double.parseDouble(m.group(2)));
    }
    assertThat(scraped).isEqualTo(byLabels);
  }
}
