package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.data.SpanData;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code POST /v1/responses} and the pooling endpoints against a scripted upstream that speaks as
 * vLLM does: typed events ({@code event:} and {@code data:}, no {@code [DONE]}), usage in the
 * terminal event, and the failures a Responses stream can end with.
 */
class ResponsesApiTest extends ProxyTestBase {
  /** Before the first delta the upstream waits this long: the TTFT the proxy must not undercut. */
  static final long FIRST_DELTA_DELAY_MS = 150;

  static final String CREATED =
      ev(
          "response.created",
          "{\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\","
              + "\"usage\":null},\"sequence_number\":0,\"type\":\"response.created\"}");
  static final String IN_PROGRESS =
      ev(
          "response.in_progress",
          "{\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"},\"sequence_number\":1,"
              + "\"type\":\"response.in_progress\"}");
  static final String ITEM_ADDED =
      ev(
          "response.output_item.added",
          "{\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
              + "\"content\":[],\"status\":\"in_progress\"},\"output_index\":0,"
              + "\"sequence_number\":2,\"type\":\"response.output_item.added\"}");

  static String delta(int seq, String text) {
    return ev(
        "response.output_text.delta",
        "{\"content_index\":0,\"delta\":\""
            + text
            + "\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":"
            + seq
            + ",\"type\":\"response.output_text.delta\"}");
  }

  static final String COMPLETED =
      ev(
          "response.completed",
          "{\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\","
              + "\"output\":[],\"usage\":{\"input_tokens\":11,\"input_tokens_details\":"
              + "{\"cached_tokens\":0},\"output_tokens\":3,\"output_tokens_details\":"
              + "{\"reasoning_tokens\":0},\"total_tokens\":14}},\"sequence_number\":7,"
              + "\"type\":\"response.completed\"}");
  static final String FAILED =
      ev(
          "response.failed",
          "{\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":"
              + "\"server_error\",\"message\":\"the engine died\"},\"usage\":null},"
              + "\"sequence_number\":5,\"type\":\"response.failed\"}");
  static final String ERROR =
      ev(
          "error",
          "{\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null,"
              + "\"sequence_number\":5,\"type\":\"error\"}");

  static String ev(String type, String data) {
    return "event: " + type + "\ndata: " + data + "\n\n";
  }

  private static final String HEAD = CREATED + IN_PROGRESS + ITEM_ADDED;
  private static final String OK_TAIL =
      delta(3, "Hel") + delta(4, "lo") + delta(5, "!") + COMPLETED;

  @BeforeEach
  void backend() throws Exception {
    int port = startBackend(req -> req.body().onSuccess(b -> answer(req, b)));
    startProxy(config(port, 4, null));
  }

  private void answer(HttpServerRequest req, Buffer body) {
    HttpServerResponse out = req.response();
    String script = req.getHeader("x-script");
    if (req.path().equals("/v1/embeddings") || req.path().equals("/v2/rerank")) {
      out.putHeader("content-type", "application/json")
          .end(
              "{\"id\":\"embd-1\",\"object\":\"list\",\"created\":1,\"model\":\"sim-llama\","
                  + "\"data\":[{\"index\":0,\"object\":\"embedding\",\"embedding\":[0.1,0.2]}],"
                  + "\"usage\":{\"prompt_tokens\":6,\"total_tokens\":6,\"completion_tokens\":0,"
                  + "\"prompt_tokens_details\":null}}");
      return;
    }
    if (!new JsonObject(body).getBoolean("stream", false)) {
      String status = "failed".equals(script) ? "failed" : "completed";
      out.putHeader("content-type", "application/json")
          .end(
              "{\"id\":\"resp_2\",\"object\":\"response\",\"status\":\""
                  + status
                  + "\",\"error\":"
                  + ("failed".equals(script)
                      ? "{\"code\":\"server_error\",\"message\":\"m\"}"
                      : "null")
                  + ",\"output\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":9,"
                  + "\"total_tokens\":14}}");
      return;
    }
    String tail =
        switch (script == null ? "" : script) {
          case "failed" -> delta(3, "Hel") + FAILED;
          case "error" -> delta(3, "Hel") + ERROR;
          case "truncated" -> delta(3, "Hel") + delta(4, "lo");
          default -> OK_TAIL;
        };
    out.putHeader("content-type", "text/event-stream").setChunked(true);
    // Pieces that cut events, lines and even field names: the relay must not care.
    writePieces(out, HEAD, 37);
    vertx.setTimer(
        FIRST_DELTA_DELAY_MS,
        t -> {
          writePieces(out, tail, 53);
          out.end();
        });
  }

  private static void writePieces(HttpServerResponse out, String s, int size) {
    Buffer b = Buffer.buffer(s);
    for (int from = 0; from < b.length(); from += size) {
      out.write(b.slice(from, Math.min(b.length(), from + size)));
    }
  }

  private Response responses(String body, String script) throws Exception {
    MultiMap headers = MultiMap.caseInsensitiveMultiMap();
    if (script != null) {
      headers.add("x-script", script);
    }
    return call(HttpMethod.POST, "/v1/responses", body, headers);
  }

  private static String request(boolean stream) {
    return "{\"model\":\"sim-llama\",\"input\":\"Say hello\",\"max_output_tokens\":16,\"stream\":"
        + stream
        + "}";
  }

  @Test
  void aStreamIsRelayedByteForByteAndMeasuredFromItsFirstDelta() throws Exception {
    Response r = responses(request(true), null);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.text()).as("byte for byte, no [DONE] added").isEqualTo(HEAD + OK_TAIL);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.stream()).isTrue();
    // response.created left at once; the first text delta after the injected delay.
    assertThat(f.ttftNanos())
        .isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(FIRST_DELTA_DELAY_MS));
    assertThat(f.inputTokens()).isEqualTo(11);
    assertThat(f.outputTokens()).isEqualTo(3);
    assertThat(f.finishReason()).isEqualTo("stop");
    assertThat(f.tpotNanos()).isGreaterThanOrEqualTo(0);
    JsonObject rec = new JsonObject(admin("/admin/records/" + f.traceId()).text());
    assertThat(rec.getString("route")).isEqualTo("/v1/responses");
    assertThat(rec.getString("operation")).isEqualTo("responses");
    assertThat(rec.getJsonObject("tokens").getLong("output")).isEqualTo(3);
    SpanData root =
        awaitRoots(1).stream().filter(s -> !s.getParentSpanContext().isValid()).findFirst().get();
    assertThat(root.getName()).isEqualTo("POST /v1/responses");
    assertThat(root.getAttributes().asMap().toString()).contains("gen_ai.operation.name=responses");
    String metrics = admin("/metrics").text();
    assertThat(metrics)
        .contains(
            "gen_ai_server_request_duration_seconds_count{gen_ai_operation_name=\"responses\"")
        .contains(
            "gen_ai_server_time_to_first_token_seconds_count{gen_ai_request_model=\"sim-llama\"");
    assertIdle();
  }

  @Test
  void aFailedResponseAnErrorEventAndAStreamWithoutItsEndAreFailures() throws Exception {
    for (String script : List.of("failed", "error", "truncated")) {
      Response r = responses(request(true), script);
      assertThat(r.status()).as(script).isEqualTo(200);
    }
    List<Finished> done = awaitFinished(3);
    assertThat(done)
        .extracting(Finished::outcome, Finished::errorType)
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple("upstream_error", "upstream_error"),
            org.assertj.core.groups.Tuple.tuple("upstream_error", "upstream_error"),
            // The truncated stream ended by its last chunk: the upstream sent a whole response
            // that is not a whole stream (a connection cut would be upstream_disconnected).
            org.assertj.core.groups.Tuple.tuple("upstream_error", "upstream_malformed_response"));
    List<SpanData> roots =
        awaitRoots(3).stream().filter(s -> !s.getParentSpanContext().isValid()).toList();
    assertThat(roots)
        .extracting(
            s ->
                s.getAttributes().asMap().entrySet().stream()
                    .filter(e -> e.getKey().getKey().equals("llm.upstream.error_type"))
                    .map(e -> String.valueOf(e.getValue()))
                    .findFirst()
                    .orElse("none"))
        .containsExactlyInAnyOrder("server_error", "rate_limit_exceeded", "none");
    assertIdle();
  }

  @Test
  void aWholeResponseTakesItsUsageAndAFailedOneFails() throws Exception {
    Response ok = responses(request(false), null);
    assertThat(ok.status()).isEqualTo(200);
    assertThat(new JsonObject(ok.text()).getString("id")).isEqualTo("resp_2");
    Response failed = responses(request(false), "failed");
    assertThat(failed.status()).isEqualTo(200);
    List<Finished> done = awaitFinished(2);
    assertThat(done.get(0).outcome()).isEqualTo("success");
    assertThat(done.get(0).inputTokens()).isEqualTo(5);
    assertThat(done.get(0).outputTokens()).isEqualTo(9);
    assertThat(done.get(0).ttftNanos()).isEqualTo(-1);
    assertThat(done.get(1).outcome()).isEqualTo("upstream_error");
  }

  @Test
  void aBackgroundRequestIsRelayedAsItComesAndCountedAsAPlainRequest() throws Exception {
    Response r = responses("{\"model\":\"sim-llama\",\"input\":\"x\",\"background\":true}", null);
    assertThat(r.status()).isEqualTo(200);
    assertThat(new JsonObject(r.text()).getString("id")).isEqualTo("resp_2");
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.stream()).isFalse();
    assertThat(f.ttftNanos()).isEqualTo(-1);
    assertThat(f.outputTokens()).as("not inspected").isEqualTo(-1);
    String metrics = admin("/metrics").text();
    assertThat(metrics)
        .contains(
            "http_server_request_duration_seconds_count{http_request_method=\"POST\","
                + "http_route=\"/v1/responses\",llm_pool=\"default\",outcome=\"success\"} 1")
        .doesNotContain("gen_ai_operation_name=\"responses\"");
  }

  @Test
  void aRequestWithoutInputIsRefusedBeforeTheUpstream() throws Exception {
    Response r = responses("{\"model\":\"sim-llama\",\"stream\":true}", null);
    assertThat(r.status()).isEqualTo(400);
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("param"))
        .isEqualTo("input");
  }

  @Test
  void embeddingsCountTheirInputAndHaveNoTokenTimings() throws Exception {
    Response r =
        call(
            "/v1/embeddings",
            "{\"model\":\"sim-llama\",\"input\":\"hello world\",\"stream\":true}");
    assertThat(r.status()).isEqualTo(200);
    assertThat(new JsonObject(r.text()).getJsonObject("usage").getInteger("prompt_tokens"))
        .isEqualTo(6);
    Response rerank =
        call("/v2/rerank", "{\"model\":\"sim-llama\",\"query\":\"q\",\"documents\":[\"a\",\"b\"]}");
    assertThat(rerank.status()).isEqualTo(200);
    List<Finished> done = awaitFinished(2);
    Finished f = done.get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.stream()).as("pooling answers whole").isFalse();
    assertThat(f.inputTokens()).isEqualTo(6);
    assertThat(f.outputTokens()).isZero();
    assertThat(f.ttftNanos()).isEqualTo(-1);
    assertThat(f.tpotNanos()).isEqualTo(-1);
    JsonObject rec = new JsonObject(admin("/admin/records/" + f.traceId()).text());
    assertThat(rec.getString("operation")).isEqualTo("embeddings");
    assertThat(rec.getValue("server_ttft_ms")).isNull();
    assertThat(rec.getValue("tpot_ms")).isNull();
    String metrics = admin("/metrics").text();
    assertThat(metrics)
        .contains("gen_ai_operation_name=\"embeddings\"")
        .contains("gen_ai_operation_name=\"rerank\"")
        .contains(
            "llm_tokens_total{gen_ai_request_model=\"sim-llama\",gen_ai_token_type=\"input\",llm_pool=\"default\",llm_tenant=\"other\"} 12.0");
    Response noInput = call("/v1/embeddings", "{\"model\":\"sim-llama\"}");
    assertThat(noInput.status()).isEqualTo(400);
  }

  @Test
  void aClientThatLeavesMidStreamCancelsTheUpstream() throws Exception {
    Promise<Void> gotHead = Promise.promise();
    onClientContext(
            () ->
                client
                    .request(
                        new RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(proxy.port())
                            .setURI("/v1/responses")
                            .putHeader("content-type", "application/json"))
                    .compose(req -> req.send(request(true)))
                    .compose(
                        resp -> {
                          gotHead.tryComplete();
                          resp.request().connection().close();
                          return io.vertx.core.Future.succeededFuture();
                        }))
        .await(10, TimeUnit.SECONDS);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("cancelled");
    assertIdle();
  }
}
