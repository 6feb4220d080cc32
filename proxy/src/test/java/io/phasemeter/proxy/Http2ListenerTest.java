package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * HTTP/2 to clients ({@code listen.http2}), over h2c with prior knowledge: each stream is one
 * request, measured as over HTTP/1.1; a reset stream frees its slot at once; a connection that
 * never finishes its preface is closed by the receive timeout. The listener's protocol lines are
 * {@link #LISTEN}: a TLS variant changes that line (and the client's scheme) only.
 */
class Http2ListenerTest extends ProxyTestBase {
  /** The listener under test: h2c, a short receive timeout for the slowloris case. */
  private static final String LISTEN =
      "listen: {host: 127.0.0.1, port: 0, http2: true, http2_max_concurrent_streams: 64}\n"
          + "limits: {receive_timeout: 1s}\n";

  private ProxyConfig h2Config(int upstreamPort, int slots) {
    return h2Config(upstreamPort, slots, LISTEN);
  }

  private ProxyConfig h2Config(int upstreamPort, int slots, String listen) {
    String yaml = ProxyTestBase.yaml(upstreamPort, "    slots: " + slots + "\n");
    yaml = yaml.replace("listen: {host: 127.0.0.1, port: 0}\n", "") + listen;
    return io.phasemeter.proxy.config.ConfigLoader.parse(yaml, "test.yaml");
  }

  private static final String CHAT = "/v1/chat/completions";

  private HttpClient h2Client() {
    return vertx.createHttpClient(
        new HttpClientOptions()
            .setProtocolVersion(HttpVersion.HTTP_2)
            .setHttp2ClearTextUpgrade(false)
            .setHttp2MultiplexingLimit(100),
        new PoolOptions().setHttp2MaxSize(1));
  }

  @Test
  void curlWithPriorKnowledgeStreamsAChatCompletionOverH2c() throws Exception {
    assumeTrue(
        System.getenv("CI") != null || curlHasHttp2(), "curl with HTTP/2 is not installed here");
    startProxy(h2Config(startVllmBackend(new java.util.concurrent.CopyOnWriteArrayList<>()), 4));
    Path body = Files.createTempFile("h2", ".json");
    Files.writeString(body, chat("hello", true));
    Process curl =
        new ProcessBuilder(
                "curl",
                "-sS",
                "-i",
                "--http2-prior-knowledge",
                "-H",
                "content-type: application/json",
                "--data-binary",
                "@" + body,
                "http://127.0.0.1:" + proxy.port() + "/v1/chat/completions")
            .redirectErrorStream(true)
            .start();
    assertThat(curl.waitFor(10, TimeUnit.SECONDS)).isTrue();
    String out = new String(curl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    Files.deleteIfExists(body);
    assertThat(curl.exitValue()).as(out).isZero();
    assertThat(out).startsWith("HTTP/2 200");
    assertThat(out.toLowerCase()).contains("server-timing:").doesNotContain("connection:");
    assertThat(out).contains("data: [DONE]");
    ProxyTestBase.Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.stream()).isTrue();
    assertThat(root(awaitRoots(1)).getAttributes().get(SpanAttributes.NETWORK_PROTOCOL_VERSION))
        .isEqualTo("2");
    assertIdle();
  }

  @Test
  void twentyStreamsOnOneConnectionAreTwentyRequestsAndAResetFreesItsSlotAtOnce() throws Exception {
    Promise<Void> release = Promise.promise();
    AtomicInteger upstreamCancelled = new AtomicInteger();
    int upstream =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          var resp = req.response();
                          resp.setChunked(true).putHeader("content-type", "text/event-stream");
                          resp.closeHandler(v -> upstreamCancelled.incrementAndGet());
                          resp.write(VllmScript.ROLE);
                          release.future().onComplete(v -> resp.end(VllmScript.stream(false)));
                        }));
    startProxy(h2Config(upstream, 32));
    HttpClient h2 = h2Client();
    List<HttpClientRequest> requests = new ArrayList<>();
    List<Future<Integer>> statuses = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      HttpClientRequest req =
          onClientContext(
                  () ->
                      h2.request(
                          new RequestOptions()
                              .setMethod(HttpMethod.POST)
                              .setHost("127.0.0.1")
                              .setPort(proxy.port())
                              .setURI("/v1/chat/completions")
                              .putHeader("content-type", "application/json")))
              .await(5, TimeUnit.SECONDS);
      requests.add(req);
      Promise<Integer> status = Promise.promise();
      statuses.add(status.future());
      req.response()
          .onSuccess(resp -> resp.body().onComplete(b -> status.tryComplete(resp.statusCode())))
          .onFailure(status::tryFail);
      req.end(chat("stream " + i, true));
    }
    SlotPool slots = proxy.slotPools().get("default");
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> slots.inUse() == 20);
    assertThat(requests.stream().map(r -> r.connection()).distinct().count())
        .as("one connection")
        .isEqualTo(1);

    requests.get(7).reset();
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> slots.inUse() == 19);
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> upstreamCancelled.get() == 1);
    assertThat(finished).hasSize(1);
    assertThat(finished.get(0).outcome()).isEqualTo("cancelled");

    release.complete();
    for (int i = 0; i < 20; i++) {
      if (i != 7) {
        assertThat(statuses.get(i).await(10, TimeUnit.SECONDS)).isEqualTo(200);
      }
    }
    List<ProxyTestBase.Finished> all = awaitFinished(20);
    assertThat(all.stream().filter(f -> f.outcome().equals("success")).count()).isEqualTo(19);
    for (ProxyTestBase.Finished f : all) {
      if (f.outcome().equals("success")) {
        assertThat(f.phaseMs(io.phasemeter.proxy.pipeline.Phase.GENERATION)).isPositive();
        assertThat(f.rootNanos()).isPositive();
      }
    }
    List<SpanData> roots =
        awaitRoots(20).stream().filter(s -> !s.getParentSpanContext().isValid()).toList();
    assertThat(roots)
        .allSatisfy(
            r ->
                assertThat(r.getAttributes().get(SpanAttributes.NETWORK_PROTOCOL_VERSION))
                    .isEqualTo("2"));
    assertIdle();
    h2.close();
  }

  @Test
  void aConnectionThatSendsHalfAPrefaceIsClosedByTheReceiveTimeout() throws Exception {
    startProxy(h2Config(startVllmBackend(new java.util.concurrent.CopyOnWriteArrayList<>()), 4));
    try (Socket s = new Socket("127.0.0.1", proxy.port())) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write("PRI * HTTP/2.0\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      long start = System.nanoTime();
      InputStream in = s.getInputStream();
      // Closed by the proxy: end of stream (or a reset), well before the 10 s read timeout.
      int read;
      try {
        read = in.read();
      } catch (java.net.SocketException reset) {
        read = -1;
      }
      assertThat(read).isEqualTo(-1);
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(8));
    }
  }

  @Test
  void anHttp2ConnectionWhoseFirstHeadersNeverEndIsClosedByTheGuard() throws Exception {
    startProxy(h2Config(startVllmBackend(new java.util.concurrent.CopyOnWriteArrayList<>()), 4));
    try (Socket s = new Socket("127.0.0.1", proxy.port())) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      out.write(new byte[] {0, 0, 0, 4, 0, 0, 0, 0, 0}); // an empty SETTINGS frame
      // A HEADERS frame for stream 1 without END_HEADERS, whose CONTINUATION never comes.
      byte[] block = {(byte) 0x83, (byte) 0x86}; // :method POST, :scheme http (static table)
      out.write(new byte[] {0, 0, (byte) block.length, 1, 0, 0, 0, 0, 1});
      out.write(block);
      out.flush();
      InputStream in = s.getInputStream();
      long start = System.nanoTime();
      byte[] buf = new byte[4096];
      try {
        while (in.read(buf) >= 0) {
          // the server's SETTINGS, its ACK: read until the close
        }
      } catch (java.net.SocketException reset) {
        // closed
      }
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(8));
    }
    assertThat(proxy.inFlight()).isZero();
  }

  @Test
  void aClientThatStopsReadingOneStreamPausesTheUpstreamAndItsResetFreesTheSlotAtOnce()
      throws Exception {
    AtomicLong written = new AtomicLong();
    AtomicBoolean upstreamClosed = new AtomicBoolean();
    long cap = 512L << 20;
    startProxy(h2Config(startFloodingBackend(cap, written, upstreamClosed), 4));
    // A stream window of 1 KiB, never opened further while the response is paused: the proxy may
    // send the client 1 KiB of this stream and then has to stop.
    HttpClient h2 =
        vertx.createHttpClient(
            new HttpClientOptions()
                .setProtocolVersion(HttpVersion.HTTP_2)
                .setHttp2ClearTextUpgrade(false)
                .setInitialSettings(new Http2Settings().setInitialWindowSize(1024)),
            new PoolOptions().setHttp2MaxSize(1));
    AtomicLong received = new AtomicLong();
    HttpClientRequest req =
        onClientContext(
                () ->
                    h2.request(
                        new RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(proxy.port())
                            .setURI(CHAT)
                            .putHeader("content-type", "application/json")))
            .await(5, TimeUnit.SECONDS);
    HttpClientResponse resp =
        onClientContext(
                () ->
                    req.send(chat("flood", true))
                        .onSuccess(
                            r -> {
                              r.handler(b -> received.addAndGet(b.length()));
                              r.pause();
                            }))
            .await(5, TimeUnit.SECONDS);
    assertThat(resp.statusCode()).isEqualTo(200);

    // The upstream stops making progress: held back by the proxy, not by its own cap.
    long held = awaitStable(written);
    System.out.printf("h2 window 1 KiB, paused: upstream held back after %d bytes%n", held);
    // What one loopback hop's kernel buffers and the proxy's read of the upstream hold: a few MiB.
    assertThat(held).isPositive().isLessThan(64L << 20);
    assertThat(received.get()).as("nothing delivered while paused").isZero();
    SlotPool slots = proxy.slotPools().get("default");
    assertThat(slots.inUse()).isEqualTo(1);

    // The control: the same stream read again makes the upstream go on (it was backpressure).
    onClientContext(
            () -> {
              resp.resume();
              return Future.succeededFuture();
            })
        .await(5, TimeUnit.SECONDS);
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> received.get() > 0);
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> written.get() > held + (1 << 20));

    onClientContext(() -> req.reset()).await(5, TimeUnit.SECONDS);
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> slots.inUse() == 0);
    Awaitility.await().atMost(Duration.ofSeconds(5)).untilTrue(upstreamClosed);
    ProxyTestBase.Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("cancelled");
    assertThat(f.errorType()).isEqualTo("client_cancelled");
    assertIdle();
    h2.close();
  }

  /** Waits until {@code counter} holds still across two looks 500 ms apart, and returns it. */
  private static long awaitStable(AtomicLong counter) {
    long[] last = {-1};
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              long now = counter.get();
              boolean stable = now == last[0] && now > 0;
              last[0] = now;
              return stable;
            });
    return last[0];
  }

  @Test
  void theStreamLimitIsInTheSettingsAndAStreamPastItIsRefusedWithNothingLeaked() throws Exception {
    Promise<Void> release = Promise.promise();
    startProxy(
        h2Config(
            startHeldBackend(release),
            8,
            "listen: {host: 127.0.0.1, port: 0, http2: true, http2_max_concurrent_streams: 4}\n"));
    SlotPool slots = proxy.slotPools().get("default");
    try (RawH2 c = RawH2.connect(proxy.port())) {
      assertThat(c.serverSettings()).containsEntry(RawH2.SETTINGS_MAX_CONCURRENT_STREAMS, 4L);
      for (int stream = 1; stream <= 7; stream += 2) {
        c.post(stream, CHAT, Map.of(), chat("s" + stream, false));
      }
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> slots.inUse() == 4);

      c.post(9, CHAT, Map.of(), null);
      RawH2.Frame refused = c.await(f -> f.stream() == 9);
      System.out.println("a fifth stream at once: " + refused);
      assertThat(refused.type()).isEqualTo(RawH2.RST_STREAM);
      assertThat(refused.errorCode()).isEqualTo(RawH2.REFUSED_STREAM);
      assertThat(proxy.inFlight()).isEqualTo(4);
      assertThat(finished).as("the refused stream never became a request").isEmpty();

      release.complete();
      c.awaitEnds(1, 3, 5, 7);
      for (int stream = 1; stream <= 7; stream += 2) {
        assertThat(c.status(stream)).as("stream " + stream).isEqualTo(200);
      }
      // A stream opened once the others ended is served on the same connection.
      c.post(11, CHAT, Map.of(), chat("after", false));
      c.awaitEnds(11);
      assertThat(c.seen())
          .noneMatch(f -> f.type() == RawH2.RST_STREAM && f.stream() == 11)
          .noneMatch(f -> f.type() == RawH2.GOAWAY);
    }
    assertThat(awaitFinished(5)).hasSize(5).allMatch(f -> f.outcome().equals("success"));
    assertIdle();
  }

  @Test
  void aHeaderListPastTheLimitFailsItsStreamAndTheConnectionGoesOn() throws Exception {
    startProxy(
        h2Config(
            startVllmBackend(new java.util.concurrent.CopyOnWriteArrayList<>()),
            4,
            "listen: {host: 127.0.0.1, port: 0, http2: true, http2_max_header_list_size: 4096}\n"));
    try (RawH2 c = RawH2.connect(proxy.port())) {
      assertThat(c.serverSettings()).containsEntry(RawH2.SETTINGS_MAX_HEADER_LIST_SIZE, 4096L);
      c.post(1, CHAT, Map.of("x-padding", "p".repeat(4500)), chat("too big", false));
      c.awaitEnds(1);
      List<RawH2.Frame> onOne = c.seen().stream().filter(f -> f.stream() == 1).toList();
      // What Netty's codec does: a 431 that ends the stream, then RST_STREAM; no request exists.
      assertThat(c.status(1)).isEqualTo(431);
      assertThat(onOne.get(0).endStream()).isTrue();

      c.post(3, CHAT, Map.of("x-padding", "p".repeat(1000)), chat("fine", false));
      c.awaitEnds(3);
      assertThat(c.status(3)).isEqualTo(200);
      List<Integer> resets =
          c.seen().stream()
              .filter(f -> f.stream() == 1 && f.type() == RawH2.RST_STREAM)
              .map(RawH2.Frame::errorCode)
              .toList();
      System.out.println("a header list past the limit: 431, then RST_STREAM " + resets);
      assertThat(c.seen()).noneMatch(f -> f.type() == RawH2.GOAWAY);
    }
    assertThat(awaitFinished(1)).singleElement().matches(f -> f.outcome().equals("success"));
    assertIdle();
  }

  @Test
  void aClientThatSendsGoawayAndClosesCancelsEachOfItsStreams() throws Exception {
    Promise<Void> release = Promise.promise();
    startProxy(h2Config(startHeldBackend(release), 8));
    SlotPool slots = proxy.slotPools().get("default");
    try (RawH2 c = RawH2.connect(proxy.port())) {
      for (int stream = 1; stream <= 5; stream += 2) {
        c.post(stream, CHAT, Map.of(), chat("s" + stream, false));
      }
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> slots.inUse() == 3);
      c.goAway(0, RawH2.NO_ERROR);
    }
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> slots.inUse() == 0);
    assertThat(awaitFinished(3))
        .hasSize(3)
        .allSatisfy(
            f -> {
              assertThat(f.outcome()).isEqualTo("cancelled");
              assertThat(f.errorType()).isEqualTo("client_cancelled");
              assertThat(proxy.records().get(f.traceId()))
                  .contains("\"outcome\":\"cancelled\"")
                  .contains("\"network_protocol_version\":\"2\"")
                  .contains("\"tls_protocol_version\":null");
            });
    release.complete();
    assertIdle();
  }

  private static SpanData root(List<SpanData> spans) {
    return spans.stream()
        .filter(s -> !s.getParentSpanContext().isValid())
        .findFirst()
        .orElseThrow();
  }

  private static boolean curlHasHttp2() {
    try {
      Process p = new ProcessBuilder("curl", "--version").redirectErrorStream(true).start();
      String v = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return p.waitFor(5, TimeUnit.SECONDS) && v.contains("HTTP2");
    } catch (Exception e) {
      return false;
    }
  }
}
