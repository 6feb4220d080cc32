package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Hostile and broken input on the public port, one test per row of the table in {@code
 * docs/reliability.md}. Most rows speak raw HTTP over a socket, since a well-behaved client cannot
 * send them. Each row checks the status (or a timely close), the OpenAI-style body where a body is
 * possible, the request's outcome, and that the proxy then serves a good request with nothing left
 * in flight. Limits are small so that every row ends within a few seconds: a 64 KiB body, a 500 ms
 * receive timeout, a 500 ms idle timeout.
 */
class HostileInputTest extends ProxyTestBase {
  private static final long RECEIVE_TIMEOUT_MS = 500;

  /** Header names and values each upstream request carried, in arrival order. */
  private final List<MultiMap> upstreamHeaders = new CopyOnWriteArrayList<>();

  @BeforeEach
  void start() throws Exception {
    int port = startVllmBackend(upstreamHeaders);
    ProxyConfig cfg =
        config(port, 4, "    timeouts: {connect: 1s, first_token: 2s, idle: 500ms}\n")
            .withLimits(new ProxyConfig.Limits(64 * 1024, Duration.ofMillis(RECEIVE_TIMEOUT_MS)));
    startProxy(cfg);
  }

  // ---- the body -------------------------------------------------------------------------------

  @Test
  void truncatedBodyThenTheClientHangsUpIsCancelled() throws Exception {
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(post("/v1/chat/completions", 100, Map.of()) + "{\"model\":\"sim");
      raw.socket.shutdownOutput();
      raw.readUntilClosed(Duration.ofSeconds(5));
    }
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isIn("cancelled", "client_error");
    assertStillServes(1);
  }

  @Test
  void bodyTrickledSlowerThanTheReceiveTimeoutIs408AndClosed() throws Exception {
    long start = System.nanoTime();
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(post("/v1/chat/completions", 200, Map.of()));
      Thread trickle =
          new Thread(
              () -> {
                try {
                  for (int i = 0; i < 200; i++) {
                    raw.send("x");
                    Thread.sleep(50);
                  }
                } catch (IOException | InterruptedException e) {
                  // The proxy closed the connection: what the row expects.
                }
              });
      trickle.start();
      got = raw.readUntilClosed(Duration.ofSeconds(5));
      trickle.interrupt();
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(3));
    assertOpenAiError(got, 408, "request_timeout");
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("client_error");
    assertStillServes(1);
  }

  @Test
  void headersTrickledForeverAreCutOffAndOthersAreServedMeanwhile() throws Exception {
    List<Raw> attackers = new ArrayList<>();
    try {
      for (int i = 0; i < 20; i++) {
        Raw raw = new Raw(proxy.port());
        raw.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
        attackers.add(raw);
      }
      // Another client is served while twenty connections dribble their headers.
      assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
      long start = System.nanoTime();
      for (int round = 0; round < 40 && attackers.stream().anyMatch(r -> r.open); round++) {
        for (Raw raw : attackers) {
          raw.trySend("x-slow-" + round + ": 1\r\n");
        }
        Thread.sleep(100);
      }
      assertThat(attackers).allMatch(r -> !r.open);
      assertThat(Duration.ofNanos(System.nanoTime() - start))
          .isLessThan(Duration.ofMillis(RECEIVE_TIMEOUT_MS * 6));
    } finally {
      for (Raw raw : attackers) {
        raw.close();
      }
    }
    assertStillServes(1);
  }

  @Test
  void aConnectionThatSendsNothingIsClosed() throws Exception {
    try (Raw raw = new Raw(proxy.port())) {
      long start = System.nanoTime();
      raw.readUntilClosed(Duration.ofSeconds(5));
      assertThat(raw.open).isFalse();
      assertThat(Duration.ofNanos(System.nanoTime() - start))
          .isLessThan(Duration.ofMillis(RECEIVE_TIMEOUT_MS * 6));
    }
    assertStillServes(0);
  }

  @Test
  void declaredTenGigabyteBodyIs413BeforeAByteIsRead() throws Exception {
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(post("/v1/chat/completions", 10L << 30, Map.of()));
      got = raw.readUntilClosed(Duration.ofSeconds(5));
    }
    assertOpenAiError(got, 413, "request_too_large");
    assertThat(awaitFinished(1).get(0).errorType()).isEqualTo("request_too_large");
    assertStillServes(1);
  }

  @Test
  void invalidContentLengthIs400() throws Exception {
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + "Content-Length: 12abc\r\n\r\n{}");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
    }
    assertOpenAiError(got, 400, null);
    assertStillServes(finished.size());
  }

  // ---- the head -------------------------------------------------------------------------------

  @Test
  void headersOverSixteenKibibytesAre431AndClosed() throws Exception {
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(post("/v1/chat/completions", 2, Map.of("x-big", "a".repeat(20_000))) + "{}");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
    }
    assertOpenAiError(got, 431, null);
    assertThat(upstreamHeaders).isEmpty();
    assertStillServes(0);
  }

  @Test
  void requestLineOverEightKibibytesIs414AndClosed() throws Exception {
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(post("/v1/chat/completions?" + "q".repeat(10_000), 2, Map.of()) + "{}");
      got = raw.readUntilClosed(Duration.ofSeconds(5));
    }
    assertOpenAiError(got, 414, null);
    assertStillServes(0);
  }

  @Test
  void headerInjectionNeverSplitsAnUpstreamHeader() throws Exception {
    String body = chat("x", false);
    for (String attempt :
        List.of(
            "X-Note: a\rInjected: yes\r\n", // a bare CR inside a value
            "X-Note: a\r\n Injected: yes\r\n", // obsolete line folding
            "X-Note: a\u0000Injected: yes\r\n", // NUL
            "X-Note\r\n: yes\r\n", // a name without its colon
            "X Note: a\r\n")) { // a space in the name
      try (Raw raw = new Raw(proxy.port())) {
        byte[] head =
            ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    + "Content-Type: application/json\r\nContent-Length: "
                    + body.length()
                    + "\r\n"
                    + attempt
                    + "\r\n"
                    + body)
                .getBytes(StandardCharsets.ISO_8859_1);
        raw.send(head);
        String got = raw.readUntilClosed(Duration.ofSeconds(5));
        assertThat(statusOf(got)).as(attempt).isIn(200, 400);
        if (statusOf(got) == 400) {
          assertOpenAiError(got, 400, null);
        }
      }
    }
    for (MultiMap seen : upstreamHeaders) {
      assertThat(seen.names()).noneMatch(n -> n.equalsIgnoreCase("injected"));
      for (Map.Entry<String, String> h : seen) {
        assertThat(h.getKey() + h.getValue()).doesNotContain("\r", "\n", "\u0000");
      }
    }
    assertStillServes(finished.size());
  }

  @Test
  void oversizedOrInvalidTracestateIsDroppedAndTheRequestServed() throws Exception {
    String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    StringBuilder many = new StringBuilder();
    for (int i = 0; i < 33; i++) {
      many.append(i == 0 ? "" : ",").append("v").append(i).append("=x");
    }
    List<String> states =
        List.of(
            many.toString(), // 33 members: over W3C's 32
            "a=" + "x".repeat(255) + ",b=" + "y".repeat(255) + ",c=" + "z".repeat(10), // > 512
            "%%%=not a key", // not a list member
            "k=" + "v".repeat(8_000)); // one member, half the header limit
    int n = 0;
    for (String state : states) {
      n++;
      MultiMap h =
          MultiMap.caseInsensitiveMultiMap()
              .add("traceparent", "00-" + traceId.substring(0, 30) + n + "0-00f067aa0ba902b7-01")
              .add("tracestate", state);
      Response r = call(HttpMethod.POST, "/v1/chat/completions", chat("x", false), h);
      assertThat(r.status()).as(state.substring(0, Math.min(20, state.length()))).isEqualTo(200);
    }
    for (MultiMap seen : upstreamHeaders) {
      String forwarded = seen.get("tracestate");
      assertThat(forwarded == null || forwarded.isEmpty())
          .as("tracestate forwarded upstream: " + forwarded)
          .isTrue();
    }
    List<SpanData> all = awaitRoots(states.size());
    for (SpanData root : all) {
      if (root.getKind() == SpanKind.SERVER) {
        // The traceparent itself was valid: the trace is continued, only the state dropped.
        assertThat(root.getTraceId()).startsWith(traceId.substring(0, 30));
        assertThat(root.getSpanContext().getTraceState().isEmpty()).isTrue();
      }
    }
    assertStillServes(states.size());
  }

  // ---- the protocol ---------------------------------------------------------------------------

  @Test
  void http10RequestIsAnsweredWholeAndClosed() throws Exception {
    for (boolean stream : new boolean[] {false, true}) {
      String body = chat("x", stream);
      String got;
      boolean closed;
      try (Raw raw = new Raw(proxy.port())) {
        raw.send(
            "POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                + "Content-Length: "
                + body.length()
                + "\r\n\r\n"
                + body);
        got = raw.readUntilClosed(Duration.ofSeconds(5));
        closed = !raw.open;
      }
      assertThat(closed).as("closed after the response").isTrue();
      assertThat(statusOf(got)).as(got).isEqualTo(200);
      String head = got.substring(0, got.indexOf("\r\n\r\n")).toLowerCase();
      String payload = got.substring(got.indexOf("\r\n\r\n") + 4);
      // HTTP/1.0 has no chunked encoding: the body runs to the close.
      assertThat(head).doesNotContain("transfer-encoding");
      if (stream) {
        assertThat(payload).startsWith("data: ").contains("Hel", "[DONE]");
      } else {
        assertThat(new JsonObject(payload).getString("object")).isEqualTo("chat.completion");
      }
    }
    assertThat(awaitFinished(2)).allMatch(f -> f.outcome().equals("success"));
    assertStillServes(2);
  }

  @Test
  void pipelinedRequestsAreAnsweredInOrder() throws Exception {
    String good = chat("x", false);
    String unknown = "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    String got;
    try (Raw raw = new Raw(proxy.port())) {
      raw.send(
          post("/v1/chat/completions", good.length(), Map.of())
              + good
              + post("/v1/chat/completions", unknown.length(), Map.of())
              + unknown
              + "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      got = raw.readUntilClosed(Duration.ofSeconds(10));
    }
    List<Integer> statuses = new ArrayList<>();
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("HTTP/1\\.1 (\\d{3}) ").matcher(got);
    while (m.find()) {
      statuses.add(Integer.parseInt(m.group(1)));
    }
    assertThat(statuses).as(got).containsExactly(200, 404, 200);
    assertThat(got.indexOf("chat.completion")).isLessThan(got.indexOf("model_not_found"));
    assertThat(got.indexOf("model_not_found")).isLessThan(got.indexOf("\"object\":\"list\""));
    assertStillServes(2);
  }

  // ---- helpers --------------------------------------------------------------------------------

  /** A good request succeeds and nothing is left in flight; {@code before} records came first. */
  private void assertStillServes(int before) throws Exception {
    Response r = call("/v1/chat/completions", chat("still serving", false));
    assertThat(r.status()).as(r.text()).isEqualTo(200);
    awaitFinished(before + 1);
    assertIdle();
  }

  private static String post(String uri, long length, Map<String, String> headers) {
    StringBuilder s =
        new StringBuilder("POST ")
            .append(uri)
            .append(" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n");
    headers.forEach((k, v) -> s.append(k).append(": ").append(v).append("\r\n"));
    return s.append("Content-Length: ").append(length).append("\r\n\r\n").toString();
  }

  private static int statusOf(String response) {
    assertThat(response).as("a response").startsWith("HTTP/1.");
    return Integer.parseInt(response.substring(9, 12));
  }

  /** The response is {@code status} with an OpenAI-style body (and {@code code} when not null). */
  private static void assertOpenAiError(String response, int status, String code) {
    assertThat(statusOf(response)).as(response).isEqualTo(status);
    String head = response.substring(0, response.indexOf("\r\n\r\n")).toLowerCase();
    assertThat(head).contains("content-type: application/json");
    JsonObject error =
        new JsonObject(response.substring(response.indexOf("\r\n\r\n") + 4)).getJsonObject("error");
    assertThat(error.getString("message")).isNotBlank();
    assertThat(error.getString("type")).isNotBlank();
    if (code != null) {
      assertThat(error.getString("code")).isEqualTo(code);
    }
  }

  /** One raw TCP connection to the proxy, spoken to in bytes. */
  static final class Raw implements AutoCloseable {
    final Socket socket;
    private final OutputStream out;
    private final InputStream in;
    volatile boolean open = true;

    Raw(int port) throws IOException {
      socket = new Socket("127.0.0.1", port);
      socket.setTcpNoDelay(true);
      out = socket.getOutputStream();
      in = socket.getInputStream();
    }

    void send(String s) throws IOException {
      send(s.getBytes(StandardCharsets.UTF_8));
    }

    synchronized void send(byte[] b) throws IOException {
      out.write(b);
      out.flush();
    }

    /** Sends unless the proxy has closed the connection; notices the close. */
    void trySend(String s) {
      if (!open) {
        return;
      }
      try {
        send(s);
        socket.setSoTimeout(1);
        int b = in.read();
        if (b < 0) {
          open = false;
        }
      } catch (SocketTimeoutException e) {
        // Still open, nothing to read.
      } catch (IOException e) {
        open = false;
      }
    }

    /** Reads until the proxy closes the connection or {@code max} passes; returns what came. */
    String readUntilClosed(Duration max) throws IOException {
      return readUntil(s -> false, max);
    }

    String readUntil(Predicate<String> enough, Duration max) throws IOException {
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      long deadline = System.nanoTime() + max.toNanos();
      byte[] buf = new byte[8192];
      while (System.nanoTime() < deadline) {
        socket.setSoTimeout((int) Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
        int n;
        try {
          n = in.read(buf);
        } catch (SocketTimeoutException e) {
          break;
        } catch (IOException e) {
          open = false;
          break;
        }
        if (n < 0) {
          open = false;
          break;
        }
        got.write(buf, 0, n);
        if (enough.test(got.toString(StandardCharsets.UTF_8))) {
          break;
        }
      }
      return got.toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }
}
