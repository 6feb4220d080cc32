package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Several upstreams per pool: least-in-flight choice, one retry on another upstream before any byte
 * reached the client, passive ejection, active health checks, an upstream killed mid-run and
 * brought back, and external providers with their own credentials.
 */
class UpstreamsTest extends ProxyTestBase {
  private static final AttributeKey<Long> PORT = AttributeKey.longKey("server.port");

  /** A scripted upstream the test can stop and start again on the same port. */
  private final class Upstream {
    final AtomicInteger requests = new AtomicInteger();
    final Handler<HttpServerRequest> handler;
    int port;
    HttpServer server;

    Upstream(Handler<HttpServerRequest> handler) {
      this.handler = handler;
    }

    Upstream start() throws Exception {
      server =
          vertx
              .createHttpServer()
              .requestHandler(
                  req -> {
                    if (req.path().equals("/health")) {
                      req.response().end("ok");
                      return;
                    }
                    requests.incrementAndGet();
                    handler.handle(req);
                  })
              .listen(port, "127.0.0.1")
              .await(10, TimeUnit.SECONDS);
      port = server.actualPort();
      return this;
    }

    void stop() throws Exception {
      server.close().await(10, TimeUnit.SECONDS);
    }

    String url() {
      return "http://127.0.0.1:" + port;
    }
  }

  private static Handler<HttpServerRequest> completes() {
    return req ->
        req.body()
            .onSuccess(
                b ->
                    req.response()
                        .putHeader("content-type", "application/json")
                        .end(VllmScript.COMPLETION));
  }

  private static Handler<HttpServerRequest> answers(int status) {
    return req ->
        req.body()
            .onSuccess(
                b ->
                    req.response()
                        .setStatusCode(status)
                        .putHeader("content-type", "application/json")
                        .end("{\"error\":{\"message\":\"busy\"}}"));
  }

  private static int deadPort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private static ProxyConfig pool(String extra, String... urls) {
    String yaml =
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: ["
            + String.join(", ", urls)
            + "]\n"
            + "    slots: 16\n"
            + (extra == null ? "    health: {path: null}\n" : extra);
    return io.phasemeter.proxy.config.ConfigLoader.parse(yaml, "test.yaml");
  }

  private JsonObject record(Finished f) {
    return new JsonObject(proxy.records().get(f.traceId()));
  }

  private List<SpanData> generationSpans() {
    return spans.getFinishedSpanItems().stream()
        .filter(s -> s.getName().equals("inference.generate"))
        .toList();
  }

  @Test
  void theUpstreamWithFewestRequestsInFlightIsChosen() throws Exception {
    io.vertx.core.Promise<Void> never = io.vertx.core.Promise.promise();
    Upstream slow =
        new Upstream(
                req ->
                    req.body().onSuccess(b -> never.future().onComplete(v -> req.response().end())))
            .start();
    Upstream fast = new Upstream(completes()).start();
    startProxy(pool(null, slow.url(), fast.url()));

    Future<Response> held = callAsync("/v1/chat/completions", chat("hi", false));
    Awaitility.await().until(() -> slow.requests.get() + fast.requests.get() >= 1);
    for (int i = 0; i < 10; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    }

    // Round robin would have sent half of them to the one that never answers.
    assertThat(slow.requests.get()).isEqualTo(1);
    assertThat(fast.requests.get()).isEqualTo(10);
    assertThat(held.isComplete()).isFalse();
  }

  @Test
  void aRefusedConnectionIsRetriedOnceOnAnotherUpstreamAndTheDeadOneIsEjected() throws Exception {
    Upstream live = new Upstream(completes()).start();
    String dead = "http://127.0.0.1:" + deadPort();
    startProxy(
        pool(
            "    health: {path: null}\n    ejection: {after: 3, backoff: 60s, max_backoff: 60s}\n",
            dead,
            live.url()));

    for (int i = 0; i < 12; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    }

    List<Finished> all = awaitFinished(12);
    long retried = all.stream().filter(f -> record(f).getInteger("upstream_attempts") == 2).count();
    assertThat(retried).as("the dead one was tried until ejected, 3 failures").isEqualTo(3);
    assertThat(all).allMatch(f -> f.outcome().equals("success"));
    assertThat(live.requests.get()).isEqualTo(12);
    List<SpanData> gen = generationSpans();
    assertThat(gen.stream().filter(s -> !s.getEvents().isEmpty()))
        .hasSize(3)
        .allSatisfy(
            s -> {
              assertThat(s.getEvents().get(0).getName()).isEqualTo("upstream.retry");
              assertThat(
                      s.getEvents()
                          .get(0)
                          .getAttributes()
                          .get(AttributeKey.stringKey("error.type")))
                  .isEqualTo("upstream_unavailable");
              assertThat(s.getAttributes().get(PORT)).isEqualTo((long) live.port);
            });
    String metrics = admin("/metrics").text();
    assertThat(metrics).contains("llm_upstream_ejections_total{llm_pool=\"default\"} 1.0");
    assertThat(metrics).contains("llm_upstream_retries_total{llm_pool=\"default\"} 3.0");
    assertThat(metrics).contains("llm_upstreams_available{llm_pool=\"default\"} 1.0");
    assertThat(metrics).contains("llm_upstreams_configured{llm_pool=\"default\"} 2.0");
    assertThat(metrics)
        .as("no per-upstream series unless configured")
        .doesNotContain("upstream=\"");
  }

  @Test
  void withoutRetriesARefusedConnectionIs502() throws Exception {
    Upstream live = new Upstream(completes()).start();
    String dead = "http://127.0.0.1:" + deadPort();
    startProxy(pool("    health: {path: null}\n    retries: 0\n", dead, live.url()));

    List<Integer> statuses = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      statuses.add(call("/v1/chat/completions", chat("hi", false)).status());
    }

    assertThat(statuses).containsExactlyInAnyOrder(200, 502);
  }

  @Test
  void a503IsRetriedElsewhereButA500IsNot() throws Exception {
    Upstream busy = new Upstream(answers(503)).start();
    Upstream broken = new Upstream(answers(500)).start();
    Upstream ok = new Upstream(completes()).start();

    startProxy(pool(null, busy.url(), ok.url()));
    for (int i = 0; i < 4; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    }
    proxy.close().await(10, TimeUnit.SECONDS);
    finished.clear();

    startProxy(pool(null, broken.url(), ok.url()));
    List<Integer> statuses = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      statuses.add(call("/v1/chat/completions", chat("hi", false)).status());
    }
    assertThat(statuses).contains(502, 200);
    assertThat(broken.requests.get()).isEqualTo(statuses.stream().filter(s -> s == 502).count());
  }

  @Test
  void anUpstreamKilledMidRunFailsItsRequestsAndComesBackAfterItRecovers() throws Exception {
    // Both upstreams start answering at once and then hold, so least-in-flight spreads the first
    // four requests two and two, and each is in flight on its upstream when A is killed.
    io.vertx.core.Promise<Void> release = io.vertx.core.Promise.promise();
    java.util.concurrent.atomic.AtomicBoolean hold =
        new java.util.concurrent.atomic.AtomicBoolean(true);
    Handler<HttpServerRequest> startsThenHolds =
        req ->
            req.body()
                .onSuccess(
                    b -> {
                      if (!hold.get()) {
                        req.response()
                            .putHeader("content-type", "application/json")
                            .end(VllmScript.COMPLETION);
                        return;
                      }
                      var resp = req.response().setChunked(true);
                      if (b.toString().contains("\"stream\":true")) {
                        resp.putHeader("content-type", "text/event-stream")
                            .write(VllmScript.ROLE + VllmScript.content("a"));
                        release
                            .future()
                            .onComplete(
                                v ->
                                    resp.end(
                                        VllmScript.FINISH + VllmScript.USAGE + VllmScript.DONE));
                      } else {
                        resp.putHeader("content-type", "application/json")
                            .write(VllmScript.COMPLETION.substring(0, 10));
                        release
                            .future()
                            .onComplete(v -> resp.end(VllmScript.COMPLETION.substring(10)));
                      }
                    });
    Handler<HttpServerRequest> fresh =
        req -> {
          // A restarted A answers at once.
          completes().handle(req);
        };
    Upstream a = new Upstream(startsThenHolds).start();
    Upstream b = new Upstream(startsThenHolds).start();
    startProxy(
        pool(
            "    health: {path: /health, interval: 100ms, timeout: 2s, failures: 2}\n",
            a.url(),
            b.url()));
    List<Future<Response>> first = new ArrayList<>();
    first.add(callAsync("/v1/chat/completions", chat("hi", false)));
    first.add(callAsync("/v1/chat/completions", chat("hi", false)));
    Awaitility.await().until(() -> a.requests.get() == 1 && b.requests.get() == 1);
    first.add(callAsync("/v1/chat/completions", chat("hi", true)));
    first.add(callAsync("/v1/chat/completions", chat("hi", true)));
    Awaitility.await().until(() -> a.requests.get() == 2 && b.requests.get() == 2);
    hold.set(false);

    a.stop();

    // A's two fail: the whole one with 502, the stream (already 200) with an error event.
    List<Finished> failed =
        Awaitility.await()
            .atMost(Duration.ofSeconds(10))
            .until(() -> List.copyOf(finished), l -> l.size() >= 2);
    assertThat(failed).extracting(Finished::outcome).containsOnly("upstream_error");
    assertThat(failed).extracting(Finished::errorType).containsOnly("upstream_disconnected");
    assertThat(failed).extracting(Finished::status).containsExactlyInAnyOrder(502, 200);
    assertThat(first.get(0).isComplete() || first.get(1).isComplete()).isTrue();
    Response whole = (first.get(0).isComplete() ? first.get(0) : first.get(1)).result();
    assertThat(whole.status()).isEqualTo(502);
    assertThat(new JsonObject(whole.text()).getJsonObject("error").getString("code"))
        .isEqualTo("upstream_disconnected");
    Response stream = (first.get(2).isComplete() ? first.get(2) : first.get(3)).result();
    assertThat(stream.text()).contains("upstream_disconnected").doesNotContain("[DONE]");

    // New requests go to B: by a retry while A is not yet marked down, then directly.
    int bBefore = b.requests.get();
    for (int i = 0; i < 5; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    }
    assertThat(b.requests.get() - bBefore).isEqualTo(5);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics")
                    .text()
                    .contains("llm_upstreams_available{llm_pool=\"default\"} 1.0"));

    // B's own two were never disturbed.
    release.complete();
    Awaitility.await().until(() -> first.stream().allMatch(Future::isComplete));
    assertThat(first).filteredOn(f -> f.result().status() == 200).hasSize(3);

    // A comes back on the same port: the health check sees it and it takes requests again.
    Upstream back = new Upstream(fresh);
    back.port = a.port;
    back.start();
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics")
                    .text()
                    .contains("llm_upstreams_available{llm_pool=\"default\"} 2.0"));
    for (int i = 0; i < 4; i++) {
      assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    }
    assertThat(back.requests.get()).as("least in flight alternates on ties").isEqualTo(2);
    assertIdle();
  }

  @Test
  void aPoolWithNoAvailableUpstreamAnswers503AtOnce() throws Exception {
    String dead = "http://127.0.0.1:" + deadPort();
    startProxy(
        pool("    health: {path: /health, interval: 50ms, timeout: 1s, failures: 1}\n", dead));
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics")
                    .text()
                    .contains("llm_upstreams_available{llm_pool=\"default\"} 0.0"));

    Response r = call("/v1/chat/completions", chat("hi", false));

    assertThat(r.status()).isEqualTo(503);
    assertThat(r.headers().get("retry-after")).isEqualTo("1");
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("code"))
        .isEqualTo("no_healthy_upstream");
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("upstream_error");
    assertThat(f.phases())
        .as("refused at route, never queued")
        .doesNotContainKey(io.phasemeter.proxy.pipeline.Phase.QUEUE);
  }

  @Test
  void anExternalProviderGetsItsOwnKeyAndItsSpanSaysItCannotBeSplit() throws Exception {
    AtomicReference<MultiMap> seen = new AtomicReference<>();
    Upstream provider =
        new Upstream(
                req -> {
                  seen.set(MultiMap.caseInsensitiveMultiMap().addAll(req.headers()));
                  completes().handle(req);
                })
            .start();
    ProxyConfig cfg =
        pool(
            "    external: true\n    api_key_env: PROVIDER_KEY\n    health: {path: /health}\n",
            provider.url());
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(otel)
            .environment(Map.of("PROVIDER_KEY", "sk-provider-CANARY"))
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);

    Response r =
        call(
            HttpMethod.POST,
            "/v1/chat/completions",
            chat("hi", false),
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer client-own"));

    assertThat(r.status()).isEqualTo(200);
    assertThat(seen.get().get("authorization")).isEqualTo("Bearer sk-provider-CANARY");
    List<SpanData> all = awaitRoots(1);
    assertThat(all)
        .extracting(SpanData::getName)
        .contains("provider.request")
        .doesNotContain("inference.generate");
    JsonObject rec = new JsonObject(proxy.records().get(awaitFinished(1).get(0).traceId()));
    assertThat(rec.getBoolean("external")).isTrue();
    assertThat(rec.getJsonObject("phases_ms").containsKey("generation")).isTrue();
    assertThat(rec.encode()).doesNotContain("CANARY");
    for (SpanData s : all) {
      s.getAttributes().forEach((k, v) -> assertThat(String.valueOf(v)).doesNotContain("CANARY"));
    }
    assertThat(provider.requests.get()).as("no active health checks on a provider").isEqualTo(1);
  }

  @Test
  void aProviderKeyVariableThatIsNotSetStopsStartUpNamingIt() {
    ProxyConfig cfg =
        pool("    external: true\n    api_key_env: NOT_SET_ANYWHERE\n", "http://127.0.0.1:1");

    Future<PhasemeterProxy> started =
        PhasemeterProxy.builder(vertx, cfg).openTelemetry(otel).environment(Map.of()).start();

    Awaitility.await().until(started::isComplete);
    assertThat(started.cause())
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("pools[0].api_key_env")
        .hasMessageContaining("NOT_SET_ANYWHERE");
  }
}
