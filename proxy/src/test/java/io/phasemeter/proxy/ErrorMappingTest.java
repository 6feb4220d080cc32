package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.NetServer;
import java.net.ServerSocket;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Bad input and upstream failures end in the right OpenAI-style error and free everything. */
class ErrorMappingTest extends ProxyTestBase {

  private int okBackend() throws Exception {
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b ->
                        req.response()
                            .putHeader("content-type", "application/json")
                            .end(VllmScript.COMPLETION)));
  }

  private static void assertError(Response r, int status, String code) {
    assertThat(r.status()).as(r.text()).isEqualTo(status);
    assertThat(r.headers().get("content-type")).isEqualTo("application/json");
    JsonObject error = new JsonObject(r.text()).getJsonObject("error");
    assertThat(error.getString("code")).isEqualTo(code);
    assertThat(error.getString("message")).isNotBlank();
    assertThat(error.getString("type")).isNotBlank();
    assertThat(error.containsKey("param")).isTrue();
  }

  @Test
  void malformedJson() throws Exception {
    startProxy(config(okBackend(), 2, null));
    assertError(call("/v1/chat/completions", "{\"model\": \"sim-llama\", "), 400, "invalid_json");
    assertError(call("/v1/chat/completions", "[1,2,3]"), 400, "invalid_request");
    Finished f = awaitFinished(2).get(0);
    assertThat(f.outcome()).isEqualTo("client_error");
    assertIdle();
  }

  @Test
  void deeplyNestedJsonIsRefusedWithoutAStackOverflow() throws Exception {
    startProxy(config(okBackend(), 2, null));
    String nested =
        "{\"model\":\"sim-llama\",\"x\":" + "[".repeat(50_000) + "]".repeat(50_000) + "}";
    assertError(call("/v1/chat/completions", nested), 400, "invalid_json");
  }

  @Test
  void missingModelAndMessages() throws Exception {
    startProxy(config(okBackend(), 2, null));
    Response r =
        call("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    assertError(r, 400, "invalid_request");
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("param"))
        .isEqualTo("model");
    assertError(call("/v1/chat/completions", "{\"model\":\"sim-llama\"}"), 400, "invalid_request");
    assertError(call("/v1/completions", "{\"model\":\"sim-llama\"}"), 400, "invalid_request");
    assertError(
        call(
            "/v1/chat/completions",
            "{\"model\":\"sim-llama\",\"stream\":\"yes\",\"messages\":[{}]}"),
        400,
        "invalid_request");
  }

  @Test
  void unknownModelIs404ModelNotFoundAndLabelledOther() throws Exception {
    startProxy(config(okBackend(), 2, null));
    Response r =
        call(
            "/v1/chat/completions",
            "{\"model\":\"gpt-17\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    assertError(r, 404, "model_not_found");
    assertThat(r.text()).contains("gpt-17");
    SpanData root = StreamingRelayTest.rootOf(awaitRoots(1));
    assertThat(root.getAttributes().get(AttributeKey.stringKey("gen_ai.request.model")))
        .isEqualTo("other");
    assertThat(root.getAttributes().get(AttributeKey.stringKey("error.type")))
        .isEqualTo("model_not_found");
  }

  @Test
  void bodyOverTheLimitWithLengthAndChunked() throws Exception {
    var cfg = config(okBackend(), 2, null);
    cfg = cfg.withLimits(new io.phasemeter.proxy.config.ProxyConfig.Limits(1024));
    startProxy(cfg);
    String big = chat("x".repeat(4096), false);
    assertError(call("/v1/chat/completions", big), 413, "request_too_large");

    // Chunked, no length: cut off as soon as it crosses the limit.
    HttpClientRequest req = openChat();
    req.setChunked(true);
    Promise<HttpClientResponse> got = Promise.promise();
    req.response().onComplete(got);
    for (int i = 0; i < 8; i++) {
      req.write(Buffer.buffer("x".repeat(512)));
    }
    HttpClientResponse resp = got.future().await(10, TimeUnit.SECONDS);
    assertThat(resp.statusCode()).isEqualTo(413);
    awaitFinished(2);
    assertIdle();
  }

  @Test
  void aBodyThatStopsArrivingTimesOutWith408() throws Exception {
    var cfg = config(okBackend(), 2, null);
    cfg =
        cfg.withLimits(
            new io.phasemeter.proxy.config.ProxyConfig.Limits(
                1024, java.time.Duration.ofMillis(300)));
    startProxy(cfg);
    HttpClientRequest req = openChat();
    req.putHeader("content-length", "100");
    Promise<HttpClientResponse> got = Promise.promise();
    onClientContext(
            () -> {
              req.write("{\"model\":");
              return req.response();
            })
        .onComplete(got);
    HttpClientResponse resp = got.future().await(10, TimeUnit.SECONDS);
    assertThat(resp.statusCode()).isEqualTo(408);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.errorType()).isEqualTo("request_timeout");
    assertThat(f.outcome()).isEqualTo("client_error");
    assertIdle();
  }

  @Test
  void wrongContentTypeAndMethodAndUnknownPath() throws Exception {
    startProxy(config(okBackend(), 2, null));
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("content-type", "text/plain");
    assertError(
        call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h),
        415,
        "unsupported_media_type");
    Response get =
        call(HttpMethod.GET, "/v1/chat/completions", null, MultiMap.caseInsensitiveMultiMap());
    assertError(get, 405, "method_not_allowed");
    assertThat(get.headers().get("allow")).isEqualTo("POST");
    // The admin API is not on the public listener: a path the route table does not know goes to
    // the upstream (here one that answers every path), never to the proxy's own stats.
    Response admin = call(HttpMethod.GET, "/admin/stats", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(admin.text()).doesNotContain("window_s").contains("chat.completion");
    Response models = call(HttpMethod.GET, "/v1/models", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(models.status()).isEqualTo(200);
    assertThat(new JsonObject(models.text()).getJsonArray("data").getJsonObject(0).getString("id"))
        .isEqualTo("sim-llama");
  }

  @Test
  void invalidTraceparentStartsANewTraceAndNeverFailsTheRequest() throws Exception {
    startProxy(config(okBackend(), 2, null));
    for (String bad :
        new String[] {
          "garbage",
          "00-00000000000000000000000000000000-b7ad6b7169203331-01",
          "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
          "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
          "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-" + "x".repeat(8000)
        }) {
      MultiMap h = MultiMap.caseInsensitiveMultiMap().add("traceparent", bad);
      Response r = call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h);
      assertThat(r.status()).as(bad).isEqualTo(200);
    }
    for (SpanData root : awaitRoots(5)) {
      if (root.getKind() == io.opentelemetry.api.trace.SpanKind.SERVER) {
        assertThat(root.getParentSpanContext().isValid()).isFalse();
        assertThat(root.getTraceId()).isNotEqualTo("0af7651916cd43dd8448eb211c80319c");
      }
    }
  }

  @Test
  void upstreamRefusedIs502() throws Exception {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    startProxy(config(closedPort, 2, null));
    assertError(call("/v1/chat/completions", chat("x", false)), 502, "upstream_unavailable");
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("upstream_error");
    SpanData root = StreamingRelayTest.rootOf(awaitRoots(1));
    assertThat(root.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    SpanData gen =
        spans.getFinishedSpanItems().stream()
            .filter(s -> s.getName().equals("inference.generate"))
            .findFirst()
            .orElseThrow();
    assertThat(gen.getAttributes().get(AttributeKey.stringKey("error.type")))
        .isEqualTo("upstream_unavailable");
    assertIdle();
  }

  @Test
  void upstream5xxMapsTo502And503And504() throws Exception {
    AtomicInteger status = new AtomicInteger();
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .setStatusCode(status.get())
                                .putHeader("content-type", "application/json")
                                .end("{\"object\":\"error\",\"message\":\"boom\"}")));
    startProxy(config(port, 2, null));
    status.set(500);
    assertError(call("/v1/chat/completions", chat("x", false)), 502, "upstream_error");
    status.set(503);
    assertError(call("/v1/chat/completions", chat("x", true)), 503, "upstream_overloaded");
    status.set(504);
    assertError(call("/v1/chat/completions", chat("x", false)), 504, "upstream_timeout");
    // The upstream's own 4xx is the client's problem: passed through unchanged.
    status.set(400);
    Response r = call("/v1/chat/completions", chat("x", false));
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.text()).isEqualTo("{\"object\":\"error\",\"message\":\"boom\"}");
    assertThat(awaitFinished(4).get(3).outcome()).isEqualTo("client_error");
    assertIdle();
  }

  @Test
  void upstreamResetBeforeHeadersAndNonJsonBody() throws Exception {
    NetServer reset =
        vertx
            .createNetServer()
            .connectHandler(so -> so.handler(b -> so.close()))
            .listen(0, "127.0.0.1")
            .await(5, TimeUnit.SECONDS);
    startProxy(config(reset.actualPort(), 2, null));
    assertError(call("/v1/chat/completions", chat("x", false)), 502, "upstream_disconnected");
    proxy.close().await(5, TimeUnit.SECONDS);

    int html =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "text/html")
                                .end("<html>oops</html>")));
    startProxy(config(html, 2, null));
    assertError(call("/v1/chat/completions", chat("x", false)), 502, "upstream_malformed_response");
    assertError(call("/v1/chat/completions", chat("x", true)), 502, "upstream_malformed_response");
    assertIdle();
  }

  @Test
  void streamCutMidWayEndsWithAnErrorEventAndUpstreamErrorOutcome() throws Exception {
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          req.response()
                              .setChunked(true)
                              .putHeader("content-type", "text/event-stream");
                          req.response().write(VllmScript.ROLE + VllmScript.content("a"));
                          vertx.setTimer(30, t -> req.connection().close());
                        }));
    startProxy(config(port, 2, null));
    Response r = call("/v1/chat/completions", chat("x", true));
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.text()).startsWith(VllmScript.ROLE + VllmScript.content("a"));
    assertThat(r.text()).contains("\"code\":\"upstream_disconnected\"").doesNotContain("[DONE]");
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("upstream_error");
    assertIdle();
  }

  @Test
  void malformedEventMidStreamIsAnUpstreamError() throws Exception {
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(VllmScript.ROLE + "data: {not json\n\n" + VllmScript.DONE)));
    startProxy(config(port, 2, null));
    Response r = call("/v1/chat/completions", chat("x", true));
    assertThat(r.text()).contains("upstream_malformed_response");
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("upstream_error");
    assertIdle();
  }

  @Test
  void stalledStreamHitsTheIdleTimeoutAndSilenceTheFirstTokenTimeout() throws Exception {
    int stall =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          req.response()
                              .setChunked(true)
                              .putHeader("content-type", "text/event-stream");
                          req.response().write(VllmScript.ROLE + VllmScript.content("a"));
                        }));
    startProxy(config(stall, 2, "    timeouts: {connect: 1s, first_token: 10s, idle: 300ms}\n"));
    Response r = call("/v1/chat/completions", chat("x", true));
    assertThat(r.text()).contains("\"code\":\"upstream_timeout\"");
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("timeout");
    assertIdle();
    proxy.close().await(5, TimeUnit.SECONDS);

    int silent = startBackend(req -> {});
    startProxy(config(silent, 2, "    timeouts: {connect: 1s, first_token: 300ms, idle: 10s}\n"));
    assertError(call("/v1/chat/completions", chat("x", true)), 504, "upstream_timeout");
    assertIdle();
  }

  @Test
  void fullQueueIs429WithRetryAfterAndQueueTimeoutIs503() throws Exception {
    Promise<Void> release = Promise.promise();
    int port = startHeldBackend(release);
    startProxy(config(port, 1, "    queue: {max: 1, timeout: 400ms}\n"));
    var first = callAsync("/v1/chat/completions", chat("a", false));
    org.awaitility.Awaitility.await().until(() -> proxy.slotPools().get("default").inUse() == 1);
    var second = callAsync("/v1/chat/completions", chat("b", false));
    org.awaitility.Awaitility.await()
        .until(() -> proxy.slotPools().get("default").queueDepth() == 1);
    Response third = call("/v1/chat/completions", chat("c", false));
    assertError(third, 429, "queue_full");
    assertThat(third.headers().get("retry-after")).isEqualTo("1");
    assertError(second.await(10, TimeUnit.SECONDS), 503, "queue_timeout");
    release.complete();
    assertThat(first.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
    var outcomes = awaitFinished(3).stream().map(Finished::outcome).toList();
    assertThat(outcomes).containsExactlyInAnyOrder("rejected", "timeout", "success");
    assertIdle();
  }
}
