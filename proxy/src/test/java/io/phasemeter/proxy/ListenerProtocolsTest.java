package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.handler.timeout.IdleStateHandler;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The listener's protocol options ({@link ListenerProtocols#apply}) by listener kind, and the
 * read-idle handover on real Vert.x connections: taken away where it is, said once where it cannot
 * be (the canary for a Vert.x upgrade that moves it).
 */
class ListenerProtocolsTest {
  private static final Duration RECEIVE = Duration.ofSeconds(7);
  private static final ProxyConfig.ServerTls TLS = new ProxyConfig.ServerTls("c.pem", "k.pem");

  private Vertx vertx;

  @BeforeEach
  void setUp() {
    vertx = Vertx.vertx();
  }

  @AfterEach
  void tearDown() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static ProxyConfig.Listen listen(Boolean http2, ProxyConfig.ServerTls tls) {
    return new ProxyConfig.Listen("127.0.0.1", 0, 0, http2, null, null, tls);
  }

  @Test
  void plaintextWithHttp2IsH2cWithTheReadIdleBoundAndTheLimits() {
    ProxyConfig.Listen l = listen(true, null);
    HttpServerOptions o = ListenerProtocols.apply(new HttpServerOptions(), l, RECEIVE);
    assertThat(ListenerProtocols.h2c(l)).isTrue();
    assertThat(o.isHttp2ClearTextEnabled()).isTrue();
    assertThat(o.getReadIdleTimeout()).isEqualTo(7000);
    assertThat(o.getIdleTimeoutUnit()).isEqualTo(TimeUnit.MILLISECONDS);
    assertThat(o.getInitialSettings().getMaxConcurrentStreams())
        .isEqualTo(ProxyConfig.Listen.DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS);
    assertThat(o.getInitialSettings().getMaxHeaderListSize())
        .isEqualTo(ProxyConfig.Listen.DEFAULT_HTTP2_MAX_HEADER_LIST_SIZE);
  }

  @Test
  void tlsWithHttp2OffersH2ByAlpnWithTheLimitsButNoCleartextH2NorReadIdleTimer() {
    ProxyConfig.Listen l = listen(null, TLS);
    HttpServerOptions o = ListenerProtocols.apply(new HttpServerOptions(), l, RECEIVE);
    assertThat(ListenerProtocols.http2(l)).as("on by default with TLS").isTrue();
    assertThat(ListenerProtocols.h2c(l)).isFalse();
    assertThat(o.getAlpnVersions()).containsExactly(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1);
    assertThat(o.isHttp2ClearTextEnabled()).isFalse();
    assertThat(o.getReadIdleTimeout()).isZero();
    assertThat(o.getInitialSettings().getMaxConcurrentStreams())
        .isEqualTo(ProxyConfig.Listen.DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS);
  }

  @Test
  void withoutHttp2NeitherH2cNorTheReadIdleTimer() {
    for (ProxyConfig.Listen l : List.of(listen(false, null), listen(false, TLS))) {
      HttpServerOptions o = ListenerProtocols.apply(new HttpServerOptions(), l, RECEIVE);
      assertThat(o.getAlpnVersions()).containsExactly(HttpVersion.HTTP_1_1);
      assertThat(o.isHttp2ClearTextEnabled()).isFalse();
      assertThat(o.getReadIdleTimeout()).isZero();
    }
  }

  @Test
  void aConnectionThatIsNotVertxsConnectionBaseIsSaidOnceAsAnError() {
    List<String> errors = new CopyOnWriteArrayList<>();
    ListenerProtocols.IdleHandover idle = new ListenerProtocols.IdleHandover("public", errors::add);
    HttpConnection foreign =
        (HttpConnection)
            java.lang.reflect.Proxy.newProxyInstance(
                getClass().getClassLoader(),
                new Class<?>[] {HttpConnection.class},
                (p, m, a) -> {
                  throw new UnsupportedOperationException(m.getName());
                });
    assertThat(idle.accepted(foreign)).isFalse();
    assertThat(idle.accepted(foreign)).isFalse();
    assertThat(errors)
        .singleElement()
        .asString()
        .contains("listen.http2", "public", "ConnectionBase", "listen.http2: false");
  }

  @Test
  void theReadIdleHandlerIsTakenAwayFromAConnectionOfAnH2cListener() throws Exception {
    List<String> errors = new CopyOnWriteArrayList<>();
    ListenerProtocols.IdleHandover idle = new ListenerProtocols.IdleHandover("public", errors::add);
    HttpServerOptions options =
        ListenerProtocols.apply(new HttpServerOptions(), listen(true, null), RECEIVE);
    // Before and after the handover: whether the connection has Vert.x's read-idle handler.
    CompletableFuture<List<Boolean>> seen = new CompletableFuture<>();
    int port =
        serve(
            options,
            c -> {
              boolean before = hasIdle(c);
              boolean taken = idle.accepted(c);
              seen.complete(List.of(before, taken, hasIdle(c)));
            });
    assertThat(get(port)).isEqualTo(200);
    assertThat(seen.get(5, TimeUnit.SECONDS)).containsExactly(true, true, false);
    assertThat(errors).isEmpty();
  }

  @Test
  void aConnectionWithoutTheReadIdleHandlerIsSaidOnceAsAnError() throws Exception {
    List<String> errors = new CopyOnWriteArrayList<>();
    ListenerProtocols.IdleHandover idle = new ListenerProtocols.IdleHandover("public", errors::add);
    List<Boolean> taken = new CopyOnWriteArrayList<>();
    // A listener that set no read-idle timer: what the handover would meet if Vert.x moved it.
    int port = serve(new HttpServerOptions(), c -> taken.add(idle.accepted(c)));
    assertThat(get(port)).isEqualTo(200);
    assertThat(get(port)).isEqualTo(200);
    assertThat(taken).containsExactly(false, false);
    assertThat(errors).singleElement().asString().contains("no read-idle handler");
  }

  @Test
  void anIdleHandlerThatAlsoTimesWritesIsKeptAndSaidOnceAsAnError() throws Exception {
    List<String> errors = new CopyOnWriteArrayList<>();
    ListenerProtocols.IdleHandover idle = new ListenerProtocols.IdleHandover("public", errors::add);
    // Vert.x puts read and write idle in one handler: removing it would lose the write timer.
    HttpServerOptions options =
        ListenerProtocols.apply(new HttpServerOptions(), listen(true, null), RECEIVE)
            .setWriteIdleTimeout(30_000);
    CompletableFuture<List<Boolean>> seen = new CompletableFuture<>();
    int port =
        serve(
            options,
            c -> {
              boolean taken = idle.accepted(c);
              seen.complete(List.of(taken, hasIdle(c)));
            });
    assertThat(get(port)).isEqualTo(200);
    assertThat(seen.get(5, TimeUnit.SECONDS)).containsExactly(false, true);
    assertThat(errors).singleElement().asString().contains("also times writes");
  }

  private static boolean hasIdle(HttpConnection c) {
    return ((io.vertx.core.net.impl.ConnectionBase) c)
            .channelHandlerContext()
            .pipeline()
            .get(IdleStateHandler.class)
        != null;
  }

  private int serve(HttpServerOptions options, io.vertx.core.Handler<HttpConnection> onConnection)
      throws Exception {
    HttpServer server =
        vertx
            .createHttpServer(options.setHost("127.0.0.1").setPort(0))
            .connectionHandler(onConnection)
            .requestHandler(r -> r.response().end("ok"))
            .listen()
            .await(5, TimeUnit.SECONDS);
    return server.actualPort();
  }

  /** One GET on a connection of its own; returns the status. */
  private int get(int port) throws Exception {
    HttpClient client = vertx.createHttpClient();
    try {
      return client
          .request(io.vertx.core.http.HttpMethod.GET, port, "127.0.0.1", "/")
          .compose(r -> r.send().compose(resp -> resp.body().map(b -> resp.statusCode())))
          .toCompletionStage()
          .toCompletableFuture()
          .get(5, TimeUnit.SECONDS);
    } finally {
      client.close().toCompletionStage().toCompletableFuture().get(5, TimeUnit.SECONDS);
    }
  }
}
