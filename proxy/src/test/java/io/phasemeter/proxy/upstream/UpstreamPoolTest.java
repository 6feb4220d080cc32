package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.channel.ConnectTimeoutException;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What {@code timeouts.connect} bounds: the TCP connect to the upstream, whose failure counts
 * towards ejection, and not the wait for a pooled connection, which is the proxy's own and must not
 * eject an upstream that answers. (Under a CPU-starved event loop, 1,000 streams on two cores, a 2
 * s bound on that wait timed out hundreds of requests, ejected the only upstream and turned the
 * overload into 503s for everyone.)
 */
class UpstreamPoolTest {
  private static final long CONNECT_MS = 200;

  private final Vertx vertx = Vertx.vertx();
  private final List<AutoCloseable> closers = new ArrayList<>();

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closers) {
      c.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private UpstreamPool pool(int port) {
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                timeouts: {connect: %dms, first_token: 30s, idle: 30s}
                health: {path: null}
                ejection: {after: 1, backoff: 30s, max_backoff: 30s}
            """
                .formatted(port, CONNECT_MS),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    return pool;
  }

  @Test
  void waitingForAPooledConnectionIsNotBoundedByTheConnectTimeout() throws Exception {
    Queue<HttpServerRequest> held = new ConcurrentLinkedQueue<>();
    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(held::add) // Never answers: each request keeps its connection.
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    UpstreamPool pool = pool(server.actualPort());
    UpstreamHost host = pool.hosts().get(0);
    int max = pool.config().slots() + 8; // The HTTP client's pool size.

    List<HttpClientRequest> holding = new ArrayList<>();
    for (int i = 0; i < max; i++) {
      HttpClientRequest r = pool.open(host, "/v1/chat/completions").await(10, TimeUnit.SECONDS);
      r.setChunked(true).write("{");
      holding.add(r);
    }
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> held.size() == max);

    Future<HttpClientRequest> waiting = pool.open(host, "/v1/chat/completions");
    // Five connect timeouts: with the wait bounded by timeouts.connect it would have failed.
    Thread.sleep(5 * CONNECT_MS);
    assertThat(waiting.isComplete()).as("still waiting for a pooled connection").isFalse();

    holding.get(0).reset(); // Frees one connection of the pool (HTTP/1.1: closes it).
    HttpClientRequest granted = waiting.await(10, TimeUnit.SECONDS);
    assertThat(granted).isNotNull();
    assertThat(pool.isAvailable(host)).isTrue();
    assertThat(pool.ejections()).isZero();
    granted.reset();
    holding.forEach(HttpClientRequest::reset);
  }

  @Test
  void aTcpConnectThatTimesOutStillFailsWithinTheConnectTimeout() throws Exception {
    // A listener whose accept queue is full drops further SYNs: those connects hang.
    ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    closers.add(listener);
    List<Socket> filling = new ArrayList<>();
    boolean hangs = false;
    for (int i = 0; i < 8 && !hangs; i++) {
      Socket s = new Socket();
      closers.add(s);
      try {
        s.connect(new InetSocketAddress(listener.getInetAddress(), listener.getLocalPort()), 300);
        filling.add(s);
      } catch (SocketTimeoutException e) {
        hangs = true;
      }
    }
    assertThat(hangs).as("the kernel dropped the SYN of a full accept queue").isTrue();
    UpstreamPool pool = pool(listener.getLocalPort());
    UpstreamHost host = pool.hosts().get(0);

    Throwable failure =
        pool.open(host, "/v1/chat/completions")
            .map(r -> (Throwable) null)
            .otherwise(t -> t)
            .await(30, TimeUnit.SECONDS);

    assertThat(failure).isInstanceOf(ConnectTimeoutException.class);
    assertThat(filling).isNotEmpty();
  }

  @Test
  void aTakenSpareIsReplacedOnlyAfterTheRequestsOwnTask() throws Exception {
    // Accepts and reads nothing: the kernel completes each connect.
    ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closers.add(listener);
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                connections: {reuse: "off", preconnect: 1}
                health: {path: null}
            """
                .formatted(listener.getLocalPort()),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    UpstreamHost host = pool.hosts().get(0);
    pool.startHealthChecks();
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> pool.sparesReady() == 1);

    // The request's own task: it takes the spare and writes its request before anything else runs
    // on its event loop; a replacement connecting inside that task would come before the write.
    io.vertx.core.Context context = vertx.getOrCreateContext();
    int[] connectingInTask = new int[1];
    Future<HttpClientRequest> request =
        Future.future(
            p ->
                context.runOnContext(
                    v -> {
                      Future<HttpClientRequest> opened = pool.open(host, "/v1/completions");
                      connectingInTask[0] = pool.sparesConnecting();
                      opened.onComplete(p);
                    }));

    assertThat(request.await(10, TimeUnit.SECONDS)).isNotNull();
    assertThat(pool.sparesTaken()).isEqualTo(1);
    assertThat(connectingInTask[0])
        .as("no replacement connecting during the request's task")
        .isZero();
    Awaitility.await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> pool.sparesReady() == 1 && pool.preconnected() == 2);
  }

  @Test
  void closingThePoolIsNotTheUpstreamClosingAfterItsResponse() throws Exception {
    java.util.concurrent.atomic.AtomicInteger closedByPool =
        new java.util.concurrent.atomic.AtomicInteger();
    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(r -> r.response().end("{}"))
            .connectionHandler(c -> c.closeHandler(v -> closedByPool.incrementAndGet()))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    UpstreamPool pool = pool(server.actualPort());
    UpstreamHost host = pool.hosts().get(0);
    HttpClientRequest r = pool.open(host, "/v1/completions").await(10, TimeUnit.SECONDS);
    r.send("{}").compose(resp -> resp.body()).await(10, TimeUnit.SECONDS);
    pool.responded(host, r);
    pool.ended(host);
    // The pool closes its kept-alive connection right after a response: at shutdown.
    pool.close().await(10, TimeUnit.SECONDS);
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> closedByPool.get() == 1);
    assertThat(pool.closedAfterResponse()).isZero();
  }

  @Test
  void anUpstreamThatAcceptsThenHangsUpAtOnceBacksOffLongerEachTime() throws Exception {
    io.vertx.core.net.NetServer server =
        vertx
            .createNetServer()
            // Hangs up 20 ms after accepting (well within the second that makes a spare
            // short-lived), so that the close comes after the proxy has set up its connection.
            .connectHandler(socket -> vertx.setTimer(20, id -> socket.close()))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                connections: {reuse: "off", preconnect: 1}
                health: {path: null}
                ejection: {backoff: 10ms, max_backoff: 100ms}
            """
                .formatted(server.actualPort()),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    pool.startHealthChecks();

    // Each connect succeeds and each spare is hung up on at once: the backoff's exponent grows
    // (it was reset by every successful connect, so the backoff never doubled).
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> pool.spareFailuresInRow() >= 4);
    assertThat(pool.ejections()).as("a failed preconnect ejects nothing").isZero();
  }

  @Test
  void aSpareTheUpstreamClosesBeforeItIsSetUpIsNeitherReadyNorCountedOpen() throws Exception {
    // Hangs up the moment it accepts: the close may reach the proxy before the spare's close
    // handler is set, which Vert.x then never calls (with epoll, the proxy's transport, the connect
    // and the hang-up can come in one wake-up, the close handled before the connect's future).
    Vertx proxyVertx = Vertx.vertx(new io.vertx.core.VertxOptions().setPreferNativeTransport(true));
    closers.add(() -> proxyVertx.close().await(10, TimeUnit.SECONDS));
    ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closers.add(listener);
    Thread hangUp =
        new Thread(
            () -> {
              while (!listener.isClosed()) {
                try {
                  listener.accept().close();
                } catch (java.io.IOException e) {
                  return; // Closed by the test.
                }
              }
            });
    hangUp.setDaemon(true);
    hangUp.start();
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                connections: {reuse: "off", preconnect: 1}
                health: {path: null}
                ejection: {backoff: 1ms, max_backoff: 5ms}
            """
                .formatted(listener.getLocalPort()),
            "test");
    UpstreamPool pool =
        new UpstreamPool(proxyVertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    pool.startHealthChecks();

    // Each spare is replaced after its backoff; one left ready while closed stopped that for good.
    Awaitility.await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> pool.preconnected() >= 3 && pool.sparesReady() == 0);
    listener.close();
    // Nothing listens now: connects fail, and every spare opened is seen closed.
    Awaitility.await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> pool.sparesReady() == 0 && pool.slottedOpen() == 0);
    assertThat(pool.ejections()).as("a failed preconnect ejects nothing").isZero();
  }

  @Test
  void aHealthCheckThatFindsTheUpstreamUpAgainOpensSparesAtOnce() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = free.getLocalPort();
    }
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                connections: {reuse: "off", preconnect: 1}
                health: {path: /health, interval: 50ms, timeout: 1s, failures: 1}
                ejection: {backoff: 10m, max_backoff: 10m}
            """
                .formatted(port),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    UpstreamHost host = pool.hosts().get(0);
    pool.startHealthChecks();
    // Nothing listens: the preconnect fails and waits its 10 min backoff; the checks mark it down.
    Awaitility.await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> pool.spareFailuresInRow() >= 1 && !host.healthy());

    HttpServer server =
        vertx
            .createHttpServer()
            .requestHandler(r -> r.response().end("{}"))
            .listen(port, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    // The check that finds it up opens the spare, long before the backoff would have.
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(host::healthy);
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> pool.sparesReady() == 1);
    assertThat(pool.spareFailuresInRow()).isZero();
  }

  @Test
  void aResponseRecordedAfterItsConnectionCarriedAnotherRequestIsNotTheLastOnIt() throws Exception {
    java.util.concurrent.atomic.AtomicInteger connections =
        new java.util.concurrent.atomic.AtomicInteger();
    HttpServer server =
        vertx
            .createHttpServer()
            .connectionHandler(c -> connections.incrementAndGet())
            // Keeps each connection alive; answers the first request and holds the second.
            .requestHandler(
                r -> {
                  if ("/first".equals(r.path())) {
                    r.response().end("{}");
                  }
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    closers.add(() -> server.close().await(10, TimeUnit.SECONDS));
    // One pooled connection: the second request gets the first one's, whenever it is handed back.
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: [http://127.0.0.1:%d]
                slots: 1
                connections: {max: 1}
                health: {path: null}
            """
                .formatted(server.actualPort()),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), NanoClock.system(), null);
    closers.add(() -> pool.close().await(10, TimeUnit.SECONDS));
    UpstreamHost host = pool.hosts().get(0);
    HttpClientRequest first = pool.open(host, "/first").await(10, TimeUnit.SECONDS);
    pool.reused(first);
    first.send("{}").compose(resp -> resp.body()).await(10, TimeUnit.SECONDS);

    // The pool hands the connection on before the first request's (paused) client has read the
    // end: the second request takes it, and only then does the first one record its response.
    HttpClientRequest second = pool.open(host, "/second").await(10, TimeUnit.SECONDS);
    assertThat(pool.reused(second)).as("the same pooled connection").isTrue();
    assertThat(connections.get()).isEqualTo(1);
    pool.responded(host, first);
    pool.ended(host);
    second.setChunked(true).sendHead().await(10, TimeUnit.SECONDS);
    // The second request's client leaves: the proxy's reset closes the connection.
    second.reset();
    Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> pool.slottedOpen() == 0);
    assertThat(pool.closedAfterResponse()).as("the proxy's own close").isZero();
  }

  @Test
  void aConnectionsChannelIsReadThroughVertxInternals() throws Exception {
    // OpenConnections reads a private field of Vert.x 5.0.7's UnpooledHttpClientConnection: a
    // Vert.x that moves it would quietly make every connection look open again.
    ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closers.add(listener);
    io.vertx.core.http.HttpClientAgent client = vertx.createHttpClient();
    io.vertx.core.http.HttpClientConnection c =
        client
            .connect(
                new io.vertx.core.http.HttpConnectOptions()
                    .setHost("127.0.0.1")
                    .setPort(listener.getLocalPort()))
            .await(10, TimeUnit.SECONDS);
    assertThat(OpenConnections.open(c)).isTrue();
    c.close().await(10, TimeUnit.SECONDS);
    assertThat(OpenConnections.open(c)).isFalse();
  }
}
