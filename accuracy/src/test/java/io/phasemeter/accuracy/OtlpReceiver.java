package io.phasemeter.accuracy;

import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A minimal OTLP/HTTP trace receiver ({@code POST /v1/traces}, protobuf) on 127.0.0.1, port chosen
 * by the kernel: it decodes every export and keeps the span names per trace id, plus how many
 * exports, spans and bytes arrived. Enough to check that the proxy's spans leave the process.
 */
final class OtlpReceiver implements AutoCloseable {
  private static final HexFormat HEX = HexFormat.of();

  private final HttpServer server;
  private final Map<String, List<String>> spansByTrace = new ConcurrentHashMap<>();
  private final AtomicInteger exports = new AtomicInteger();
  private final AtomicInteger spans = new AtomicInteger();
  private final AtomicInteger malformed = new AtomicInteger();
  private final AtomicLong bytes = new AtomicLong();

  private OtlpReceiver(Vertx vertx) {
    this.server = vertx.createHttpServer().requestHandler(this::handle);
  }

  static OtlpReceiver start(Vertx vertx) throws Exception {
    OtlpReceiver r = new OtlpReceiver(vertx);
    r.server
        .listen(0, "127.0.0.1")
        .toCompletionStage()
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS);
    return r;
  }

  /** The base endpoint for {@code telemetry.otlp.endpoint} (the proxy appends /v1/traces). */
  String endpoint() {
    return "http://127.0.0.1:" + server.actualPort();
  }

  private void handle(HttpServerRequest req) {
    if (!"/v1/traces".equals(req.path())) {
      req.response().setStatusCode(404).end();
      return;
    }
    req.body()
        .onSuccess(
            body -> {
              bytes.addAndGet(body.length());
              try {
                ExportTraceServiceRequest export =
                    ExportTraceServiceRequest.parseFrom(body.getBytes());
                exports.incrementAndGet();
                for (ResourceSpans rs : export.getResourceSpansList()) {
                  for (ScopeSpans ss : rs.getScopeSpansList()) {
                    for (Span s : ss.getSpansList()) {
                      spans.incrementAndGet();
                      spansByTrace
                          .computeIfAbsent(
                              HEX.formatHex(s.getTraceId().toByteArray()),
                              k -> Collections.synchronizedList(new ArrayList<>()))
                          .add(s.getName());
                    }
                  }
                }
                // An empty ExportTraceServiceResponse is zero bytes.
                req.response().putHeader("content-type", "application/x-protobuf").end();
              } catch (InvalidProtocolBufferException e) {
                malformed.incrementAndGet();
                req.response().setStatusCode(400).end();
              }
            });
  }

  /** The names of the spans received for {@code traceId} (empty if none). */
  List<String> spanNames(String traceId) {
    List<String> names = spansByTrace.get(traceId);
    if (names == null) {
      return List.of();
    }
    synchronized (names) {
      return List.copyOf(names);
    }
  }

  int exports() {
    return exports.get();
  }

  int spans() {
    return spans.get();
  }

  int malformed() {
    return malformed.get();
  }

  long bytes() {
    return bytes.get();
  }

  @Override
  public void close() throws Exception {
    server.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }
}
