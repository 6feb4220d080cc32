package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.vertx.core.Handler;
import io.vertx.core.MultiMap;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.RequestOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * Fixtures in the style of vertx-http-proxy's TestBase: {@link #startBackend} for a scripted
 * upstream, {@link #startProxy} for a proxy with in-memory span export, {@link #call} for a client.
 */
public abstract class ProxyTestBase {
  protected Vertx vertx;
  protected InMemorySpanExporter spans;

  /** Span ids started and not yet ended (a span left open is a span lost). */
  protected final java.util.Set<String> openSpans =
      java.util.concurrent.ConcurrentHashMap.newKeySet();

  protected final java.util.concurrent.atomic.AtomicInteger spansStarted =
      new java.util.concurrent.atomic.AtomicInteger();
  protected OpenTelemetrySdk otel;
  protected HttpClient client;
  private io.vertx.core.Context clientContext;
  protected PhasemeterProxy proxy;
  protected final List<Finished> finished = new CopyOnWriteArrayList<>();
  private final List<HttpServer> backends = new ArrayList<>();

  /** What a test can see of a finished request (the context itself must not be kept). */
  public record Finished(
      String outcome,
      String traceId,
      long rootStart,
      int status,
      String errorType,
      String model,
      String pool,
      boolean stream,
      long rootNanos,
      long ttftNanos,
      long tpotNanos,
      long unattributedNanos,
      long inputTokens,
      long outputTokens,
      String finishReason,
      Map<Phase, Long> phases) {

    public double phaseMs(Phase p) {
      Long n = phases.get(p);
      return n == null ? -1 : n / 1e6;
    }
  }

  /** A whole response as the client saw it. */
  public record Response(int status, MultiMap headers, Buffer body) {
    public String text() {
      return body.toString();
    }
  }

  /**
   * Phase spans deferred until the root ends, as the proxy keeps them with its own SDK, and every
   * request exported: each span test sees the spans the proxy exports.
   */
  protected static final io.phasemeter.proxy.pipeline.SpanDeferral EXPORT_EVERY_REQUEST =
      io.phasemeter.proxy.telemetry.PresetIdGenerator.deferral((failed, nanos, traceId) -> true);

  @BeforeEach
  void setUpBase() {
    vertx = Vertx.vertx();
    spans = InMemorySpanExporter.create();
    otel =
        OpenTelemetrySdk.builder()
            .setTracerProvider(
                SdkTracerProvider.builder()
                    .setIdGenerator(new io.phasemeter.proxy.telemetry.PresetIdGenerator())
                    .addSpanProcessor(openSpanTracker())
                    .addSpanProcessor(SimpleSpanProcessor.create(spans))
                    .build())
            .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
            .build();
    // Vert.x's default of 5 connections per server would queue a test's concurrent requests in
    // the client, out of the proxy's sight.
    client =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(false),
            new io.vertx.core.http.PoolOptions().setHttp1MaxSize(256));
    clientContext = vertx.getOrCreateContext();
  }

  private io.opentelemetry.sdk.trace.SpanProcessor openSpanTracker() {
    return new io.opentelemetry.sdk.trace.SpanProcessor() {
      @Override
      public void onStart(
          io.opentelemetry.context.Context parent, io.opentelemetry.sdk.trace.ReadWriteSpan span) {
        spansStarted.incrementAndGet();
        openSpans.add(span.getSpanContext().getSpanId());
      }

      @Override
      public boolean isStartRequired() {
        return true;
      }

      @Override
      public void onEnd(io.opentelemetry.sdk.trace.ReadableSpan span) {
        openSpans.remove(span.getSpanContext().getSpanId());
      }

      @Override
      public boolean isEndRequired() {
        return true;
      }
    };
  }

  @AfterEach
  void tearDownBase() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
    otel.close();
  }

  /**
   * Runs a client exchange on a Vert.x context, so its handlers are set on the event loop that
   * delivers the response; composed from a foreign thread a response body can be missed.
   */
  protected <T> io.vertx.core.Future<T> onClientContext(
      java.util.function.Supplier<io.vertx.core.Future<T>> exchange) {
    io.vertx.core.Promise<T> done = io.vertx.core.Promise.promise();
    clientContext.runOnContext(v -> exchange.get().onComplete(done));
    return done.future();
  }

  /** Opens a chat-completions POST to the proxy (on the client context), JSON content type set. */
  protected HttpClientRequest openChat() throws Exception {
    return onClientContext(
            () ->
                client
                    .request(
                        new RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(proxy.port())
                            .setURI("/v1/chat/completions"))
                    .map(r -> r.putHeader("content-type", "application/json")))
        .await(5, TimeUnit.SECONDS);
  }

  /** An upstream that answers each request with a whole completion once {@code release} is done. */
  protected int startHeldBackend(io.vertx.core.Promise<Void> release) throws Exception {
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b ->
                        release
                            .future()
                            .onComplete(
                                v ->
                                    req.response()
                                        .putHeader("content-type", "application/json")
                                        .end(VllmScript.COMPLETION))));
  }

  /**
   * An upstream that streams 1 kB content events as fast as its socket takes them, until {@code
   * cap} bytes (counted in {@code written}); {@code closed} turns true when its client goes away.
   */
  protected int startFloodingBackend(
      long cap,
      java.util.concurrent.atomic.AtomicLong written,
      java.util.concurrent.atomic.AtomicBoolean closed)
      throws Exception {
    Buffer event = Buffer.buffer(VllmScript.content("x".repeat(1000)));
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b -> {
                      var resp = req.response();
                      resp.setChunked(true).putHeader("content-type", "text/event-stream");
                      resp.closeHandler(v -> closed.set(true));
                      Runnable[] pump = new Runnable[1];
                      pump[0] =
                          () -> {
                            while (!resp.closed()
                                && !resp.writeQueueFull()
                                && written.get() < cap) {
                              resp.write(event);
                              written.addAndGet(event.length());
                            }
                            if (!resp.closed() && written.get() < cap) {
                              resp.drainHandler(v -> pump[0].run());
                            }
                          };
                      resp.write(VllmScript.ROLE);
                      pump[0].run();
                    }));
  }

  /**
   * An upstream that answers like vLLM: a whole stream when the request streams, else a whole
   * completion; the headers of each request it got go into {@code headers}, in arrival order.
   */
  protected int startVllmBackend(List<MultiMap> headers) throws Exception {
    return startBackend(
        req -> {
          headers.add(MultiMap.caseInsensitiveMultiMap().addAll(req.headers()));
          req.body()
              .onSuccess(
                  b -> {
                    if (b.toString().contains("\"stream\":true")) {
                      req.response()
                          .setChunked(true)
                          .putHeader("content-type", "text/event-stream")
                          .end(VllmScript.stream(false));
                    } else {
                      req.response()
                          .putHeader("content-type", "application/json")
                          .end(VllmScript.COMPLETION);
                    }
                  });
        });
  }

  /** Starts a scripted upstream on a free port. */
  protected int startBackend(Handler<HttpServerRequest> handler) throws Exception {
    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(handler)
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    backends.add(server);
    return server.actualPort();
  }

  /**
   * A config with one pool in front of {@code upstreamPort}; {@code extra} is YAML for the pool.
   * Scripted upstreams answer every path, so active health checks are off unless {@code extra}
   * turns them on ({@code health: …} there wins).
   */
  protected static ProxyConfig config(int upstreamPort, int slots, String poolExtra) {
    return ConfigLoader.parse(
        yaml(upstreamPort, "    slots: " + slots + "\n" + (poolExtra == null ? "" : poolExtra)),
        "test.yaml");
  }

  /**
   * proxy.yaml text: both listeners on loopback and free ports, one pool {@code default} serving
   * {@code sim-llama} from {@code upstreamPort} without active health checks, then {@code after}:
   * more of the pool's keys (indented four spaces; a {@code health: …} there wins), then any
   * top-level keys. What the in-process tests parse and the process tests ({@link ProxyJvm}) write.
   */
  static String yaml(int upstreamPort, String after) {
    return "listen: {host: 127.0.0.1, port: 0}\n"
        + "admin: {host: 127.0.0.1, port: 0}\n"
        + "pools:\n"
        + "  - name: default\n"
        + "    models: [sim-llama]\n"
        + "    upstreams: [http://127.0.0.1:"
        + upstreamPort
        + "]\n"
        + "    health: {path: null}\n"
        + after;
  }

  protected PhasemeterProxy startProxy(ProxyConfig config) throws Exception {
    proxy =
        PhasemeterProxy.builder(vertx, config)
            .openTelemetry(otel)
            .spanDeferral(EXPORT_EVERY_REQUEST)
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);
    return proxy;
  }

  /** What a test keeps of a finished request. */
  protected static Finished snapshot(RequestContext ctx) {
    Map<Phase, Long> phases = new EnumMap<>(Phase.class);
    for (Phase p : Phase.values()) {
      long n = ctx.phaseNanos(p);
      if (n >= 0) {
        phases.put(p, n);
      }
    }
    return new Finished(
        ctx.outcome().label(),
        ctx.traceId(),
        ctx.rootStart(),
        ctx.status(),
        ctx.errorType(),
        ctx.modelLabel(),
        ctx.poolName(),
        ctx.streaming(),
        ctx.rootNanos(),
        ctx.serverTtftNanos(),
        ctx.tpotNanos(),
        ctx.unattributedNanos(),
        ctx.inputTokens(),
        ctx.outputTokens(),
        ctx.finishReason(),
        phases);
  }

  /** GET on the admin listener. */
  protected Response admin(String path, String... headers) throws Exception {
    RequestOptions options =
        new RequestOptions()
            .setMethod(HttpMethod.GET)
            .setHost("127.0.0.1")
            .setPort(proxy.adminPort())
            .setURI(path);
    for (int i = 0; i + 1 < headers.length; i += 2) {
      options.putHeader(headers[i], headers[i + 1]);
    }
    return onClientContext(
            () ->
                client
                    .request(options)
                    .compose(req -> req.send())
                    .compose(
                        resp ->
                            resp.body()
                                .map(b -> new Response(resp.statusCode(), resp.headers(), b))))
        .await(30, TimeUnit.SECONDS);
  }

  protected Response call(String path, String body) throws Exception {
    return call(HttpMethod.POST, path, body, MultiMap.caseInsensitiveMultiMap());
  }

  protected Response call(HttpMethod method, String path, String body, MultiMap headers)
      throws Exception {
    return callAsync(method, path, body, headers).await(30, TimeUnit.SECONDS);
  }

  /** Sends a request without waiting; completes with the whole response. */
  protected io.vertx.core.Future<Response> callAsync(String path, String body) {
    return callAsync(HttpMethod.POST, path, body, MultiMap.caseInsensitiveMultiMap());
  }

  protected io.vertx.core.Future<Response> callAsync(
      HttpMethod method, String path, String body, MultiMap headers) {
    RequestOptions options =
        new RequestOptions()
            .setMethod(method)
            .setHost("127.0.0.1")
            .setPort(proxy.port())
            .setURI(path)
            .setHeaders(headers);
    if (body != null && !headers.contains("content-type")) {
      options.putHeader("content-type", "application/json");
    }
    return onClientContext(
        () ->
            client
                .request(options)
                .compose(req -> body == null ? req.send() : req.send(body))
                .compose(
                    resp ->
                        resp.body().map(b -> new Response(resp.statusCode(), resp.headers(), b))));
  }

  protected static String chat(String content, boolean stream) {
    return "{\"model\":\"sim-llama\",\"stream\":"
        + stream
        + ",\"messages\":[{\"role\":\"user\",\"content\":\""
        + content
        + "\"}],\"max_tokens\":8}";
  }

  /** Waits until {@code n} requests finished (observers run after the response ended). */
  protected List<Finished> awaitFinished(int n) {
    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> finished.size() >= n);
    return List.copyOf(finished);
  }

  /** Waits until the in-memory exporter holds {@code n} root spans and returns all spans. */
  protected List<SpanData> awaitRoots(int n) {
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(
            () ->
                spans.getFinishedSpanItems().stream()
                        .filter(
                            s ->
                                !s.getParentSpanContext().isValid()
                                    || s.getParentSpanContext().isRemote())
                        .count()
                    >= n);
    return spans.getFinishedSpanItems();
  }

  /** Asserts the pool holds no slot and no waiter and nothing is in flight. */
  protected void assertIdle() {
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () -> {
              assertThat(proxy.inFlight()).isZero();
              assertThat(proxy.bodyBudget().uploads()).as("bodies being received").isZero();
              assertThat(proxy.bodyBudget().bufferedBytes()).as("body bytes held").isZero();
              for (SlotPool p : proxy.slotPools().values()) {
                assertThat(p.inUse()).as("slots in use in " + p.name()).isZero();
                assertThat(p.queueDepth()).as("queue depth of " + p.name()).isZero();
              }
            });
  }
}
