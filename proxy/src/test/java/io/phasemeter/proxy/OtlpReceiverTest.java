package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The proxy's spans as a collector receives them: a receiver in the test decodes the real OTLP
 * protobuf ({@code opentelemetry-proto}), over OTLP/HTTP and over OTLP/gRPC (HTTP/2 without TLS,
 * gRPC's length-prefixed framing and trailers, served by Vert.x), and checks the span tree and the
 * resource. A receiver that is down costs counted drops, never requests, and export resumes when it
 * comes back.
 */
class OtlpReceiverTest extends ProxyTestBase {
  private static final Set<String> PHASE_SPANS =
      Set.of(
          "auth.check",
          "request.receive",
          "request.prepare",
          "route.select",
          "inference.acquire_slot",
          "inference.generate",
          "response.write");

  private final List<ResourceSpans> received = new CopyOnWriteArrayList<>();
  private final List<String> protocols = new CopyOnWriteArrayList<>();
  private ProxyTelemetry telemetry;

  @AfterEach
  void closeTelemetry() {
    if (telemetry != null) {
      telemetry.close();
    }
  }

  /** An OTLP receiver on {@code port} (0 = any) speaking HTTP/protobuf and gRPC on one listener. */
  private HttpServer startReceiver(int port) throws Exception {
    return vertx
        .createHttpServer(new HttpServerOptions().setHttp2ClearTextEnabled(true))
        .requestHandler(req -> req.body().onSuccess(body -> receive(req, body)))
        .listen(port, "127.0.0.1")
        .await(5, TimeUnit.SECONDS);
  }

  private void receive(HttpServerRequest req, Buffer body) {
    String type = String.valueOf(req.getHeader("content-type"));
    try {
      if (type.startsWith("application/grpc")) {
        assertThat(req.path())
            .isEqualTo("/opentelemetry.proto.collector.trace.v1.TraceService/Export");
        // gRPC frame: 1 byte compressed flag, 4 bytes big-endian length, the message.
        assertThat(body.getByte(0)).isZero();
        int length = body.getInt(1);
        protocols.add(req.version() + " grpc");
        received.addAll(
            ExportTraceServiceRequest.parseFrom(body.getBytes(5, 5 + length))
                .getResourceSpansList());
        byte[] reply = ExportTraceServiceResponse.getDefaultInstance().toByteArray();
        Buffer frame =
            Buffer.buffer().appendByte((byte) 0).appendInt(reply.length).appendBytes(reply);
        req.response()
            .putHeader("content-type", "application/grpc")
            .putTrailer("grpc-status", "0")
            .end(frame);
      } else {
        assertThat(req.path()).isEqualTo("/v1/traces");
        assertThat(type).isEqualTo("application/x-protobuf");
        protocols.add(req.version() + " http/protobuf");
        received.addAll(
            ExportTraceServiceRequest.parseFrom(body.getBytes()).getResourceSpansList());
        req.response()
            .putHeader("content-type", "application/x-protobuf")
            .end(Buffer.buffer(ExportTraceServiceResponse.getDefaultInstance().toByteArray()));
      }
    } catch (InvalidProtocolBufferException | RuntimeException | AssertionError e) {
      req.response().setStatusCode(400).end(String.valueOf(e));
    }
  }

  private void startProxyExportingTo(int receiverPort, String protocol) throws Exception {
    int backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION)));
    ProxyConfig cfg = config(backend, 4, null);
    telemetry =
        ProxyTelemetry.create(
            cfg.telemetry(),
            Map.of(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:" + receiverPort,
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                protocol,
                "OTEL_SERVICE_NAME",
                "proxy-under-test"),
            "9.8.7",
            NanoClock.system());
    ProxyMetrics metrics = ProxyMetrics.create();
    telemetry.bindTo(metrics.registry());
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(telemetry.openTelemetry())
            .metrics(metrics)
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  private List<Span> spansOf(String traceIdHex) {
    return received.stream()
        .flatMap(rs -> rs.getScopeSpansList().stream())
        .flatMap(ss -> ss.getSpansList().stream())
        .filter(s -> hex(s.getTraceId().toByteArray()).equals(traceIdHex))
        .collect(Collectors.toList());
  }

  private static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(bytes);
  }

  private static String attr(List<KeyValue> attributes, String key) {
    return attributes.stream()
        .filter(kv -> kv.getKey().equals(key))
        .map(kv -> kv.getValue().getStringValue())
        .findFirst()
        .orElse(null);
  }

  /** One request's eight spans arrive, decode, and form the tree of docs/design.md §2. */
  private void assertTreeArrives() throws Exception {
    String traceId = "0af7651916cd43dd8448eb211c80319c";
    var headers = io.vertx.core.MultiMap.caseInsensitiveMultiMap();
    headers.add("traceparent", "00-" + traceId + "-b7ad6b7169203331-01");
    assertThat(
            call(
                    io.vertx.core.http.HttpMethod.POST,
                    "/v1/chat/completions",
                    chat("x", false),
                    headers)
                .status())
        .isEqualTo(200);
    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> spansOf(traceId).size() == 8);
    List<Span> spans = spansOf(traceId);
    Span root =
        spans.stream().filter(s -> s.getKind() == Span.SpanKind.SPAN_KIND_SERVER).findFirst().get();
    assertThat(root.getName()).isEqualTo("POST /v1/chat/completions");
    assertThat(hex(root.getParentSpanId().toByteArray())).isEqualTo("b7ad6b7169203331");
    assertThat(attr(root.getAttributesList(), "llm.outcome")).isEqualTo("success");
    List<Span> children = spans.stream().filter(s -> s != root).collect(Collectors.toList());
    assertThat(children.stream().map(Span::getName).collect(Collectors.toSet()))
        .isEqualTo(PHASE_SPANS);
    assertThat(children)
        .allSatisfy(c -> assertThat(c.getParentSpanId()).isEqualTo(root.getSpanId()))
        .allSatisfy(
            c ->
                assertThat(c.getStartTimeUnixNano())
                    .isBetween(root.getStartTimeUnixNano(), root.getEndTimeUnixNano()));
    assertThat(children)
        .filteredOn(c -> c.getName().equals("inference.generate"))
        .singleElement()
        .satisfies(c -> assertThat(c.getKind()).isEqualTo(Span.SpanKind.SPAN_KIND_CLIENT));
    ResourceSpans resource =
        received.stream()
            .filter(
                rs ->
                    rs.getScopeSpansList().stream()
                        .map(ScopeSpans::getSpansList)
                        .anyMatch(l -> l.contains(root)))
            .findFirst()
            .get();
    List<KeyValue> resourceAttrs = resource.getResource().getAttributesList();
    assertThat(attr(resourceAttrs, "service.name")).isEqualTo("proxy-under-test");
    assertThat(attr(resourceAttrs, "service.version")).isEqualTo("9.8.7");
    assertThat(attr(resourceAttrs, "telemetry.sdk.language")).isEqualTo("java");
  }

  @Test
  void otlpHttpProtobufDeliversTheSpanTreeAndResource() throws Exception {
    HttpServer receiver = startReceiver(0);
    startProxyExportingTo(receiver.actualPort(), "http/protobuf");
    assertTreeArrives();
    assertThat(protocols).containsOnly("HTTP_1_1 http/protobuf");
  }

  @Test
  void otlpGrpcDeliversTheSpanTreeAndResource() throws Exception {
    HttpServer receiver = startReceiver(0);
    startProxyExportingTo(receiver.actualPort(), "grpc");
    assertTreeArrives();
    assertThat(protocols).containsOnly("HTTP_2 grpc");
  }

  @Test
  void aReceiverThatIsDownCostsCountedDropsAndExportResumesWhenItIsBack() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    startProxyExportingTo(port, "http/protobuf");
    long start = System.nanoTime();
    for (int i = 0; i < 5; i++) {
      assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
    }
    // Export happens off the request path: five requests take no retry or connect timeout.
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .untilAsserted(
            () ->
                assertThat(metric(admin("/metrics").text(), "llm_telemetry_dropped_total"))
                    .isEqualTo(40.0));
    assertThat(telemetry.health().exportedSpans()).isZero();
    // The queue is bounded: it never holds more than its capacity, and it drained.
    assertThat(telemetry.health().queueSize()).isBetween(0L, (long) ProxyTelemetry.MAX_QUEUE);

    startReceiver(port);
    assertTreeArrives();
    assertThat(metric(admin("/metrics").text(), "llm_telemetry_dropped_total")).isEqualTo(40.0);
  }

  private static double metric(String text, String name) {
    Matcher m =
        Pattern.compile("(?m)^" + Pattern.quote(name) + "\\{signal=\"spans\"} (\\S+)$")
            .matcher(text);
    return m.find() ? Double.parseDouble(m.group(1)) : Double.NaN;
  }
}
