package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.HostileInputTest.Raw;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.proxy.pipeline.BodyBudget;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The defects found by probing the sidecar as an attacker, a broken engine and a careless
 * deployment would, each reproduced through real sockets: every test here failed before its fix.
 * Rows of {@code docs/reliability.md}.
 */
class HardeningTest extends ProxyTestBase {
  private static final String KEY = "sk-hardening-test-key";

  @TempDir Path dir;

  /** Headers of each upstream request, in arrival order. */
  private final List<MultiMap> upstreamHeaders = new CopyOnWriteArrayList<>();

  private int echoBackend() throws Exception {
    return startVllmBackend(upstreamHeaders);
  }

  private ProxyConfig withKey(ProxyConfig cfg, long rpm, long tpm) throws Exception {
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: team-a, sha256: \""
            + HashKeyMain.hash(KEY)
            + "\", rpm: "
            + rpm
            + ", tpm: "
            + tpm
            + "}\n...\n");
    return cfg.withAuth(new ProxyConfig.Auth(true, keys.toString()));
  }

  private static MultiMap bearer() {
    return MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer " + KEY);
  }

  private static String head(long length, String extra) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra
        + "Content-Length: "
        + length
        + "\r\n\r\n";
  }

  // ---- 1. memory follows the bytes that arrived --------------------------------------------

  @Test
  void headsPromisingTenMegabytesHoldOnlyTheBytesThatArrived() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    BodyBudget budget = proxy.bodyBudget();
    List<Raw> conns = new ArrayList<>();
    try {
      for (int i = 0; i < 50; i++) {
        Raw raw = new Raw(proxy.port());
        raw.send(head(10_485_760, "") + "{");
        conns.add(raw);
      }
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> budget.uploads() == 50);
      // One byte each, not a buffer sized from the declared length.
      Awaitility.await()
          .atMost(Duration.ofSeconds(10))
          .untilAsserted(() -> assertThat(budget.bufferedBytes()).isEqualTo(50));
      Response ok = call("/v1/chat/completions", chat("still serving", false));
      assertThat(ok.status()).isEqualTo(200);
      String metrics = admin("/metrics").text();
      assertThat(metrics).containsPattern("(?m)^llm_request_uploads(\\{[^}]*\\})? 50.0$");
      assertThat(metrics).containsPattern("(?m)^llm_buffered_body_bytes(\\{[^}]*\\})? 50.0$");
    } finally {
      for (Raw r : conns) {
        r.close();
      }
    }
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> budget.uploads() == 0 && budget.bufferedBytes() == 0);
    assertIdle();
  }

  @Test
  void uploadsPastTheirLimitGet503OverloadedAndTheProxyRecovers() throws Exception {
    startProxy(
        config(echoBackend(), 4, null)
            .withLimits(new ProxyConfig.Limits(1 << 20, Duration.ofSeconds(30), 4, 0)));
    List<Raw> slow = new ArrayList<>();
    try {
      for (int i = 0; i < 4; i++) {
        Raw raw = new Raw(proxy.port());
        raw.send(head(1000, "") + "{");
        slow.add(raw);
      }
      Awaitility.await().until(() -> proxy.bodyBudget().uploads() == 4);
      Response refused = call("/v1/chat/completions", chat("one too many", false));
      assertThat(refused.status()).isEqualTo(503);
      assertThat(refused.headers().get("retry-after")).isEqualTo("1");
      JsonObject error = new JsonObject(refused.text()).getJsonObject("error");
      assertThat(error.getString("code")).isEqualTo("overloaded");
      assertThat(error.getString("type")).isEqualTo("server_error");
    } finally {
      for (Raw r : slow) {
        r.close();
      }
    }
    Awaitility.await().until(() -> proxy.bodyBudget().uploads() == 0);
    assertThat(call("/v1/chat/completions", chat("served again", false)).status()).isEqualTo(200);
    assertThat(finished).anyMatch(f -> "overloaded".equals(f.errorType()));
    assertIdle();
  }

  @Test
  void bodyBytesPastTheBudgetGet503OverloadedAndAreGivenBackWhenRequestsEnd() throws Exception {
    Promise<Void> release = Promise.promise();
    startProxy(
        config(startHeldBackend(release), 4, null)
            .withLimits(new ProxyConfig.Limits(64 * 1024, Duration.ofSeconds(30), 64, 100_000)));
    String big = chat("x".repeat(60_000), false);
    Future<Response> held = callAsync("/v1/chat/completions", big);
    Awaitility.await().until(() -> proxy.bodyBudget().bufferedBytes() >= 60_000);
    // The first body is held while its request runs; a second would pass the 100 kB budget.
    Response refused = call("/v1/chat/completions", big);
    assertThat(refused.status()).as(refused.text()).isEqualTo(503);
    assertThat(refused.text()).contains("\"code\":\"overloaded\"");
    release.complete();
    assertThat(held.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
    Awaitility.await().until(() -> proxy.bodyBudget().bufferedBytes() == 0);
    assertThat(call("/v1/chat/completions", big).status()).isEqualTo(200);
    assertIdle();
  }

  @Test
  void withAuthOnAHeadWithoutAKeyIsRefusedBeforeAnyBodyByteIsBuffered() throws Exception {
    startProxy(withKey(config(echoBackend(), 4, null), 0, 0));
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(head(10_485_760, "") + "{\"model\":");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
    }
    assertThat(got).startsWith("HTTP/1.1 401");
    assertThat(proxy.bodyBudget().bufferedBytes()).isZero();
    assertThat(proxy.bodyBudget().uploads()).isZero();
    assertIdle();
  }

  // ---- 2. a client that never reads --------------------------------------------------------

  @Test
  void aClientThatNeverReadsGivesItsSlotBackAndIsCutAsStalled() throws Exception {
    // 12 MB: more than loopback's socket buffers on both sides can absorb.
    String huge =
        "{\"id\":\"c\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":"
            + "{\"role\":\"assistant\",\"content\":\""
            + "x".repeat(12 << 20)
            + "\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
            + "\"completion_tokens\":9}}";
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(
                                    b.toString().contains("small")
                                        ? VllmScript.COMPLETION
                                        : huge)));
    startProxy(
        config(
            port,
            1,
            "    queue: {max: 10, timeout: 30s}\n"
                + "    timeouts: {connect: 1s, first_token: 20s, idle: 20s, client_write: 8s}\n"));
    Socket reader = new Socket();
    reader.setReceiveBufferSize(4096);
    reader.connect(new InetSocketAddress("127.0.0.1", proxy.port()));
    try {
      String body = chat("huge", false);
      reader
          .getOutputStream()
          .write(
              (head(body.getBytes(StandardCharsets.UTF_8).length, "") + body)
                  .getBytes(StandardCharsets.UTF_8));
      // Generation is over and the response sits unread: the slot is already free (before the
      // fix it stayed in use until the client had read everything, and the next request waited).
      Awaitility.await()
          .atMost(Duration.ofSeconds(20))
          .until(() -> proxy.bodyBudget().bufferedBytes() > 12 << 20 && proxy.inFlight() == 1);
      // Well before client_write (8 s) could end the request and free the slot that way.
      Awaitility.await()
          .atMost(Duration.ofSeconds(4))
          .until(() -> proxy.slotPools().get("default").inUse() == 0);
      Response next = call("/v1/chat/completions", chat("small", false));
      assertThat(next.status()).as(next.text()).isEqualTo(200);
      // The stalled client is cut after client_write, and its socket really closed: it reads the
      // bytes that were in flight, then the end of the stream.
      Finished stalled =
          Awaitility.await()
              .atMost(Duration.ofSeconds(20))
              .until(
                  () ->
                      finished.stream()
                          .filter(f -> "client_stalled".equals(f.errorType()))
                          .findFirst(),
                  java.util.Optional::isPresent)
              .get();
      assertThat(stalled.outcome()).isEqualTo("cancelled");
      assertThat(stalled.phaseMs(io.phasemeter.proxy.pipeline.Phase.GENERATION)).isPositive();
      reader.setSoTimeout(10_000);
      InputStream in = reader.getInputStream();
      byte[] buf = new byte[1 << 16];
      long read = 0;
      try {
        int n;
        while ((n = in.read(buf)) >= 0) {
          read += n;
        }
      } catch (java.net.SocketException e) {
        // Reset: closed all the same.
      }
      assertThat(read).as("the client never got the whole response").isLessThan(12L << 20);
    } finally {
      reader.close();
    }
    assertIdle();
  }

  // ---- 3. an error event mid-stream ---------------------------------------------------------

  @Test
  void anErrorEventMidStreamIsRelayedAsItCameAndTheRequestFails() throws Exception {
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          if (b.toString().contains("\"stream\":true")) {
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(
                                    VllmScript.ROLE
                                        + VllmScript.content("a")
                                        + FaultStormTest.ERROR_EVENT
                                        + VllmScript.DONE);
                          } else {
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(
                                    "{\"error\":{\"message\":\"boom\",\"type\":\"BadRequestError\","
                                        + "\"param\":null,\"code\":400}}");
                          }
                        }));
    startProxy(config(port, 4, null));
    Response streamed = call("/v1/chat/completions", chat("hi", true));
    assertThat(streamed.status()).isEqualTo(200);
    assertThat(streamed.text()).contains(FaultStormTest.ERROR_EVENT).endsWith(VllmScript.DONE);
    Response whole = call("/v1/chat/completions", chat("hi", false));
    assertThat(whole.text()).contains("BadRequestError");

    List<Finished> done = awaitFinished(2);
    assertThat(done).allMatch(f -> f.outcome().equals("upstream_error"));
    assertThat(done).allMatch(f -> f.errorType().equals("upstream_error"));
    List<SpanData> all = awaitRoots(2);
    AttributeKey<String> upstreamType = AttributeKey.stringKey("llm.upstream.error_type");
    assertThat(
            all.stream()
                .filter(s -> s.getName().equals("inference.generate"))
                .map(s -> s.getAttributes().get(upstreamType)))
        .containsExactlyInAnyOrder("InternalServerError", "BadRequestError");
    String metrics = admin("/metrics").text();
    assertThat(metrics).contains("outcome=\"upstream_error\"");
    assertThat(metrics).doesNotContain("outcome=\"success\"");
    assertIdle();
  }

  @Test
  void anUpstreamErrorTypeThatIsNotAKnownOneNeverReachesTheSpans() throws Exception {
    String canary = "CANARY-7f3a9c-secret";
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(
                                    VllmScript.ROLE
                                        + "data: {\"error\":{\"message\":\""
                                        + canary
                                        + "\",\"type\":\""
                                        + canary
                                        + "\"}}\n\n"
                                        + VllmScript.DONE)));
    startProxy(config(port, 4, null));
    assertThat(call("/v1/chat/completions", chat("hi", true)).status()).isEqualTo(200);
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("upstream_error");
    for (SpanData span : awaitRoots(1)) {
      assertThat(span.toString()).doesNotContain(canary);
    }
    assertThat(
            awaitRoots(1).stream()
                .map(s -> s.getAttributes().get(AttributeKey.stringKey("llm.upstream.error_type"))))
        .contains("other");
  }

  // ---- 4. tokens per minute ------------------------------------------------------------------

  /** An upstream whose every stream reports {@code completion} tokens of usage. */
  private int usageBackend(long completion, AtomicInteger served) throws Exception {
    String usage =
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
            + "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":"
            + completion
            + "}}\n\n";
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b -> {
                      served.incrementAndGet();
                      req.response()
                          .setChunked(true)
                          .putHeader("content-type", "text/event-stream")
                          .end(
                              VllmScript.ROLE
                                  + VllmScript.content("a")
                                  + VllmScript.FINISH
                                  + usage
                                  + VllmScript.DONE);
                    }));
  }

  private static String streamWithout(String extra) {
    return "{\"model\":\"sim-llama\",\"stream\":true,\"messages\":[{\"role\":\"user\","
        + "\"content\":\"hi\"}]"
        + extra
        + "}";
  }

  @Test
  void sixConcurrentStreamsWithoutMaxTokensCannotOvershootTheTokensPerMinute() throws Exception {
    AtomicInteger served = new AtomicInteger();
    startProxy(
        withKey(config(usageBackend(4000, served), 8, "    default_max_tokens: 4096\n"), 0, 5000));
    List<Future<Response>> calls = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      calls.add(callAsync(HttpMethod.POST, "/v1/chat/completions", streamWithout(""), bearer()));
    }
    int ok = 0;
    long used = 0;
    for (Future<Response> f : calls) {
      Response r = f.await(10, TimeUnit.SECONDS);
      if (r.status() == 200) {
        ok++;
        used += 4005;
      } else {
        assertThat(r.status()).isEqualTo(429);
        assertThat(r.text()).contains("tokens per minute");
      }
    }
    // Before: all six got 200 and used 24,030 tokens of a 5,000 limit.
    assertThat(ok).isEqualTo(1);
    assertThat(served).hasValue(1);
    assertThat(used).isLessThanOrEqualTo(5000);
    // n choices multiply the output estimate: 6 × 1,000 > 5,000 can never pass.
    Response many =
        call(
            HttpMethod.POST,
            "/v1/chat/completions",
            streamWithout(",\"max_tokens\":1000,\"n\":6"),
            bearer());
    assertThat(many.status()).isEqualTo(429);
    assertThat(many.text()).contains("Request too large");
    // The larger of max_tokens and max_completion_tokens bounds the output.
    Response both =
        call(
            HttpMethod.POST,
            "/v1/chat/completions",
            streamWithout(",\"max_tokens\":1,\"max_completion_tokens\":6000"),
            bearer());
    assertThat(both.status()).isEqualTo(429);
    assertThat(both.text()).contains("Request too large");
    // Completions with a list of prompts generate for each.
    Response prompts =
        call(
            HttpMethod.POST,
            "/v1/completions",
            "{\"model\":\"sim-llama\",\"prompt\":[\"a\",\"b\",\"c\"],\"max_tokens\":2000}",
            bearer());
    assertThat(prompts.status()).isEqualTo(429);
    assertThat(prompts.text()).contains("Request too large");
    assertIdle();
  }

  @Test
  void aKeyInDebtAfterAnOverrunIsRefusedUntilItRefills() throws Exception {
    AtomicInteger served = new AtomicInteger();
    // The engine generated far past the pool's default estimate (no max_tokens was sent).
    startProxy(
        withKey(config(usageBackend(9000, served), 8, "    default_max_tokens: 1000\n"), 0, 5000));
    Response first = call(HttpMethod.POST, "/v1/chat/completions", streamWithout(""), bearer());
    assertThat(first.status()).isEqualTo(200);
    awaitFinished(1);
    // Settled at 9,005 against a bucket of 5,000: in debt, even a one-token request waits.
    Response small =
        call(HttpMethod.POST, "/v1/chat/completions", streamWithout(",\"max_tokens\":1"), bearer());
    assertThat(small.status()).isEqualTo(429);
    assertThat(small.headers().get("retry-after")).isNotNull();
    assertThat(served).hasValue(1);
  }

  // ---- 5. absurd usage numbers ---------------------------------------------------------------

  @Test
  void absurdUsageNumbersNeitherLeakTheRequestNorStallTheDrain() throws Exception {
    AtomicInteger served = new AtomicInteger();
    startProxy(withKey(config(usageBackend(Long.MAX_VALUE, served), 8, null), 0, 1_000_000));
    Response r = call(HttpMethod.POST, "/v1/chat/completions", streamWithout(""), bearer());
    assertThat(r.status()).isEqualTo(200);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outputTokens()).as("usage no engine could report is unknown").isEqualTo(-1);
    assertIdle();
    assertThat(admin("/metrics").text())
        .containsPattern("(?m)^llm_requests_in_flight\\{[^}]*\\} 0");
    PhasemeterProxy.DrainResult drained =
        proxy.drain(Duration.ofSeconds(20)).await(5, TimeUnit.SECONDS);
    assertThat(drained.inFlightAtStart()).isZero();
    assertThat(drained.cancelled()).isZero();
  }

  // ---- 6. absurd numeric fields --------------------------------------------------------------

  @Test
  void absurdNumbersAre400NamingTheFieldAndChargeNoRequest() throws Exception {
    startProxy(withKey(config(echoBackend(), 4, null), 2, 0));
    String[][] bad = {
      {",\"max_tokens\":9223372036854775807", "max_tokens"},
      {",\"max_completion_tokens\":-1", "max_completion_tokens"},
      {",\"n\":0", "n"},
      {",\"n\":100000", "n"},
      {",\"temperature\":1e400", "temperature"},
    };
    for (String[] b : bad) {
      String body =
          "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
              + b[0]
              + "}";
      Response r = call(HttpMethod.POST, "/v1/chat/completions", body, bearer());
      assertThat(r.status()).as(b[1] + ": " + r.text()).isEqualTo(400);
      JsonObject error = new JsonObject(r.text()).getJsonObject("error");
      assertThat(error.getString("type")).isEqualTo("invalid_request_error");
      assertThat(error.getString("param")).isEqualTo(b[1]);
    }
    // Five refused requests never ran: the key's two requests a minute are both still there.
    for (int i = 0; i < 2; i++) {
      Response ok = call(HttpMethod.POST, "/v1/chat/completions", chat("ok", false), bearer());
      assertThat(ok.status()).as(ok.text()).isEqualTo(200);
    }
    Response third = call(HttpMethod.POST, "/v1/chat/completions", chat("ok", false), bearer());
    assertThat(third.status()).isEqualTo(429);
    assertIdle();
  }

  // ---- 7. request framing ----------------------------------------------------------------------

  @Test
  void contentLengthWithTransferEncodingIsAnsweredThenTheConnectionClosed() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    String body = chat("framed twice", false);
    String chunked =
        Integer.toHexString(body.getBytes(StandardCharsets.UTF_8).length)
            + "\r\n"
            + body
            + "\r\n0\r\n\r\n";
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      // A request pipelined behind it in the same write is never answered.
      raw.send(
          head(5, "Transfer-Encoding: chunked\r\n")
              + chunked
              + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
      assertThat(raw.open).as("the connection is closed after the answer").isFalse();
    }
    assertThat(got).startsWith("HTTP/1.1 200");
    assertThat(got.toLowerCase()).contains("connection: close");
    assertThat(got.split("HTTP/1.1 ", -1)).as(got).hasSize(2);
    assertThat(upstreamHeaders).hasSize(1);
    assertIdle();
  }

  @Test
  void aTransferEncodingOtherThanChunkedIsRefusedAndTheConnectionClosed() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Transfer-Encoding: gzip\r\n\r\n"
              + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
      assertThat(raw.open).isFalse();
    }
    assertThat(got).startsWith("HTTP/1.1 501");
    assertThat(got).contains("\"code\":\"unsupported_transfer_encoding\"");
    // The smuggled request after it was never answered.
    assertThat(got.split("HTTP/1.1 ", -1)).hasSize(2);
    assertThat(upstreamHeaders).isEmpty();
    assertIdle();
  }

  // ---- 8. forwarding ---------------------------------------------------------------------------

  @Test
  void hopByHopAndClaimedOriginsNeverReachTheUpstream() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    String body = chat("hi", false);
    String got;
    // Raw bytes: an HTTP client library sets Connection itself.
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(
          head(
                  body.getBytes(StandardCharsets.UTF_8).length,
                  "Connection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: internal\r\n"
                      + "X-Forwarded-For: 6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\n"
                      + "Forwarded: for=6.6.6.6;proto=https\r\n")
              + body);
      got = raw.readUntil(s -> s.contains("chatcmpl"), Duration.ofSeconds(5));
    }
    assertThat(got).startsWith("HTTP/1.1 200");
    MultiMap up = upstreamHeaders.get(0);
    assertThat(up.contains("x-secret-hop")).isFalse();
    assertThat(up.contains("x-real-ip")).isFalse();
    assertThat(up.getAll("x-forwarded-for")).containsExactly("127.0.0.1");
    assertThat(up.get("x-forwarded-proto")).isEqualTo("http");
    assertThat(up.get("x-forwarded-host")).isEqualTo("x");
    assertThat(up.getAll("forwarded")).containsExactly("for=127.0.0.1;host=x;proto=http");
  }

  @Test
  void aTrustedPeerKeepsItsForwardingHeadersAndThisHopIsAppended() throws Exception {
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "forwarded: {trusted: [127.0.0.0/8]}\n"
                + "pools:\n"
                + "  - name: default\n"
                + "    models: [sim-llama]\n"
                + "    upstreams: [http://127.0.0.1:"
                + echoBackend()
                + "]\n"
                + "    health: {path: null}\n",
            "trusted.yaml"));
    MultiMap h =
        MultiMap.caseInsensitiveMultiMap()
            .add("x-forwarded-for", "203.0.113.7")
            .add("x-forwarded-proto", "https")
            .add("forwarded", "for=203.0.113.7;proto=https");
    assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("hi", false), h).status())
        .isEqualTo(200);
    MultiMap up = upstreamHeaders.get(0);
    assertThat(up.get("x-forwarded-for")).isEqualTo("203.0.113.7, 127.0.0.1");
    assertThat(up.get("x-forwarded-proto")).isEqualTo("https");
    assertThat(up.get("forwarded")).startsWith("for=203.0.113.7;proto=https, for=127.0.0.1;");
  }

  @Test
  void aCompressedBodyIs415AndNeverForwarded() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    MultiMap h = MultiMap.caseInsensitiveMultiMap().add("content-encoding", "gzip");
    Response r = call(HttpMethod.POST, "/v1/chat/completions", chat("hi", false), h);
    assertThat(r.status()).isEqualTo(415);
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("code"))
        .isEqualTo("unsupported_media_type");
    assertThat(upstreamHeaders).isEmpty();
    assertIdle();
  }

  @Test
  void aNonFiniteNumberIsRefusedNotRewrittenAsAString() throws Exception {
    startProxy(config(echoBackend(), 4, null));
    Response r =
        call(
            "/v1/chat/completions",
            "{\"model\":\"sim-llama\",\"stream\":true,\"temperature\":1e400,"
                + "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    assertThat(r.status()).isEqualTo(400);
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("param"))
        .isEqualTo("temperature");
    Response nested =
        call(
            "/v1/chat/completions",
            "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"x\","
                + "\"w\":[1,-1e400]}]}");
    assertThat(nested.status()).isEqualTo(400);
    assertThat(new JsonObject(nested.text()).getJsonObject("error").getString("param"))
        .isEqualTo("messages[0].w[1]");
    assertThat(upstreamHeaders).isEmpty();
  }
}
