package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.phasemeter.proxy.config.ConfigLoader;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * A bounded soak: a steady streamed load (32 clients in a closed loop on 32 slots, each stream 20
 * tokens 5 ms apart), one request in ten abandoned by its client mid-stream. After a warm-up the
 * heap is measured after a full GC, and again at the end: it must not grow (by more than 32 MB). At
 * the end nothing is in flight, no slot is held, the upstream holds no more connections than the
 * pool has slots, and there is exactly one record per request sent.
 *
 * <p>The duration is {@code -Dphasemeter.soak} (ISO-8601, default {@code PT25S}: as many requests
 * as 16 clients sent in 45 s, in about half the time, since a stream's length is fixed and the
 * machine has room for twice the streams); a long run: {@code ./mvnw -B -o -pl proxy test
 * -Dtest=SoakTest -Dphasemeter.soak=PT30M}. Spans are recorded but not kept (no exporter) and
 * records are capped, as in production; the figures are printed.
 */
class SoakTest extends ProxyTestBase {
  private static final int CLIENTS = 32;
  private static final int SLOTS = 32;
  private static final int TOKENS = 20;
  private static final long MAX_HEAP_GROWTH = 32L << 20;

  private final AtomicLong sent = new AtomicLong();
  private final AtomicLong ok = new AtomicLong();
  private final AtomicLong disconnects = new AtomicLong();
  private final AtomicLong failures = new AtomicLong();
  private final AtomicLong records = new AtomicLong();
  private final AtomicInteger upstreamOpen = new AtomicInteger();
  private final AtomicInteger upstreamMaxOpen = new AtomicInteger();
  private volatile long stopAt;

  @Test
  void steadyStreamsWithDisconnectsLeakNothing() throws Exception {
    Duration duration = Duration.parse(System.getProperty("phasemeter.soak", "PT25S"));
    Duration warmUp = duration.dividedBy(6);
    int port = startStreamingBackend();
    OpenTelemetrySdk quiet =
        OpenTelemetrySdk.builder()
            .setTracerProvider(SdkTracerProvider.builder().build())
            .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
            .build();
    proxy =
        PhasemeterProxy.builder(
                vertx,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\n"
                        + "admin: {host: 127.0.0.1, port: 0}\n"
                        + "telemetry: {records: {max: 5000, ttl: 1m}}\n"
                        + "pools:\n"
                        + "  - name: default\n"
                        + "    models: [sim-llama]\n"
                        + "    upstreams: [http://127.0.0.1:"
                        + port
                        + "]\n"
                        + "    slots: "
                        + SLOTS
                        + "\n"
                        + "    health: {path: null}\n",
                    "soak.yaml"))
            .openTelemetry(quiet)
            .observer(ctx -> records.incrementAndGet())
            .start()
            .await(10, TimeUnit.SECONDS);

    long started = System.nanoTime();
    stopAt = started + duration.toNanos();
    List<Future<Void>> clients = new ArrayList<>();
    for (int c = 0; c < CLIENTS; c++) {
      SplittableRandom random = new SplittableRandom(c);
      clients.add(onClientContext(() -> loop(random)));
    }
    Thread.sleep(warmUp.toMillis());
    long heapStart = heapAfterGc();
    long sentAtStart = sent.get();
    Future.all(clients).await(duration.toSeconds() + 60, TimeUnit.SECONDS);
    long took = System.nanoTime() - started;

    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> records.get() == sent.get());
    assertIdle();
    long heapEnd = heapAfterGc();
    String metrics = admin("/metrics").text();
    quiet.close();

    String figures =
        String.format(
            "soak: %ds, %d requests (%.0f/s), %d ok, %d disconnected by the client, %d failed,"
                + " %d records; heap after full GC %.1f MB after warm-up (%d requests in)"
                + " -> %.1f MB at the end (%+.1f MB); upstream connections max %d, at the end %d",
            took / 1_000_000_000L,
            sent.get(),
            sent.get() / (took / 1e9),
            ok.get(),
            disconnects.get(),
            failures.get(),
            records.get(),
            heapStart / 1e6,
            sentAtStart,
            heapEnd / 1e6,
            (heapEnd - heapStart) / 1e6,
            upstreamMaxOpen.get(),
            upstreamOpen.get());
    System.out.println(figures);

    assertThat(records.get()).as(figures).isEqualTo(sent.get());
    assertThat(failures.get()).as(figures).isZero();
    assertThat(disconnects.get()).as(figures).isPositive();
    assertThat(ok.get() + disconnects.get()).as(figures).isEqualTo(sent.get());
    assertThat(heapEnd).as(figures).isLessThanOrEqualTo(heapStart + MAX_HEAP_GROWTH);
    assertThat(upstreamOpen.get()).as(figures).isLessThanOrEqualTo(SLOTS);
    assertThat(metrics)
        .containsPattern("llm_slots_in_use\\{llm_pool=\"default\"\\} 0")
        .containsPattern("llm_requests_in_flight\\{llm_pool=\"default\"\\} 0");
  }

  /** One client: streams until the soak ends, abandoning one in ten streams mid-way. */
  private Future<Void> loop(SplittableRandom random) {
    if (System.nanoTime() >= stopAt) {
      return Future.succeededFuture();
    }
    boolean abandon = random.nextInt(10) == 0;
    sent.incrementAndGet();
    return stream(abandon)
        .otherwise(
            t -> {
              failures.incrementAndGet();
              return null;
            })
        .compose(v -> loop(random));
  }

  private Future<Void> stream(boolean abandon) {
    RequestOptions o =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost("127.0.0.1")
            .setPort(proxy.port())
            .setURI("/v1/chat/completions")
            .putHeader("content-type", "application/json");
    return client
        .request(o)
        .compose(
            req ->
                req.send(chat("soak", true))
                    .compose(
                        resp -> {
                          if (resp.statusCode() != 200) {
                            return Future.failedFuture("status " + resp.statusCode());
                          }
                          if (!abandon) {
                            return resp.body()
                                .compose(
                                    b -> {
                                      if (!b.toString().contains("[DONE]")) {
                                        return Future.failedFuture("stream not finished");
                                      }
                                      ok.incrementAndGet();
                                      return Future.succeededFuture();
                                    });
                          }
                          Promise<Void> gone = Promise.promise();
                          AtomicInteger chunks = new AtomicInteger();
                          resp.handler(
                              b -> {
                                if (chunks.incrementAndGet() == 3 && gone.tryComplete()) {
                                  disconnects.incrementAndGet();
                                  req.connection().close();
                                }
                              });
                          resp.exceptionHandler(t -> gone.tryFail(t));
                          resp.endHandler(
                              v -> {
                                // The stream was over before the client could leave it.
                                if (gone.tryComplete()) {
                                  ok.incrementAndGet();
                                }
                              });
                          return gone.future();
                        }));
  }

  /** Streams {@value #TOKENS} content events 5 ms apart; counts its open connections. */
  private int startStreamingBackend() throws Exception {
    io.vertx.core.http.HttpServer server =
        vertx
            .createHttpServer()
            .connectionHandler(
                conn -> {
                  upstreamMaxOpen.accumulateAndGet(upstreamOpen.incrementAndGet(), Math::max);
                  conn.closeHandler(v -> upstreamOpen.decrementAndGet());
                })
            .requestHandler(
                req ->
                    req.body()
                        .onSuccess(
                            b -> {
                              HttpServerResponse resp = req.response();
                              resp.setChunked(true).putHeader("content-type", "text/event-stream");
                              resp.write(VllmScript.ROLE);
                              emit(resp, 0);
                            }))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    return server.actualPort();
  }

  private void emit(HttpServerResponse resp, int i) {
    if (resp.closed()) {
      return;
    }
    if (i == TOKENS) {
      resp.end(Buffer.buffer(VllmScript.FINISH + VllmScript.USAGE + VllmScript.DONE));
      return;
    }
    resp.write(VllmScript.content("t" + i));
    vertx.setTimer(5, t -> emit(resp, i + 1));
  }

  private static long heapAfterGc() throws InterruptedException {
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(200);
    }
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }
}
