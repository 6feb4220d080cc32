package io.phasemeter.proxy.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.proxy.ProxyTestBase;
import io.phasemeter.proxy.budget.Budget;
import io.phasemeter.proxy.budget.Budgets;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * config/k6/phase-envelope.js runs under real k6 in the accuracy module's K6Test, where k6 is built
 * (tools/realworld.sh). Its arithmetic lives in config/k6/lib/envelope.js, which has no k6 import,
 * so that it is also checked without k6: this test runs that file under Node.js on responses
 * recorded from a real proxy: the Server-Timing it parses must give the phases of the proxy's own
 * record, the envelope must be what the client waited beyond them, the thresholds must be the
 * budgets of config/budgets.yaml as the proxy reads them, and traceparents must be valid and
 * unique. The script itself is checked for the shape the README promises.
 */
class K6EnvelopeTest extends ProxyTestBase {
  static final Path K6 = Path.of("../config/k6");
  static final Path BUDGETS = Path.of("../config/budgets.yaml");
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path tmp;

  private static int upstreamDelayMs(String traceparent) {
    // The upstream sees the proxy's child traceparent: same trace id, the proxy's span id.
    return traceparent.length() >= 35 && traceparent.substring(3, 35).endsWith("2") ? 300 : 5;
  }

  @Test
  void theScriptsArithmeticUnderNodeMatchesTheProxysRecords() throws Exception {
    ExternalTool.NODE.require();
    int backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            vertx.setTimer(
                                upstreamDelayMs(String.valueOf(req.getHeader("traceparent"))),
                                t ->
                                    req.response()
                                        .putHeader("content-type", "application/json")
                                        .end(
                                            "{\"id\":\"c\",\"object\":\"chat.completion\","
                                                + "\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                                + "\"assistant\",\"content\":\"hi\"},"
                                                + "\"finish_reason\":\"stop\"}],\"usage\":"
                                                + "{\"prompt_tokens\":3,\"completion_tokens\":1,"
                                                + "\"total_tokens\":4}}"))));
    startProxy(config(backend, 4, null));
    assertThat(call("/v1/chat/completions", chat("warm-up", false)).status()).isEqualTo(200);

    // Record three exchanges as k6 would see them: status, Server-Timing, the whole duration.
    String generator = "5eed5eed5eed5eed";
    ObjectNode input = JSON.createObjectNode();
    ArrayNode responses = input.putArray("responses");
    List<String> traceIds = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      String tp = String.format("00-%s%016x-%016x-01", generator, i, i + 1);
      MultiMap headers = MultiMap.caseInsensitiveMultiMap().add("traceparent", tp);
      long start = System.nanoTime();
      Response r = call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), headers);
      double durationMs = (System.nanoTime() - start) / 1e6;
      assertThat(r.status()).isEqualTo(200);
      ObjectNode o = responses.addObject();
      o.put("status", r.status());
      o.put("server_timing", r.headers().get("server-timing"));
      o.put("duration_ms", durationMs);
      o.put("traceparent", tp);
      traceIds.add(tp.substring(3, 35));
    }
    // And one failure: the status alone makes it worth printing.
    ObjectNode failed = responses.addObject();
    failed.put("status", 503);
    failed.put("duration_ms", 3.0);
    failed.put("traceparent", String.format("00-%s%016x-%016x-01", generator, 9, 10));
    input.put("budgets_file", BUDGETS.toAbsolutePath().toString());
    input.put("model", "sim-llama");
    input.put("slow_ms", 200);
    input.put("generator", generator);
    input.putArray("counters").add(0).add(1).add(255).add(1L << 40).add((1L << 53) - 1);
    Path in = tmp.resolve("input.json");
    JSON.writeValue(in.toFile(), input);

    ExternalTool.Result run =
        ExternalTool.NODE.run(
            Path.of("."),
            Path.of("src/test/resources/k6/mirror.mjs").toAbsolutePath().toString(),
            K6.resolve("lib/envelope.js").toAbsolutePath().toString(),
            in.toString());
    assertThat(run.exit()).as("node mirror.mjs:%n%s", run.output()).isZero();
    JsonNode out = JSON.readTree(run.output());

    // Server-Timing parsed back equals the proxy's record of the same request, phase by phase.
    JsonNode results = out.get("results");
    for (int i = 0; i < 3; i++) {
      JsonNode r = results.get(i);
      assertThat(r.get("trace_id").asText()).isEqualTo(traceIds.get(i));
      assertThat(r.get("complete").asBoolean()).isTrue();
      String path = "/admin/records/" + traceIds.get(i);
      // The record is published when the response's end() completes, a moment after the bytes.
      org.awaitility.Awaitility.await()
          .atMost(java.time.Duration.ofSeconds(10))
          .until(() -> admin(path).status() == 200);
      JsonNode record = JSON.readTree(admin(path).text());
      double sum = 0;
      for (String phase : List.of("auth", "receive", "prepare", "route", "queue", "generation")) {
        double recorded = record.at("/phases_ms/" + phase).asDouble();
        assertThat(r.at("/phases/" + phase).asDouble())
            .as("%s of request %d", phase, i)
            .isCloseTo(recorded, within(0.0011));
        sum += recorded;
      }
      assertThat(r.get("server_ms").asDouble()).isCloseTo(sum, within(0.01));
      assertThat(r.get("gateway_ms").asDouble())
          .isCloseTo(record.get("gateway_ms").asDouble(), within(0.01));
      // The envelope is what the client waited beyond the reported phases: at least what it
      // waited beyond the whole server root (write and the gaps between spans are in it too).
      double duration = responses.get(i).get("duration_ms").asDouble();
      double env = r.get("network_envelope_ms").asDouble();
      assertThat(env).isCloseTo(duration - sum, within(0.01)).isPositive();
      assertThat(env).isGreaterThanOrEqualTo(duration - record.get("root_ms").asDouble() - 0.01);
    }
    // Only the slow one (300 ms upstream, over slow_ms 200) and the failed one are printed.
    assertThat(results.get(0).get("report").asBoolean()).isFalse();
    assertThat(results.get(1).get("report").asBoolean()).isFalse();
    assertThat(results.get(2).get("report").asBoolean()).isTrue();
    assertThat(results.get(3).get("report").asBoolean()).isTrue();
    assertThat(results.get(3).get("complete").asBoolean()).isFalse();

    // Budgets as k6 reads them are the budgets as the proxy reads them.
    List<Budget> expected = Budgets.load(BUDGETS).budgets();
    JsonNode budgets = out.get("budgets");
    assertThat(budgets).hasSize(expected.size());
    for (int i = 0; i < expected.size(); i++) {
      Budget b = expected.get(i);
      JsonNode k = budgets.get(i);
      assertThat(k.get("name").asText()).isEqualTo(b.name());
      assertThat(k.get("model").asText()).isEqualTo(b.model());
      assertThat(k.get("quantile").asDouble()).isEqualTo(b.quantile());
      assertThat(k.get("max_error_rate").asDouble()).isEqualTo(b.maxErrorRate());
      Map<String, Double> limits =
          JSON.convertValue(
              k.get("limits_ms"),
              new com.fasterxml.jackson.core.type.TypeReference<Map<String, Double>>() {});
      assertThat(limits).isEqualTo(b.limitsMs());
    }
    // Thresholds per phase at the budget's quantile; what only the proxy sees is skipped.
    JsonNode t = out.get("thresholds");
    assertThat(t.at("/phasemeter_network_envelope/0").asText()).isEqualTo("p(95)<120");
    assertThat(t.at("/phasemeter_gateway/0").asText()).isEqualTo("p(95)<60");
    assertThat(t.at("/phasemeter_queue/0").asText()).isEqualTo("p(95)<250");
    assertThat(t.at("/http_req_failed/0").asText()).isEqualTo("rate<0.01");
    assertThat(JSON.convertValue(out.get("skipped"), List.class))
        .containsExactlyInAnyOrder("chat-interactive:ttft", "chat-interactive:total");
    assertThat(JSON.convertValue(out.get("percentiles"), List.class))
        .containsExactly("p(50)", "p(95)", "p(99.9)");
    assertThat(out.at("/timing_with_desc/queue").asDouble()).isEqualTo(12.5);
    assertThat(out.at("/timing_with_desc").has("cache")).isFalse();

    // k6's connect and TLS handshake: only a request that opened a connection has them; plain
    // http has no tls; a reused connection (k6's zeros) none at all.
    assertThat(out.at("/setup/0/opened").asBoolean()).isTrue();
    assertThat(out.at("/setup/0/connect_ms").asDouble()).isEqualTo(0.21);
    assertThat(out.at("/setup/0/tls_ms").asDouble()).isEqualTo(3.5);
    assertThat(out.at("/setup/1/connect_ms").asDouble()).isEqualTo(0.3);
    assertThat(out.at("/setup/1/tls_ms").isNull()).isTrue();
    assertThat(out.at("/setup/2/opened").asBoolean()).isFalse();
    assertThat(out.at("/setup/2/connect_ms").isNull()).isTrue();

    // Traceparents: W3C-valid, this generator's id in the high half, unique, never all zero.
    Pattern w3c = Pattern.compile("00-[0-9a-f]{32}-[0-9a-f]{16}-01");
    List<String> tps = JSON.convertValue(out.get("traceparents"), List.class);
    assertThat(tps).allSatisfy(tp -> assertThat(tp).matches(w3c).startsWith("00-" + generator));
    assertThat(tps).doesNotHaveDuplicates();
    assertThat(tps.get(3)).isEqualTo("00-5eed5eed5eed5eed0000010000000000-0000010000000001-01");
    assertThat(out.get("bad_generator").asText()).contains("not all zero");
    // k6 has no BigInt: the counter is a Number, exact up to 2^53 - 1, refused beyond.
    assertThat(tps.get(4)).isEqualTo("00-5eed5eed5eed5eed001fffffffffffff-0020000000000000-01");
    assertThat(out.get("bad_counter").asText()).contains("2^53 - 1");
  }

  @Test
  void theScriptIsAnOpenModelWithBudgetThresholdsAndLowCardinalityTags() throws Exception {
    String script = Files.readString(K6.resolve("phase-envelope.js"));
    assertThat(script)
        .contains("executor: 'constant-arrival-rate'")
        // Budgets become thresholds; a response without Server-Timing fails the run, since k6
        // passes a threshold on a Trend that has no samples, and so does a dropped iteration.
        .contains(
            "{ phasemeter_missing_server_timing: ['count<1'], dropped_iterations: ['count<1'] },")
        .contains("judged.thresholds,")
        // Each request's trace id is metadata on its samples (--out json), never a tag.
        .contains("exec.vu.metrics.metadata.trace_id = traceIdOf(tp);")
        .contains("parseBudgets(open(__ENV.BUDGETS || '../budgets.yaml'))")
        .contains("traceparent: tp")
        .contains("res.headers['Server-Timing']")
        .contains("from './lib/envelope.js'")
        // -e NO_REUSE=1: a fresh connection per request, for engines that close after a stream.
        .contains("noConnectionReuse: NO_REUSE");
    assertThat(K6.resolve("../budgets.yaml").normalize()).isEqualTo(BUDGETS.normalize());
    // Tags: only the route name and the model; the trace id only ever goes to the log line.
    assertThat(script).containsPattern("const tags = \\{ name: '[^']+', model: MODEL \\};");
    String code =
        script
            .lines()
            .filter(l -> !l.strip().startsWith("//"))
            .collect(java.util.stream.Collectors.joining("\n"));
    assertThat(code).doesNotContainPattern("tags[^\\n]*trace");
    assertThat(script).contains("systemTags: [").doesNotContainPattern("systemTags:[^\\]]*'url'");
    // k6 0.48's JavaScript (goja) has no BigInt: a literal like 1n stops k6 before the run (exit
    // 107) and BigInt() fails every iteration; Node.js has both, so only this check catches them.
    for (Path js : List.of(K6.resolve("phase-envelope.js"), K6.resolve("lib/envelope.js"))) {
      String src =
          Files.readString(js)
              .lines()
              .filter(l -> !l.strip().startsWith("//"))
              .collect(java.util.stream.Collectors.joining("\n"));
      assertThat(src)
          .as(js.toString())
          .doesNotContain("BigInt")
          .doesNotContainPattern("\\b\\d+n\\b");
    }
    ExternalTool.NODE.require();
    // Syntax check of the whole script as an ES module (k6's imports are not resolvable here).
    ExternalTool.Result check = ExternalTool.NODE.run(K6, "--check", "phase-envelope.js");
    assertThat(check.exit()).as("node --check:%n%s", check.output()).isZero();
  }
}
