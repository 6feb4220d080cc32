package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.proxy.pipeline.Phase;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The route table through the whole proxy: vLLM's administrative endpoints denied, every other path
 * passed through and measured with bounded labels, uploads streamed, the models answered locally.
 */
class RoutesTest extends ProxyTestBase {
  @TempDir Path dir;

  /** What the upstream saw: method, path and the SHA-256 and length of the body. */
  record Seen(String method, String uri, String sha256, long bytes, MultiMap headers) {}

  private final List<Seen> seen = new CopyOnWriteArrayList<>();
  private int backend;

  @BeforeEach
  void backend() throws Exception {
    backend =
        startBackend(
            req -> {
              if (req.path().equals("/early")) {
                // Judges the head and answers before reading the body, as an engine may.
                req.response().setStatusCode(413).end("{\"detail\":\"too large\"}");
                return;
              }
              MessageDigest sha = sha256();
              long[] n = {0};
              MultiMap headers = MultiMap.caseInsensitiveMultiMap().addAll(req.headers());
              req.handler(
                  b -> {
                    sha.update(b.getBytes());
                    n[0] += b.length();
                  });
              req.endHandler(
                  v -> {
                    seen.add(
                        new Seen(
                            req.method().name(),
                            req.uri(),
                            HexFormat.of().formatHex(sha.digest()),
                            n[0],
                            headers));
                    switch (req.path()) {
                      case "/version" ->
                          req.response()
                              .putHeader("content-type", "application/json")
                              .putHeader("x-upstream", "yes")
                              .end("{\"version\":\"0.11.0\"}");
                      case "/tokenize" ->
                          req.response()
                              .putHeader("content-type", "application/json")
                              .end("{\"count\":2,\"max_model_len\":4096,\"tokens\":[1,2]}");
                      case "/v1/audio/transcriptions" ->
                          req.response()
                              .putHeader("content-type", "application/json")
                              .end("{\"text\":\"" + n[0] + "\"}");
                      case "/broken" -> req.response().setStatusCode(500).end("upstream broke");
                      default ->
                          req.response()
                              .setStatusCode(404)
                              .putHeader("content-type", "application/json")
                              .end("{\"detail\":\"Not Found\"}");
                    }
                  });
            });
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private void start(String extra) throws Exception {
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n"
                + "  - name: default\n"
                + "    models: [sim-llama]\n"
                + "    upstreams: [http://127.0.0.1:"
                + backend
                + "]\n"
                + "    slots: 4\n"
                + "    health: {path: null}\n"
                + (extra == null ? "" : extra),
            "test.yaml"));
  }

  private Response post(String path, Buffer body, MultiMap headers) throws Exception {
    return onClientContext(
            () ->
                client
                    .request(
                        new RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(proxy.port())
                            .setURI(path)
                            .setHeaders(headers))
                    .compose(req -> req.send(body))
                    .compose(
                        resp ->
                            resp.body()
                                .map(b -> new Response(resp.statusCode(), resp.headers(), b))))
        .await(60, TimeUnit.SECONDS);
  }

  private JsonObject record(String traceId) throws Exception {
    return new JsonObject(admin("/admin/records/" + traceId).text());
  }

  @Test
  void administrativeEndpointsGet403AndNeverReachTheUpstream() throws Exception {
    start(null);
    for (String path :
        List.of(
            "/sleep",
            "/%73leep",
            "//sleep/",
            "/v1/models/../../wake_up",
            "/v1/load_lora_adapter",
            "/collective_rpc",
            "/metrics",
            "/health")) {
      for (HttpMethod m : List.of(HttpMethod.GET, HttpMethod.POST)) {
        Response r =
            call(m, path, m == HttpMethod.POST ? "{}" : null, MultiMap.caseInsensitiveMultiMap());
        assertThat(r.status()).as(m + " " + path).isEqualTo(403);
        JsonObject error = new JsonObject(r.text()).getJsonObject("error");
        assertThat(error.getString("code")).isEqualTo("route_denied");
        assertThat(error.getString("type")).isEqualTo("permission_error");
      }
    }
    assertThat(seen).as("nothing reached the upstream").isEmpty();
  }

  @Test
  void aPathTheTableDoesNotKnowIsPassedThroughAndAddsNoLabelValue() throws Exception {
    start(null);
    Response first =
        call(HttpMethod.GET, "/first/unknown", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(first.status()).as("the upstream's own answer").isEqualTo(404);
    assertThat(first.text()).isEqualTo("{\"detail\":\"Not Found\"}");
    awaitFinished(1);
    Set<String> before = labelValues(admin("/metrics").text());
    assertThat(before).contains("other").doesNotContain("/first/unknown");
    Random random = new Random(42);
    for (int batch = 0; batch < 20; batch++) {
      List<Future<Response>> calls = new ArrayList<>();
      for (int i = 0; i < 50; i++) {
        String path = "/" + Long.toHexString(random.nextLong()) + "/" + (batch * 50 + i);
        calls.add(callAsync(HttpMethod.GET, path, null, MultiMap.caseInsensitiveMultiMap()));
      }
      Future.all(calls).await(30, TimeUnit.SECONDS);
    }
    awaitFinished(1001);
    assertThat(seen).hasSize(1001);
    Set<String> after = labelValues(admin("/metrics").text());
    assertThat(after).isEqualTo(before);
    assertThat(admin("/metrics").text())
        .contains(
            "http_server_request_duration_seconds_count{http_request_method=\"GET\","
                + "http_route=\"other\",llm_pool=\"default\",outcome=\"client_error\"} 1001");
    assertIdle();
  }

  /**
   * Every label value of the proxy's own series (the JVM's, a GC's or a thread state's, may appear
   * at any time and are not the traffic's).
   */
  private static Set<String> labelValues(String metrics) {
    Set<String> values = new TreeSet<>();
    Pattern label = Pattern.compile("=\"([^\"]*)\"");
    for (String line : metrics.split("\n")) {
      if (!line.startsWith("jvm_")
          && !line.startsWith("process_")
          && !line.startsWith("system_")
          && !line.startsWith("#")) {
        Matcher m = label.matcher(line);
        while (m.find()) {
          values.add(m.group(1));
        }
      }
    }
    return values;
  }

  @Test
  void aPassThroughIsRelayedAsItCameAndTimedAsAPlainRequest() throws Exception {
    start(null);
    Response r =
        call(HttpMethod.GET, "/version?verbose=1", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.text()).isEqualTo("{\"version\":\"0.11.0\"}");
    assertThat(r.headers().get("x-upstream")).isEqualTo("yes");
    assertThat(r.headers().get("server-timing")).contains("auth;dur=");
    assertThat(seen.get(0).method()).isEqualTo("GET");
    assertThat(seen.get(0).uri()).isEqualTo("/version?verbose=1");
    assertThat(seen.get(0).headers().get("traceparent")).isNotNull();
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.phases())
        .as("no slot, no body to receive")
        .containsKeys(Phase.AUTH, Phase.PREPARE, Phase.ROUTE, Phase.GENERATION, Phase.WRITE)
        .doesNotContainKeys(Phase.QUEUE, Phase.RECEIVE);
    assertThat(f.ttftNanos()).isEqualTo(-1);
    JsonObject rec = record(f.traceId());
    assertThat(rec.getString("route")).isEqualTo("/version");
    assertThat(rec.containsKey("operation")).isFalse();
    assertThat(rec.getValue("server_ttft_ms")).isNull();
    var root =
        awaitRoots(1).stream().filter(s -> !s.getParentSpanContext().isValid()).findFirst().get();
    assertThat(root.getName()).isEqualTo("GET /version");
    assertThat(root.getAttributes().asMap().keySet().toString())
        .doesNotContain("gen_ai.operation.name");
    assertThat(admin("/metrics").text())
        .doesNotContain("llm_phase_duration_seconds_count{gen_ai_request_model=\"other\"");
  }

  @Test
  void anUpstreamErrorOnAPassThroughIsNeverASuccess() throws Exception {
    start(null);
    Response r = call(HttpMethod.POST, "/broken", "x", MultiMap.caseInsensitiveMultiMap());
    assertThat(r.status()).isEqualTo(500);
    assertThat(r.text()).isEqualTo("upstream broke");
    Response missing =
        call(HttpMethod.DELETE, "/v1/responses/resp_1", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(missing.status()).isEqualTo(404);
    List<Finished> done = awaitFinished(2);
    assertThat(done)
        .extracting(Finished::outcome, Finished::errorType)
        .containsExactlyInAnyOrder(
            org.assertj.core.groups.Tuple.tuple("upstream_error", "upstream_500"),
            org.assertj.core.groups.Tuple.tuple("client_error", "upstream_404"));
  }

  @Test
  void tokenizeIsRoutedByItsModelWithoutASlot() throws Exception {
    start(null);
    String body = "{\"model\":\"sim-llama\",\"prompt\":\"hello\"}";
    Response r = call("/tokenize", body);
    assertThat(r.status()).isEqualTo(200);
    assertThat(new JsonObject(r.text()).getInteger("count")).isEqualTo(2);
    assertThat(seen.get(0).bytes()).isEqualTo(body.length());
    Finished f = awaitFinished(1).get(0);
    assertThat(f.model()).isEqualTo("sim-llama");
    assertThat(f.phases()).containsKey(Phase.RECEIVE).doesNotContainKey(Phase.QUEUE);
    Response unknown = call("/tokenize", "{\"model\":\"nope\",\"prompt\":\"x\"}");
    assertThat(unknown.status()).isEqualTo(404);
    assertThat(unknown.text()).contains("model_not_found");
  }

  @Test
  void anUploadIsStreamedThroughNotHeld() throws Exception {
    start(null);
    byte[] body = new byte[3 << 20];
    new Random(7).nextBytes(body);
    String boundary = "----pm";
    MultiMap headers =
        MultiMap.caseInsensitiveMultiMap()
            .add("content-type", "multipart/form-data; boundary=" + boundary);
    Response r = post("/v1/audio/transcriptions", Buffer.buffer(body), headers);
    assertThat(r.status()).isEqualTo(200);
    Seen s = seen.get(0);
    assertThat(s.bytes()).isEqualTo(body.length);
    assertThat(s.sha256()).isEqualTo(HexFormat.of().formatHex(sha256().digest(body)));
    assertThat(s.headers().get("content-type")).startsWith("multipart/form-data");
    Finished f = awaitFinished(1).get(0);
    assertThat(f.phases()).containsKey(Phase.QUEUE).doesNotContainKey(Phase.RECEIVE);
    assertThat(proxy.bodyBudget().bufferedBytes()).isZero();
    assertIdle();
  }

  @Test
  void anUploadOverItsRoutesLimitIsRefused() throws Exception {
    start(
        "routes:\n  - {path: /v1/audio/transcriptions, handler: passthrough, max_body_bytes: 1000}\n");
    Response declared = call("/v1/audio/transcriptions", "x".repeat(1001));
    assertThat(declared.status()).isEqualTo(413);
    assertThat(seen).as("refused before a byte was read").isEmpty();
    // Chunked: cut off as it crosses the limit.
    Response chunked =
        onClientContext(
                () ->
                    client
                        .request(
                            new RequestOptions()
                                .setMethod(HttpMethod.POST)
                                .setHost("127.0.0.1")
                                .setPort(proxy.port())
                                .setURI("/v1/audio/transcriptions"))
                        .compose(
                            (HttpClientRequest req) -> {
                              req.setChunked(true);
                              for (int i = 0; i < 5; i++) {
                                req.write("y".repeat(400));
                              }
                              return req.end().compose(v -> req.response());
                            })
                        .compose(
                            resp ->
                                resp.body()
                                    .map(b -> new Response(resp.statusCode(), resp.headers(), b))))
            .await(30, TimeUnit.SECONDS);
    assertThat(chunked.status()).isEqualTo(413);
    assertThat(new JsonObject(chunked.text()).getJsonObject("error").getString("code"))
        .isEqualTo("request_too_large");
    assertIdle();
  }

  @Test
  void anUpstreamThatAnswersBeforeTheUploadEndedIsRelayedAndTheConnectionClosed() throws Exception {
    start(null);
    try (java.net.Socket socket = new java.net.Socket("127.0.0.1", proxy.port())) {
      socket.setSoTimeout(20_000);
      var out = socket.getOutputStream();
      out.write(
          ("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n")
              .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      out.write(new byte[64 * 1024]);
      out.flush();
      String answer =
          new String(
              socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      assertThat(answer).startsWith("HTTP/1.1 413").contains("too large");
      assertThat(answer.toLowerCase(java.util.Locale.ROOT)).contains("connection: close");
    }
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("client_error");
    assertThat(f.errorType()).isEqualTo("upstream_413");
    assertIdle();
    // The upstream connection that carried the cut upload was closed, not kept by the pool: the
    // next request gets one.
    assertThat(call(HttpMethod.GET, "/version", null, MultiMap.caseInsensitiveMultiMap()).status())
        .as("the proxy still serves")
        .isEqualTo(200);
    assertIdle();
  }

  @Test
  void theModelsAreAnsweredFromTheConfiguration() throws Exception {
    start(null);
    Response one =
        call(HttpMethod.GET, "/v1/models/sim-llama", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(one.status()).isEqualTo(200);
    assertThat(new JsonObject(one.text()).getString("id")).isEqualTo("sim-llama");
    Response none =
        call(HttpMethod.GET, "/v1/models/gpt-9", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(none.status()).isEqualTo(404);
    assertThat(none.text()).contains("model_not_found").contains("gpt-9");
    assertThat(seen).isEmpty();
  }

  @Test
  void anAdminOnlyRouteTakesAdminKeysOnly() throws Exception {
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n"
            + "  - {name: ops, sha256: \""
            + HashKeyMain.hash("sk-ops")
            + "\", admin: true}\n"
            + "  - {name: app, sha256: \""
            + HashKeyMain.hash("sk-app")
            + "\"}\n"
            + "...\n");
    start(
        "auth: {enabled: true, keys_file: "
            + keys
            + "}\n"
            + "routes:\n  - {path: /reset_prefix_cache, handler: passthrough, admin_only: true,"
            + " methods: [POST]}\n");
    Response app =
        call(
            HttpMethod.POST,
            "/reset_prefix_cache",
            "",
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer sk-app"));
    assertThat(app.status()).isEqualTo(403);
    assertThat(app.text()).contains("route_denied").contains("needs an admin key");
    assertThat(seen).isEmpty();
    Response ops =
        call(
            HttpMethod.POST,
            "/reset_prefix_cache",
            "",
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer sk-ops"));
    assertThat(ops.status()).as("relayed: the stub does not serve it").isEqualTo(404);
    assertThat(seen).hasSize(1);
    assertThat(seen.get(0).headers().get("authorization"))
        .as("the gateway's key stays here")
        .isNull();
    Response other =
        call(
            HttpMethod.POST,
            "/sleep",
            "",
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer sk-ops"));
    assertThat(other.status()).as("still denied: not allowed in proxy.yaml").isEqualTo(403);
  }
}
