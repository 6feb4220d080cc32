package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.io.ByteArrayOutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The route table's edges, each found by a review probe first: the deny list as vLLM matches its
 * paths, the operator's key, stale connections for a body-less pass-through, pass-throughs that
 * must not starve model traffic, and a relayed body cut short.
 */
class RouteHardeningTest extends ProxyTestBase {
  private final List<String> seen = new CopyOnWriteArrayList<>();

  private int recordingBackend() throws Exception {
    return startBackend(
        req -> {
          seen.add(req.method() + " " + req.uri() + " auth=" + req.getHeader("authorization"));
          req.body().onSuccess(b -> req.response().end("{}"));
        });
  }

  @Test
  void whatVllmServesUnderADeniedPrefixIsDeniedToo() throws Exception {
    startProxy(config(recordingBackend(), 4, null));
    for (String p :
        List.of(
            "/metrics",
            "/metrics/",
            "/metrics/x",
            "/metricsx",
            "/metrics;x",
            "/metrics.txt",
            "/sleep;x",
            "/invocations",
            "/adapters",
            "/adapters/my-lora")) {
      Response r = call(HttpMethod.GET, p, null, MultiMap.caseInsensitiveMultiMap());
      assertThat(r.status()).as(p).isEqualTo(403);
    }
    assertThat(seen).isEmpty();
  }

  @Test
  void aConfiguredCatchAllTurnsTheTableIntoAnAllowlist() throws Exception {
    int port = recordingBackend();
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n"
                + "  - {name: default, models: [sim-llama], upstreams: ['http://127.0.0.1:"
                + port
                + "'], health: {path: null}}\n"
                + "routes:\n  - {path: /**, handler: deny}\n",
            "test.yaml"));
    assertThat(call(HttpMethod.GET, "/anything", null, MultiMap.caseInsensitiveMultiMap()).status())
        .isEqualTo(403);
    assertThat(call(HttpMethod.GET, "/version", null, MultiMap.caseInsensitiveMultiMap()).status())
        .as("the built-in routes still come first")
        .isEqualTo(200);
    assertThat(seen).containsExactly("GET /version auth=null");
  }

  @Test
  void theOperatorsKeyGoesOnlyWhereARouteSendsIt() throws Exception {
    int port = recordingBackend();
    String pool =
        "  - {name: provider, models: [sim-llama], upstreams: ['http://127.0.0.1:"
            + port
            + "'], external: true, api_key_env: HOME, health: {path: null}}\n";
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "pools:\n"
                + pool
                + "routes:\n  - {path: /v1/batches, handler: passthrough, pool: provider}\n",
            "test.yaml"));
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer client-key");
    call(HttpMethod.GET, "/v1/files", null, h);
    call(HttpMethod.DELETE, "/v1/files/file-abc", null, h);
    call(HttpMethod.GET, "/v1/batches", null, h);
    assertThat(seen)
        .containsExactly(
            "GET /v1/files auth=null",
            "DELETE /v1/files/file-abc auth=null",
            "GET /v1/batches auth=Bearer " + System.getenv("HOME"));
  }

  @Test
  void aBodylessPassThroughIsResentOnAFreshConnectionWhenThePooledOneWasClosed() throws Exception {
    // Closes every kept-alive connection after its first answer, without saying so.
    Set<HttpConnection> used = ConcurrentHashMap.newKeySet();
    int port =
        startBackend(
            req -> {
              HttpConnection conn = req.connection();
              if (!used.add(conn)) {
                conn.close();
                return;
              }
              req.body().onSuccess(b -> req.response().end("{\"version\":\"x\"}"));
            });
    startProxy(config(port, 4, "    timeouts: {first_token: 3s}\n"));
    List<Integer> statuses = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      statuses.add(
          call(HttpMethod.GET, "/version", null, MultiMap.caseInsensitiveMultiMap()).status());
    }
    assertThat(statuses).containsOnly(200);
    assertIdle();
  }

  @Test
  void stalledUploadsNeitherStarveModelTrafficNorHoldOnForever() throws Exception {
    int port =
        startBackend(
            req -> {
              if (req.path().equals("/v1/chat/completions")) {
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(VllmScript.stream(false)));
              } else {
                req.body().onSuccess(b -> req.response().end("ok"));
              }
            });
    // One slot: the slots' connections are 9; the uploads below are more than that.
    startProxy(
        config(port, 1, "    timeouts: {first_token: 4s}\n")
            .withLimits(
                new io.phasemeter.proxy.config.ProxyConfig.Limits(
                    10_485_760, java.time.Duration.ofSeconds(1))));
    List<Socket> held = new ArrayList<>();
    try {
      for (int i = 0; i < 12; i++) {
        Socket s = new Socket("127.0.0.1", proxy.port());
        s.setSoTimeout(10_000);
        s.getOutputStream()
            .write(
                "POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().flush();
        held.add(s);
      }
      Response chat = call("/v1/chat/completions", chat("hi", true));
      assertThat(chat.status()).as(chat.text()).isEqualTo(200);
      // Each stalled upload is cut at limits.receive_timeout, not held until first_token.
      String answer =
          new String(held.get(0).getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
      assertThat(answer).startsWith("HTTP/1.1 408").contains("request_timeout");
    } finally {
      for (Socket s : held) {
        s.close();
      }
    }
    assertIdle();
  }

  @Test
  void aRelayedBodyCutShortEndsWithTheConnectionNotWithAnErrorEvent() throws Exception {
    int port =
        startBackend(
            req -> {
              var resp = req.response();
              if (req.path().equals("/cl")) {
                resp.putHeader("content-length", "100000");
              } else {
                resp.setChunked(true);
              }
              resp.write(Buffer.buffer("{\"partial\":\"" + "x".repeat(200)));
              vertx.setTimer(100, t -> req.connection().close());
            });
    startProxy(config(port, 4, null));
    for (String p : List.of("/chunked", "/cl")) {
      try (Socket s = new Socket("127.0.0.1", proxy.port())) {
        s.setSoTimeout(10_000);
        s.getOutputStream()
            .write(
                ("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().flush();
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        boolean closed;
        try {
          int n;
          while ((n = s.getInputStream().read(buf)) > 0) {
            got.write(buf, 0, n);
          }
          closed = true;
        } catch (SocketTimeoutException e) {
          closed = false;
        }
        String text = got.toString(StandardCharsets.ISO_8859_1);
        assertThat(closed).as(p + ": the connection ends, so the client sees the cut").isTrue();
        assertThat(text).as(p).startsWith("HTTP/1.1 200").doesNotContain("\"error\"");
        assertThat(text).as(p + ": no final chunk").doesNotEndWith("0\r\n\r\n");
      }
    }
    assertThat(awaitFinished(2))
        .allSatisfy(
            f -> {
              assertThat(f.outcome()).isEqualTo("upstream_error");
              assertThat(f.errorType()).isEqualTo("upstream_disconnected");
            });
    assertIdle();
    assertThat(new JsonObject(admin("/admin/stats").text()).getJsonArray("series")).isNotNull();
  }
}
