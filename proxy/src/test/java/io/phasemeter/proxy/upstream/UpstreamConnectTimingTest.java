package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What {@code upstream_connect_ms} and {@code llm_upstream_connect_seconds} time: the set-up of a
 * new connection a request waited for, and never the time it spent queued for one at the pool's
 * {@code connections.max}. The pool's clock is moved by hand, so a queue wait shows as exactly the
 * time the test put in it.
 */
class UpstreamConnectTimingTest {
  private static final long QUEUED_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final Vertx vertx = Vertx.vertx();
  private final List<AutoCloseable> closers = new ArrayList<>();
  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final NanoClock clock =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return now.get();
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return nanoTime;
        }
      };
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closers) {
      c.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private UpstreamPool pool(int port) {
    return pool(port, "");
  }

  private UpstreamPool pool(int port, String extra) {
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                health: {path: null}
            %s"""
                .formatted(port, extra),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), clock, null);
    pool.bindTo(registry);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    return pool;
  }

  private Timer connectTimer() {
    return registry.get("llm.upstream.connect").tag("tls", "false").timer();
  }

  private HttpServer server(io.vertx.core.Handler<HttpServerRequest> handler) throws Exception {
    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(handler)
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    return server;
  }

  @Test
  void aRequestQueuedAtConnectionsMaxIsNotTimedAsTheConnectItGetsAfterAClose() throws Exception {
    Queue<HttpServerRequest> held = new ConcurrentLinkedQueue<>();
    HttpServer server = server(held::add); // Never answers: each request keeps its connection.
    UpstreamPool pool = pool(server.actualPort());
    UpstreamHost host = pool.hosts().get(0);
    int max = pool.config().slottedConnections();

    List<HttpClientRequest> holding = new ArrayList<>();
    for (int i = 0; i < max; i++) {
      HttpClientRequest r = pool.open(host, "/v1/chat/completions").await(10, TimeUnit.SECONDS);
      // The control: each of these asked an idle pool and waited for its own connect.
      assertThat(pool.connect(r)).as("request %d", i).isNotNull();
      r.setChunked(true).write("{");
      holding.add(r);
    }
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> held.size() == max);
    assertThat(connectTimer().count()).isEqualTo(max);

    Future<HttpClientRequest> waiting = pool.open(host, "/v1/chat/completions");
    now.addAndGet(QUEUED_NANOS); // Queued behind the held connections.
    holding.get(0).reset(); // HTTP/1.1: closes one; the pool connects anew for the waiter.
    HttpClientRequest granted = waiting.await(10, TimeUnit.SECONDS);

    assertThat(pool.connect(granted)).as("a queue wait is no connect").isNull();
    assertThat(connectTimer().count()).isEqualTo(max);
    assertThat(connectTimer().max(TimeUnit.NANOSECONDS)).isLessThan(QUEUED_NANOS);
    granted.reset();
    holding.forEach(HttpClientRequest::reset);
  }

  @Test
  void onlyTheFirstRequestOnAConnectionIsNewOnIt() throws Exception {
    HttpServer server = server(r -> r.response().end("ok"));
    // One unslotted connection: the second request waits for the first's, and gets it.
    UpstreamPool pool = pool(server.actualPort(), "    connections: {unslotted: 1}\n");
    UpstreamHost host = pool.hosts().get(0);

    HttpClientRequest first =
        pool.open(host, HttpMethod.GET, "/v1/models", false).await(10, TimeUnit.SECONDS);
    Future<HttpClientRequest> next = pool.open(host, HttpMethod.GET, "/v1/models", false);
    assertThat(pool.reused(first)).isFalse();
    assertThat(pool.firstOnConnection(first)).isTrue();
    assertThat(pool.connect(first)).isNotNull();
    first.send().compose(HttpClientResponse::body).await(10, TimeUnit.SECONDS);

    HttpClientRequest second = next.await(10, TimeUnit.SECONDS);
    assertThat(second.connection()).isSameAs(first.connection());
    assertThat(pool.reused(second)).isTrue();
    assertThat(pool.firstOnConnection(second)).isFalse();
    assertThat(pool.connect(second)).isNull();
    second.send().compose(HttpClientResponse::body).await(10, TimeUnit.SECONDS);
    pool.ended(host);
    pool.ended(host);
    assertThat(connectTimer().count()).isEqualTo(1);
  }
}
