package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import io.opentelemetry.api.trace.SpanId;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.HostileInputTest.Raw;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.NetServer;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the proxy's behaviour must agree with its errors table and with the standards it speaks
 * (RFC 9112's chunked framing, W3C Trace Context), each reproduced through real sockets: a stream
 * that is no event stream, a compressed one, chunked framing the decoder refuses mid-body,
 * duplicated {@code traceparent} and {@code tracestate}, a duplicated {@code x-priority}. Rows of
 * {@code docs/reliability.md}, round 2.
 */
class WireConformanceTest extends ProxyTestBase {

  @TempDir Path dir;

  /** Headers of each upstream request, in arrival order. */
  private final List<MultiMap> upstreamHeaders = new CopyOnWriteArrayList<>();

  private static final String JSON_BODY =
      "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
          + "\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}";

  private static void assertError(Response r, int status, String code) {
    assertThat(r.status()).as(r.text()).isEqualTo(status);
    assertThat(r.headers().get("content-type")).isEqualTo("application/json");
    assertThat(new JsonObject(r.text()).getJsonObject("error").getString("code")).isEqualTo(code);
  }

  // ---- the upstream's side: what is not an event stream is malformed, not a disconnect ----------

  /** An upstream that answers 200 {@code text/event-stream} with a JSON object as its body. */
  private int jsonAsEventStream(boolean chunked) throws Exception {
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b ->
                        req.response()
                            .setChunked(chunked)
                            .putHeader("content-type", "text/event-stream")
                            .end(JSON_BODY)));
  }

  @Test
  void aStreamWhoseBodyIsJsonIs502MalformedHoweverItIsFramed() throws Exception {
    // Content-Length, chunked, and a body that ends when the upstream closes (no framing at all).
    NetServer unframed =
        vertx
            .createNetServer()
            .connectHandler(
                so ->
                    so.handler(
                        b ->
                            so.end(
                                Buffer.buffer(
                                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                        + "connection: close\r\n\r\n"
                                        + JSON_BODY))))
            .listen(0, "127.0.0.1")
            .await(5, TimeUnit.SECONDS);
    for (int port :
        List.of(jsonAsEventStream(false), jsonAsEventStream(true), unframed.actualPort())) {
      startProxy(config(port, 2, null));
      assertError(
          call("/v1/chat/completions", chat("x", true)), 502, "upstream_malformed_response");
      assertIdle();
      proxy.close().await(5, TimeUnit.SECONDS);
    }
    assertThat(awaitFinished(3))
        .extracting(Finished::outcome, Finished::errorType)
        .containsOnly(tuple("upstream_error", "upstream_malformed_response"));
  }

  /**
   * An upstream that starts a stream, then ends its response ({@code cut}: drops the connection).
   */
  private int startsThenStops(boolean cut) throws Exception {
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b -> {
                      var out =
                          req.response()
                              .setChunked(true)
                              .putHeader("content-type", "text/event-stream");
                      out.write(VllmScript.ROLE + VllmScript.content("a"));
                      // The last chunk says the response is complete; a close says nothing.
                      vertx.setTimer(
                          30,
                          t -> {
                            if (cut) {
                              req.connection().close();
                            } else {
                              out.end();
                            }
                          });
                    }));
  }

  @Test
  void aStreamEndedByItsFramingBeforeDoneIsMalformedACutOneDisconnected() throws Exception {
    startProxy(config(startsThenStops(false), 2, null));
    Response ended = call("/v1/chat/completions", chat("x", true));
    assertThat(ended.status()).isEqualTo(200);
    assertThat(ended.text())
        .startsWith(VllmScript.ROLE + VllmScript.content("a"))
        .contains("\"code\":\"upstream_malformed_response\"")
        .doesNotContain("data: [DONE]");
    assertIdle();
    proxy.close().await(5, TimeUnit.SECONDS);
    startProxy(config(startsThenStops(true), 2, null));
    Response cut = call("/v1/chat/completions", chat("x", true));
    assertThat(cut.text()).contains("\"code\":\"upstream_disconnected\"");
    assertThat(awaitFinished(2))
        .extracting(Finished::errorType)
        .containsExactly("upstream_malformed_response", "upstream_disconnected");
    assertIdle();
  }

  /**
   * llama.cpp's server reports a failure mid-stream as {@code data: {"error": {...}}} (older
   * versions: an {@code error:} field), then ends its response without {@code [DONE]}: the
   * upstream's error, relayed as it came, not a malformed stream.
   */
  @Test
  void llamaCppsErrorEventThenAnEndIsTheUpstreamsError() throws Exception {
    String json = "{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}";
    for (String errorEvent :
        new String[] {"data: {\"error\":" + json + "}\n\n", "error: " + json + "\n\n"}) {
      int port =
          startBackend(
              req ->
                  req.body()
                      .onSuccess(
                          b ->
                              req.response()
                                  .setChunked(true)
                                  .putHeader("content-type", "text/event-stream")
                                  .end(VllmScript.ROLE + VllmScript.content("a") + errorEvent)));
      startProxy(config(port, 2, null));
      Response r = call("/v1/chat/completions", chat("x", true));
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.text())
          .as(errorEvent)
          .contains(errorEvent)
          .contains("\"code\":\"upstream_error\"")
          .doesNotContain("data: [DONE]");
      assertThat(awaitFinished(1))
          .extracting(Finished::errorType)
          .containsExactly("upstream_error");
      assertIdle();
      proxy.close().await(5, TimeUnit.SECONDS);
      finished.clear();
    }
  }

  @Test
  void aCompressedResponseIs502MalformedAndTheProxyAsksForIdentity() throws Exception {
    byte[] stream = gzip(VllmScript.stream(false));
    byte[] whole = gzip(VllmScript.COMPLETION);
    int port =
        startBackend(
            req -> {
              upstreamHeaders.add(MultiMap.caseInsensitiveMultiMap().addAll(req.headers()));
              req.body()
                  .onSuccess(
                      b -> {
                        boolean streamed = b.toString().contains("\"stream\":true");
                        req.response()
                            .putHeader("content-encoding", "gzip")
                            .putHeader(
                                "content-type", streamed ? "text/event-stream" : "application/json")
                            .end(Buffer.buffer(streamed ? stream : whole));
                      });
            });
    startProxy(config(port, 2, null));
    assertError(call("/v1/chat/completions", chat("x", true)), 502, "upstream_malformed_response");
    assertError(call("/v1/chat/completions", chat("x", false)), 502, "upstream_malformed_response");
    assertThat(upstreamHeaders)
        .allSatisfy(h -> assertThat(h.getAll("accept-encoding")).containsExactly("identity"));
    assertThat(awaitFinished(2))
        .extracting(Finished::errorType)
        .containsOnly("upstream_malformed_response");
    assertIdle();
  }

  private static byte[] gzip(String s) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (GZIPOutputStream z = new GZIPOutputStream(bytes)) {
      z.write(s.getBytes(StandardCharsets.UTF_8));
    }
    return bytes.toByteArray();
  }

  // ---- the client's side: chunked framing the decoder refuses mid-body --------------------------

  private static final List<String> BAD_CHUNKS =
      List.of(
          "-1\r\nx\r\n0\r\n\r\n",
          "11111111111111111\r\nx\r\n0\r\n\r\n",
          // Wraps to 0 in Netty's int: read as the last chunk, the body would end here, cut short.
          "100000000\r\n\r\n",
          "5\nhello\n0\n\n",
          "5;" + "e".repeat(100_000) + "\r\nhello\r\n0\r\n\r\n");

  @Test
  void badChunkedFramingMidBodyIs400InvalidRequestThenClosed() throws Exception {
    startProxy(config(startVllmBackend(upstreamHeaders), 2, null));
    for (String path : List.of("/v1/chat/completions", "/v1/anything")) {
      for (String bad : BAD_CHUNKS) {
        String got;
        try (Raw raw = new Raw(proxy.port())) {
          String first = "{\"model\":\"sim-llama\",";
          raw.send(
              "POST "
                  + path
                  + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + "Transfer-Encoding: chunked\r\n\r\n"
                  + Integer.toHexString(first.length())
                  + "\r\n"
                  + first
                  + "\r\n"
                  + bad);
          got = raw.readUntilClosed(Duration.ofSeconds(10));
          assertThat(raw.open).as(path + " " + label(bad) + ": closed after the answer").isFalse();
        }
        assertThat(got).as(path + " " + label(bad)).startsWith("HTTP/1.1 400");
        assertThat(got).as(path + " " + label(bad)).contains("\"code\":\"invalid_request\"");
        assertThat(got.toLowerCase()).contains("connection: close");
      }
    }
    assertThat(awaitFinished(2 * BAD_CHUNKS.size()))
        .extracting(Finished::outcome, Finished::errorType)
        .containsOnly(tuple("client_error", "invalid_request"));
    assertIdle();
  }

  @Test
  void wellFormedChunkedBodiesAreReadWhateverTheirSizesPiecesAndTrailers() throws Exception {
    startProxy(config(startVllmBackend(upstreamHeaders), 2, null));
    String body = chat("chunked", false);
    // Sizes of 21 digits with leading zeros (a value that fits is no overflow), extensions, a chunk
    // per 7 bytes, a trailer; sent 3 bytes at a time, so that sizes and line ends straddle reads.
    StringBuilder wire =
        new StringBuilder(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < body.length(); i += 7) {
      String piece = body.substring(i, Math.min(body.length(), i + 7));
      wire.append("0".repeat(20))
          .append(Integer.toHexString(piece.length()))
          .append(";ext=\"a\"\r\n")
          .append(piece)
          .append("\r\n");
    }
    wire.append("0\r\nx-trailer: 1\r\n\r\n");
    byte[] bytes = wire.toString().getBytes(StandardCharsets.US_ASCII);
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      for (int i = 0; i < bytes.length; i += 3) {
        raw.send(Arrays.copyOfRange(bytes, i, Math.min(bytes.length, i + 3)));
      }
      got = raw.readUntil(s -> s.contains("chatcmpl"), Duration.ofSeconds(10));
    }
    assertThat(got).startsWith("HTTP/1.1 200");
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("success");
    assertIdle();
  }

  private static String label(String bad) {
    return bad.length() > 24
        ? bad.substring(0, 24) + "…"
        : bad.replace("\r", "\\r").replace("\n", "\\n");
  }

  // ---- trace context --------------------------------------------------------------------------

  private static final String TRACE_A = "12345678901234567890123456789011";
  private static final String TRACE_B = "12345678901234567890123456789012";

  @Test
  void twoTraceparentHeadersRestartTheTrace() throws Exception {
    startProxy(config(startVllmBackend(upstreamHeaders), 2, null));
    MultiMap h =
        MultiMap.caseInsensitiveMultiMap()
            .add("traceparent", "00-" + TRACE_A + "-1234567890123456-01")
            .add("traceparent", "00-" + TRACE_B + "-1234567890123456-01")
            .add("tracestate", "foo=1");
    assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h).status())
        .isEqualTo(200);
    SpanData root = StreamingRelayTest.rootOf(awaitRoots(1));
    assertThat(root.getParentSpanContext().isValid()).as("a new trace, no remote parent").isFalse();
    assertThat(root.getTraceId()).isNotIn(TRACE_A, TRACE_B);
    String up = upstreamHeaders.get(0).get("traceparent");
    assertThat(up).startsWith("00-" + root.getTraceId() + "-");
    // No valid traceparent: its tracestate is not carried on (W3C: tracestate needs a parent).
    assertThat(upstreamHeaders.get(0).contains("tracestate")).isFalse();
  }

  @Test
  void severalTracestateHeadersAreCombinedInOrderAndADuplicatedKeyDropsThem() throws Exception {
    startProxy(config(startVllmBackend(upstreamHeaders), 2, null));
    String parent = "00-" + TRACE_B + "-1234567890123456-01";
    MultiMap combined =
        MultiMap.caseInsensitiveMultiMap()
            .add("traceparent", parent)
            .add("tracestate", "foo=1,bar=2")
            .add("tracestate", "")
            .add("tracestate", "rojo=1,congo=2")
            .add("tracestate", "baz=3");
    MultiMap duplicated =
        MultiMap.caseInsensitiveMultiMap()
            .add("traceparent", parent)
            .add("tracestate", "foo=1")
            .add("tracestate", "foo=2");
    for (MultiMap h : List.of(combined, duplicated)) {
      assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h).status())
          .isEqualTo(200);
    }
    assertThat(upstreamHeaders.get(0).get("traceparent")).startsWith("00-" + TRACE_B + "-");
    assertThat(upstreamHeaders.get(0).getAll("tracestate"))
        .containsExactly("foo=1,bar=2,rojo=1,congo=2,baz=3");
    assertThat(upstreamHeaders.get(1).get("traceparent")).startsWith("00-" + TRACE_B + "-");
    assertThat(upstreamHeaders.get(1).contains("tracestate")).isFalse();
    assertThat(SpanId.isValid(upstreamHeaders.get(1).get("traceparent").substring(36, 52)))
        .isTrue();
  }

  // ---- x-priority -----------------------------------------------------------------------------

  @Test
  void aDuplicatedPriorityHeaderGoesUpstreamOnceAsTheProxyUsedIt() throws Exception {
    startProxy(config(startVllmBackend(upstreamHeaders), 2, null));
    MultiMap h =
        MultiMap.caseInsensitiveMultiMap().add("x-priority", "low").add("x-priority", "high");
    assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h).status())
        .isEqualTo(200);
    Finished f = awaitFinished(1).get(0);
    assertThat(new JsonObject(proxy.records().get(f.traceId())).getString("priority"))
        .isEqualTo("low");
    assertThat(upstreamHeaders.get(0).getAll("x-priority")).containsExactly("low");
    assertIdle();
    proxy.close().await(5, TimeUnit.SECONDS);

    // A key held at normal asks for high: the next hop hears normal, as the queue did.
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: capped, sha256: \""
            + HashKeyMain.hash("sk-capped")
            + "\", priority: normal, allow_priority_header: false}\n...\n");
    startProxy(
        config(startVllmBackend(upstreamHeaders), 2, null)
            .withAuth(new ProxyConfig.Auth(true, keys.toString())));
    h =
        MultiMap.caseInsensitiveMultiMap()
            .add("authorization", "Bearer sk-capped")
            .add("x-priority", "high");
    assertThat(call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h).status())
        .isEqualTo(200);
    assertThat(upstreamHeaders.get(1).getAll("x-priority")).containsExactly("normal");
    assertIdle();
  }
}
