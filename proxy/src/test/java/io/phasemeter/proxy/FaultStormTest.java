package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * A storm of upstream faults, all at once: 130 concurrent requests, ten of each fault (refused,
 * reset before headers, 500, 503, a non-JSON body, a malformed event, a stream that stalls, a
 * stream cut mid-way, an upstream slower than every timeout, vLLM's mid-stream error event, usage
 * numbers no engine could report) and ten that succeed, through 8 slots. Every request ends in its
 * mapped error with its outcome, has exactly one record, and afterwards {@code llm_slots_in_use}
 * and {@code llm_requests_in_flight} are back to 0.
 */
class FaultStormTest extends ProxyTestBase {
  private static final Pattern GAUGE =
      Pattern.compile("(?m)^(llm_slots_in_use|llm_requests_in_flight)\\{[^}]*\\} (\\S+)$");

  /** A fault: what the scripted upstream does, and what the client and the record must say. */
  private record Fault(
      String name, boolean stream, int status, String errorType, String outcome, String model) {}

  private static final List<Fault> FAULTS =
      List.of(
          new Fault("ok", true, 200, null, "success", "sim-llama"),
          new Fault("refused", false, 502, "upstream_unavailable", "upstream_error", "dead-llama"),
          new Fault("reset", false, 502, "upstream_disconnected", "upstream_error", "sim-llama"),
          new Fault("status500", false, 502, "upstream_error", "upstream_error", "sim-llama"),
          new Fault("status503", true, 503, "upstream_overloaded", "upstream_error", "sim-llama"),
          new Fault(
              "html", false, 502, "upstream_malformed_response", "upstream_error", "sim-llama"),
          new Fault(
              "badsse", true, 200, "upstream_malformed_response", "upstream_error", "sim-llama"),
          new Fault("stall", true, 200, "upstream_timeout", "timeout", "sim-llama"),
          new Fault("cut", true, 200, "upstream_disconnected", "upstream_error", "sim-llama"),
          new Fault("silent", true, 504, "upstream_timeout", "timeout", "sim-llama"),
          new Fault("silent", false, 504, "upstream_timeout", "timeout", "sim-llama"),
          new Fault("errorevent", true, 200, "upstream_error", "upstream_error", "sim-llama"),
          new Fault("absurdusage", true, 200, null, "success", "sim-llama"));

  /** vLLM's stream generator, failing after its first token: an error event, then [DONE]. */
  static final String ERROR_EVENT =
      "data: {\"error\": {\"object\": \"error\", \"message\": \"CUDA out of memory\","
          + " \"type\": \"InternalServerError\", \"param\": null, \"code\": 500}}\n\n";

  static final String ABSURD_USAGE =
      "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
          + "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":9223372036854775807}}\n\n";

  @Test
  void everyFaultEndsMappedRecordedOnceAndNothingLeaks() throws Exception {
    int port = startBackend(this::script);
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    String pool =
        "    slots: 8\n"
            + "    health: {path: null}\n"
            + "    retries: 0\n"
            + "    ejection: {after: 1000}\n"
            // Generous for the faults that must not time out on a busy machine; the silent and
            // stalled ones wait them out.
            + "    timeouts: {connect: 2s, first_token: 2s, idle: 1s}\n";
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n"
                + "  - name: default\n"
                + "    models: [sim-llama]\n"
                + "    upstreams: [http://127.0.0.1:"
                + port
                + "]\n"
                + pool
                + "  - name: dead\n"
                + "    models: [dead-llama]\n"
                + "    upstreams: [http://127.0.0.1:"
                + closed
                + "]\n"
                + pool,
            "storm.yaml"));

    Map<String, Fault> byTrace = new java.util.LinkedHashMap<>();
    List<Future<Response>> responses = new ArrayList<>();
    int n = 0;
    for (int round = 0; round < 10; round++) {
      for (Fault f : FAULTS) {
        String traceId = String.format("%032x", 0x570a0000L + n++);
        byTrace.put(traceId, f);
        String body =
            "{\"model\":\""
                + f.model()
                + "\",\"stream\":"
                + f.stream()
                + ",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
        MultiMap h =
            MultiMap.caseInsensitiveMultiMap()
                .add("x-fault", f.name())
                .add("traceparent", "00-" + traceId + "-00f067aa0ba902b7-01");
        responses.add(callAsync(HttpMethod.POST, "/v1/chat/completions", body, h));
      }
    }
    List<Response> got = new ArrayList<>();
    for (Future<Response> r : responses) {
      got.add(r.await(30, TimeUnit.SECONDS));
    }

    List<Fault> sent = new ArrayList<>(byTrace.values());
    for (int i = 0; i < got.size(); i++) {
      Fault f = sent.get(i);
      Response r = got.get(i);
      assertThat(r.status()).as(f.name() + " " + r.text()).isEqualTo(f.status());
      if (f.name().equals("errorevent")) {
        // Relayed as it came, [DONE] included; the record says the request failed.
        assertThat(r.text()).contains(ERROR_EVENT).endsWith(VllmScript.DONE);
      } else if (f.errorType() != null) {
        // A body (status ≥ 400) or, once a stream started, a final error event.
        assertThat(r.text()).as(f.name()).contains("\"code\":\"" + f.errorType() + "\"");
        assertThat(r.text()).doesNotContain("[DONE]");
      }
    }

    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> finished.size() >= got.size());
    assertIdle();
    // Exactly one record per request, each with its fault's outcome and error type.
    Map<String, Long> perTrace =
        finished.stream().collect(Collectors.groupingBy(Finished::traceId, Collectors.counting()));
    assertThat(perTrace.keySet()).containsExactlyInAnyOrderElementsOf(byTrace.keySet());
    assertThat(perTrace.values()).allMatch(c -> c == 1);
    Map<String, Integer> outcomes = new java.util.TreeMap<>();
    for (Map.Entry<String, Fault> e : byTrace.entrySet()) {
      Fault f = e.getValue();
      JsonObject record = new JsonObject(proxy.records().get(e.getKey()));
      assertThat(record.getString("outcome")).as(f.name()).isEqualTo(f.outcome());
      assertThat(record.getString("error_type")).as(f.name()).isEqualTo(f.errorType());
      if (f.name().equals("absurdusage")) {
        // Usage no engine could report is unknown, never a number to add or charge.
        assertThat(record.getJsonObject("tokens").getValue("output")).isNull();
      }
      outcomes.merge(f.outcome() + "/" + f.errorType(), 1, Integer::sum);
    }
    System.out.println("fault storm: " + got.size() + " requests, " + outcomes);

    String metrics = admin("/metrics").text();
    Matcher m = GAUGE.matcher(metrics);
    int gauges = 0;
    while (m.find()) {
      gauges++;
      assertThat(Double.parseDouble(m.group(2))).as(m.group()).isZero();
    }
    assertThat(gauges).as("slot and in-flight gauges for both pools and 'none'").isGreaterThan(4);
  }

  /** The scripted upstream: does what the request's {@code x-fault} header says. */
  private void script(io.vertx.core.http.HttpServerRequest req) {
    String fault = req.getHeader("x-fault");
    req.body()
        .onSuccess(
            b -> {
              var resp = req.response();
              Function<String, Void> stream =
                  events -> {
                    resp.setChunked(true).putHeader("content-type", "text/event-stream");
                    resp.write(events);
                    return null;
                  };
              switch (fault) {
                case "ok" -> {
                  stream.apply(VllmScript.stream(false));
                  resp.end();
                }
                case "reset" -> req.connection().close();
                case "status500", "status503" ->
                    resp.setStatusCode(fault.equals("status500") ? 500 : 503)
                        .putHeader("content-type", "application/json")
                        .end("{\"object\":\"error\",\"message\":\"boom\"}");
                case "html" -> resp.putHeader("content-type", "text/html").end("<html>oops</html>");
                case "badsse" -> {
                  stream.apply(VllmScript.ROLE + "data: {not json\n\n");
                  resp.end(VllmScript.DONE);
                }
                case "errorevent" -> {
                  stream.apply(VllmScript.ROLE + VllmScript.content("a") + ERROR_EVENT);
                  resp.end(VllmScript.DONE);
                }
                case "absurdusage" -> {
                  stream.apply(VllmScript.ROLE + VllmScript.content("a") + ABSURD_USAGE);
                  resp.end(VllmScript.DONE);
                }
                case "stall" -> stream.apply(VllmScript.ROLE + VllmScript.content("a"));
                case "cut" -> {
                  stream.apply(VllmScript.ROLE + VllmScript.content("a"));
                  vertx.setTimer(20, t -> req.connection().close());
                }
                case "silent" -> {
                  // Slower than every timeout: says nothing at all.
                }
                default -> resp.setStatusCode(400).end();
              }
            });
  }
}
