package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.pipeline.Phase;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/** The streaming relay: byte-for-byte pass-through, usage handling, span tree, cancellation. */
class StreamingRelayTest extends ProxyTestBase {

  @Test
  void streamPassesThroughByteForByteAcrossAwkwardBoundaries() throws Exception {
    for (boolean crlf : new boolean[] {false, true}) {
      byte[] upstream = VllmScript.utf8(VllmScript.stream(crlf));
      // 7-byte pieces split events, JSON, multi-byte characters and every "\r\n" pair.
      List<Buffer> pieces = VllmScript.awkwardPieces(upstream, 7);
      AtomicReference<JsonObject> forwarded = new AtomicReference<>();
      int port =
          startBackend(
              req -> {
                req.body().onSuccess(b -> forwarded.set(b.toJsonObject()));
                VllmScript.writeStream(vertx, req, pieces, 1);
              });
      startProxy(config(port, 4, null));
      String body =
          "{\"model\":\"sim-llama\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
              + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
      Response r = call("/v1/chat/completions", body);

      assertThat(r.status()).isEqualTo(200);
      assertThat(r.headers().get("content-type")).startsWith("text/event-stream");
      assertThat(r.body().toString(java.nio.charset.StandardCharsets.UTF_8))
          .as("crlf=" + crlf)
          .isEqualTo(new String(upstream, java.nio.charset.StandardCharsets.UTF_8));
      assertThat(forwarded.get()).isEqualTo(new JsonObject(body));
      Finished f = awaitFinished(1).get(0);
      assertThat(f.outcome()).isEqualTo("success");
      assertThat(f.inputTokens()).isEqualTo(7);
      assertThat(f.outputTokens()).isEqualTo(4);
      assertThat(f.finishReason()).isEqualTo("length");
      assertThat(f.ttftNanos()).isPositive();
      assertThat(f.tpotNanos()).isPositive();
      proxy.close().await(5, TimeUnit.SECONDS);
      finished.clear();
    }
  }

  @Test
  void usageIsRequestedUpstreamAndStrippedWhenTheClientDidNotAsk() throws Exception {
    byte[] upstream = VllmScript.utf8(VllmScript.stream(false));
    AtomicReference<JsonObject> forwarded = new AtomicReference<>();
    int port =
        startBackend(
            req -> {
              req.body().onSuccess(b -> forwarded.set(b.toJsonObject()));
              VllmScript.writeStream(vertx, req, VllmScript.awkwardPieces(upstream, 50), 1);
            });
    startProxy(config(port, 4, null));
    Response r = call("/v1/chat/completions", chat("hi", true));

    assertThat(forwarded.get().getJsonObject("stream_options").getBoolean("include_usage"))
        .isTrue();
    String expected = VllmScript.stream(false).replace(VllmScript.USAGE, "");
    assertThat(r.text()).isEqualTo(expected);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outputTokens()).as("usage still measured").isEqualTo(4);
  }

  @Test
  void spanTreeOfAStreamedRequest() throws Exception {
    byte[] upstream = VllmScript.utf8(VllmScript.stream(false));
    AtomicReference<String> upstreamTraceparent = new AtomicReference<>();
    int port =
        startBackend(
            req -> {
              upstreamTraceparent.set(req.getHeader("traceparent"));
              VllmScript.writeStream(vertx, req, VllmScript.awkwardPieces(upstream, 64), 20);
            });
    startProxy(config(port, 4, null));
    String incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    io.vertx.core.MultiMap headers = io.vertx.core.MultiMap.caseInsensitiveMultiMap();
    headers.add("traceparent", incoming);
    Response r = call(HttpMethod.POST, "/v1/chat/completions", chat("hi", true), headers);
    assertThat(r.status()).isEqualTo(200);

    List<SpanData> all = awaitRoots(1);
    SpanData root = rootOf(all);
    assertThat(root.getName()).isEqualTo("POST /v1/chat/completions");
    assertThat(root.getKind()).isEqualTo(SpanKind.SERVER);
    assertThat(root.getTraceId()).isEqualTo("0af7651916cd43dd8448eb211c80319c");
    assertThat(root.getParentSpanId()).isEqualTo("b7ad6b7169203331");
    assertThat(root.getAttributes().get(AttributeKey.stringKey("llm.outcome")))
        .isEqualTo("success");
    assertThat(root.getAttributes().get(AttributeKey.stringKey("gen_ai.operation.name")))
        .isEqualTo("chat");
    assertThat(root.getAttributes().get(AttributeKey.longKey("http.response.status_code")))
        .isEqualTo(200L);
    assertThat(root.getAttributes().get(AttributeKey.doubleKey("llm.server_ttft_ms"))).isPositive();

    Map<String, SpanData> children = childrenByName(all, root);
    assertThat(children.keySet())
        .containsExactlyInAnyOrder(
            "auth.check",
            "request.receive",
            "request.prepare",
            "route.select",
            "inference.acquire_slot",
            "inference.generate",
            "response.write");
    for (Phase p : Phase.values()) {
      SpanData s = children.get(p.spanName());
      assertThat(s.getKind()).isEqualTo(p.kind());
      assertThat(s.getAttributes().get(AttributeKey.stringKey("llm.phase"))).isEqualTo(p.label());
    }
    SpanData gen = children.get("inference.generate");
    assertThat(gen.getAttributes().get(AttributeKey.longKey("gen_ai.usage.output_tokens")))
        .isEqualTo(4L);
    assertThat(gen.getAttributes().get(AttributeKey.booleanKey("llm.streaming"))).isTrue();
    assertThat(upstreamTraceparent.get())
        .as("upstream carries the generate span as parent")
        .isEqualTo("00-" + root.getTraceId() + "-" + gen.getSpanId() + "-01");
    SpanData queue = children.get("inference.acquire_slot");
    assertThat(queue.getAttributes().get(AttributeKey.stringKey("llm.queue.outcome")))
        .isEqualTo("acquired");
    assertPhasesAddUp(root, children);
  }

  @Test
  void spanTreeOfAWholeResponseAndServerTiming() throws Exception {
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            vertx.setTimer(
                                60,
                                t ->
                                    req.response()
                                        .putHeader("content-type", "application/json")
                                        .end(VllmScript.COMPLETION))));
    startProxy(config(port, 4, null));
    Response r = call("/v1/chat/completions", chat("hi", false));
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.text()).isEqualTo(VllmScript.COMPLETION);
    String timing = r.headers().get("server-timing");
    assertThat(timing)
        .matches(
            "auth;dur=[0-9.]+, receive;dur=[0-9.]+, prepare;dur=[0-9.]+, route;dur=[0-9.]+,"
                + " queue;dur=[0-9.]+, generation;dur=[0-9.]+");

    SpanData root = rootOf(awaitRoots(1));
    Map<String, SpanData> children = childrenByName(spans.getFinishedSpanItems(), root);
    assertThat(children).hasSize(7);
    assertPhasesAddUp(root, children);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.ttftNanos()).as("no TTFT for a whole response").isEqualTo(-1);
    assertThat(f.outputTokens()).isEqualTo(2);
    assertThat(f.phaseMs(Phase.GENERATION)).isGreaterThanOrEqualTo(60.0);
    // The header reports exactly what the record holds, to the printed precision.
    double headerGen = Double.parseDouble(timing.replaceAll(".*generation;dur=([0-9.]+).*", "$1"));
    assertThat(headerGen)
        .isCloseTo(f.phaseMs(Phase.GENERATION), org.assertj.core.data.Offset.offset(0.001));
  }

  @Test
  void clientDisconnectMidStreamCancelsUpstreamAndFreesTheSlot() throws Exception {
    AtomicBoolean upstreamClosed = new AtomicBoolean();
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          req.response()
                              .setChunked(true)
                              .putHeader("content-type", "text/event-stream");
                          req.response().closeHandler(v -> upstreamClosed.set(true));
                          req.response().write(VllmScript.ROLE);
                          long timer =
                              vertx.setPeriodic(
                                  10,
                                  id -> {
                                    if (!req.response().closed()) {
                                      req.response().write(VllmScript.content("tok"));
                                    }
                                  });
                          req.response()
                              .closeHandler(
                                  v -> {
                                    upstreamClosed.set(true);
                                    vertx.cancelTimer(timer);
                                  });
                        }));
    startProxy(config(port, 1, null));
    Promise<Void> gotTokens = Promise.promise();
    HttpClientRequest req = openChat();
    HttpClientResponse resp = req.send(chat("hi", true)).await(5, TimeUnit.SECONDS);
    Buffer seen = Buffer.buffer();
    resp.handler(
        b -> {
          seen.appendBuffer(b);
          if (seen.toString().split("tok", -1).length > 3) {
            gotTokens.tryComplete();
          }
        });
    gotTokens.future().await(10, TimeUnit.SECONDS);
    req.connection().close();

    Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).untilTrue(upstreamClosed);
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("cancelled");
    assertThat(f.errorType()).isEqualTo("client_cancelled");
    assertThat(f.status()).as("headers had left with 200").isEqualTo(200);
    assertIdle();
    SpanData root = rootOf(awaitRoots(1));
    assertThat(root.getAttributes().get(AttributeKey.stringKey("llm.outcome")))
        .isEqualTo("cancelled");
  }

  @Test
  void slowClientPausesTheUpstreamInsteadOfBufferingWithoutBound() throws Exception {
    long cap = 512L << 20; // the upstream would send 512 MiB if nothing held it back
    java.util.concurrent.atomic.AtomicLong written = new java.util.concurrent.atomic.AtomicLong();
    AtomicBoolean upstreamClosed = new AtomicBoolean();
    int port = startFloodingBackend(cap, written, upstreamClosed);
    startProxy(config(port, 1, null));
    HttpClientRequest req = openChat();
    HttpClientResponse resp = req.send(chat("hi", true)).await(5, TimeUnit.SECONDS);
    resp.pause(); // a client that stops reading

    // Wait until the upstream stops making progress: it is held back by the proxy.
    long[] last = {-1};
    Awaitility.await()
        .atMost(java.time.Duration.ofSeconds(20))
        .pollInterval(java.time.Duration.ofMillis(500))
        .until(
            () -> {
              long now = written.get();
              boolean stable = now == last[0] && now > 0;
              last[0] = now;
              return stable;
            });
    // Kernel socket buffers on both loopback hops plus Vert.x write queues: a few MiB, not 512.
    System.out.printf("slow client: upstream held back after %d bytes%n", written.get());
    assertThat(written.get()).isLessThan(64L << 20);
    assertThat(proxy.slotPools().get("default").inUse()).isEqualTo(1);

    req.connection().close();
    Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).untilTrue(upstreamClosed);
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("cancelled");
    assertIdle();
  }

  @Test
  void aClientThatStopsReadingIsBlamedNotTheUpstream() throws Exception {
    AtomicBoolean upstreamClosed = new AtomicBoolean();
    int port =
        startFloodingBackend(
            Long.MAX_VALUE, new java.util.concurrent.atomic.AtomicLong(), upstreamClosed);
    startProxy(config(port, 1, "    timeouts: {connect: 1s, first_token: 10s, idle: 500ms}\n"));
    HttpClientRequest req = openChat();
    Promise<HttpClientResponse> got = Promise.promise();
    onClientContext(() -> req.send(chat("hi", true)).onSuccess(r -> r.pause())).onComplete(got);
    got.future().await(5, TimeUnit.SECONDS);

    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("cancelled");
    assertThat(f.errorType()).isEqualTo("client_stalled");
    Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).untilTrue(upstreamClosed);
    assertIdle();
  }

  @Test
  void clientLeavingTheQueueFreesItsPlaceAtOnce() throws Exception {
    Promise<Void> release = Promise.promise();
    int port = startHeldBackend(release);
    startProxy(config(port, 1, null));
    var first = callAsync("/v1/chat/completions", chat("a", false));
    Awaitility.await().until(() -> proxy.slotPools().get("default").inUse() == 1);
    HttpClientRequest waiting = openChat();
    waiting.send(chat("b", false));
    Awaitility.await().until(() -> proxy.slotPools().get("default").queueDepth() == 1);
    waiting.connection().close();
    Awaitility.await().until(() -> proxy.slotPools().get("default").queueDepth() == 0);
    Finished gone = awaitFinished(1).get(0);
    assertThat(gone.outcome()).isEqualTo("cancelled");
    assertThat(gone.phases()).containsKey(Phase.QUEUE).doesNotContainKey(Phase.GENERATION);
    release.complete();
    assertThat(first.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
    assertIdle();
    SpanData queueSpan =
        spans.getFinishedSpanItems().stream()
            .filter(
                s ->
                    s.getName().equals("inference.acquire_slot")
                        && "cancelled"
                            .equals(
                                s.getAttributes().get(AttributeKey.stringKey("llm.queue.outcome"))))
            .findFirst()
            .orElseThrow();
    assertThat(queueSpan.getAttributes().get(AttributeKey.longKey("llm.queue.depth_at_entry")))
        .isEqualTo(0L);
  }

  static SpanData rootOf(List<SpanData> all) {
    return all.stream()
        .filter(s -> s.getKind() == SpanKind.SERVER)
        .findFirst()
        .orElseThrow(() -> new AssertionError("no SERVER span in " + all));
  }

  static Map<String, SpanData> childrenByName(List<SpanData> all, SpanData root) {
    return all.stream()
        .filter(s -> s.getParentSpanId().equals(root.getSpanId()))
        .collect(Collectors.toMap(SpanData::getName, Function.identity()));
  }

  /** Phases are sequential, inside the root, and leave only a small remainder. */
  static void assertPhasesAddUp(SpanData root, Map<String, SpanData> children) {
    long rootNanos = root.getEndEpochNanos() - root.getStartEpochNanos();
    long sum = 0;
    long previousEnd = root.getStartEpochNanos();
    for (Phase p : Phase.values()) {
      SpanData s = children.get(p.spanName());
      assertThat(s.getStartEpochNanos())
          .as(p + " starts after the previous phase")
          .isGreaterThanOrEqualTo(previousEnd);
      assertThat(s.getEndEpochNanos()).isLessThanOrEqualTo(root.getEndEpochNanos());
      sum += s.getEndEpochNanos() - s.getStartEpochNanos();
      previousEnd = s.getEndEpochNanos();
    }
    long remainder = rootNanos - sum;
    assertThat(remainder).isGreaterThanOrEqualTo(0);
    // Code between spans: a few hundred microseconds at most on an idle machine; allow 5 ms + 5%
    // for a loaded CI box. A lost phase would show up as tens of milliseconds here.
    assertThat(remainder).isLessThanOrEqualTo(5_000_000L + rootNanos / 20);
  }
}
