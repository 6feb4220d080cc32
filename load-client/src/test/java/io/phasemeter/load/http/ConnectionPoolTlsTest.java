package io.phasemeter.load.http;

import static io.phasemeter.load.http.RequestRunnerSimulatorTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.testing.TestPki;
import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pool over TLS against servers that do what vLLM's and others do: ALPN choosing http/1.1
 * although {@code --http2} asked for h2 (uvicorn always does), handshakes that fail, a host name
 * the certificate does not carry, an h2 server lowering its stream limit. Counts and the server's
 * own observations, never time: relays in front of the servers hold connections to make an order
 * certain.
 */
@ExtendWith(VertxExtension.class)
class ConnectionPoolTlsTest {
  private static final String STREAM =
      "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n"
          + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1}}\n\n"
          + "data: [DONE]\n\n";

  @TempDir static Path dir;

  private Vertx vertx;
  private TestPki pki;
  private HttpServer http11Only;
  private final List<String> connectionHeaders = new CopyOnWriteArrayList<>();
  private final Set<HttpVersion> versions = ConcurrentHashMap.newKeySet();
  private final List<RequestRunner> runners = new ArrayList<>();
  private final List<HttpServer> servers = new ArrayList<>();
  private final List<NetServer> relays = new ArrayList<>();

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    this.vertx = vertx;
    pki = TestPki.create(dir, "ca");
    TestPki.Issued both = pki.server("server", "localhost", "127.0.0.1");
    http11Only =
        server(
            both,
            new HttpServerOptions().setAlpnVersions(List.of(HttpVersion.HTTP_1_1)),
            req -> {
              versions.add(req.version());
              connectionHeaders.add(String.valueOf(req.getHeader("connection")));
              answer(req);
            });
  }

  @AfterEach
  void stop() throws Exception {
    for (RequestRunner r : runners) {
      await(r.close());
    }
    for (NetServer r : relays) {
      await(r.close());
    }
    for (HttpServer s : servers) {
      await(s.close());
    }
  }

  private static void answer(HttpServerRequest req) {
    req.body()
        .onComplete(b -> req.response().putHeader("content-type", "text/event-stream").end(STREAM));
  }

  private HttpServer server(
      TestPki.Issued cert,
      HttpServerOptions options,
      io.vertx.core.Handler<HttpServerRequest> handler)
      throws Exception {
    HttpServer s =
        await(
            vertx
                .createHttpServer(
                    options
                        .setSsl(true)
                        .setUseAlpn(true)
                        .setKeyCertOptions(
                            new PemKeyCertOptions()
                                .setCertPath(cert.certFile().toString())
                                .setKeyPath(cert.keyFile().toString())))
                .requestHandler(handler)
                .listen(0, "127.0.0.1"));
    servers.add(s);
    return s;
  }

  /** Relays to {@code port}; {@code hold} decides, per connection accepted, when it may pass. */
  private NetServer relay(int port, java.util.function.Function<NetSocket, Future<Void>> hold)
      throws Exception {
    NetServer relay =
        await(
            vertx
                .createNetServer()
                .connectHandler(
                    client -> {
                      client.pause();
                      hold.apply(client)
                          .onComplete(
                              v ->
                                  vertx
                                      .createNetClient()
                                      .connect(port, "127.0.0.1")
                                      .onSuccess(
                                          server -> {
                                            client.pipeTo(server);
                                            server.pipeTo(client);
                                            client.resume();
                                          })
                                      .onFailure(e -> client.close()));
                    })
                .listen(0, "127.0.0.1"));
    relays.add(relay);
    return relay;
  }

  private RequestRunner runner(String url, boolean reuse, Transport transport) {
    RequestRunner r =
        new RequestRunner(
            vertx, URI.create(url), 8, Duration.ofSeconds(10), gap -> {}, reuse, transport);
    runners.add(r);
    return r;
  }

  private static Future<ClientResult> send(RequestRunner r, long seq) {
    return r.run(
        seq,
        new RequestSpec("/v1/completions", Buffer.buffer("{}"), "b", 10, 1, true),
        "0000000000000007000000000000012f",
        null,
        0,
        System.nanoTime());
  }

  private static List<ClientResult> all(List<Future<ClientResult>> futures) throws Exception {
    List<ClientResult> out = new ArrayList<>();
    for (Future<ClientResult> f : futures) {
      out.add(await(f));
    }
    return out;
  }

  /** dns + connect + tls within transport_setup, for a request that has them. */
  private static void splitAddsUp(ClientResult r) {
    assertThat(r.tlsNanos()).isGreaterThanOrEqualTo(0);
    assertThat(Math.max(0, r.dnsNanos()) + r.connectNanos() + r.tlsNanos())
        .isLessThanOrEqualTo(r.transportSetupNanos());
  }

  @Test
  void http2FallingBackToHttp11OpensConnectionsSideBySide() throws Exception {
    // The first connection passes; a later one waits until another is waiting too (then all
    // pass), so the relay sees two at once only if the pool opens them side by side (a fallback
    // timer lets a pool that opens them one by one finish, and fail the count).
    AtomicInteger accepted = new AtomicInteger();
    AtomicInteger mostHeldAtOnce = new AtomicInteger();
    List<Promise<Void>> held = new ArrayList<>();
    NetServer relay =
        relay(
            http11Only.actualPort(),
            client -> {
              if (accepted.getAndIncrement() == 0 || mostHeldAtOnce.get() >= 2) {
                return Future.succeededFuture();
              }
              Promise<Void> p = Promise.promise();
              held.add(p);
              mostHeldAtOnce.accumulateAndGet(held.size(), Math::max);
              if (held.size() >= 2) {
                held.forEach(Promise::tryComplete);
                held.clear();
              } else {
                vertx.setTimer(3_000, id -> p.tryComplete());
              }
              return p.future();
            });
    RequestRunner r =
        runner(
            "https://localhost:" + relay.actualPort(),
            true,
            Transport.of(pki.caFile(), false, true));
    List<Future<ClientResult>> sent = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      sent.add(send(r, i));
    }
    List<ClientResult> results = all(sent);

    assertThat(results).allMatch(ClientResult::ok);
    assertThat(mostHeldAtOnce.get()).isGreaterThanOrEqualTo(2);
    assertThat(r.connectionsOpened()).isBetween(2L, 8L);
    assertThat(r.protocol()).isEqualTo("http/1.1");
    assertThat(versions).containsOnly(HttpVersion.HTTP_1_1);
    // Reuse is on: no request asked the server to close.
    assertThat(connectionHeaders).containsOnly("null");
    List<ClientResult> opened = results.stream().filter(x -> x.connectNanos() >= 0).toList();
    assertThat(opened).isNotEmpty().hasSizeLessThanOrEqualTo((int) r.connectionsOpened());
    opened.forEach(ConnectionPoolTlsTest::splitAddsUp);
    assertThat(opened).allMatch(x -> x.dnsNanos() >= 0);
  }

  @Test
  void connectionCloseIsAskedPerConnectionWhenReuseIsOff() throws Exception {
    RequestRunner h1 =
        runner(
            "https://127.0.0.1:" + http11Only.actualPort(),
            false,
            Transport.of(pki.caFile(), false, true));
    List<ClientResult> results = all(List.of(send(h1, 1), send(h1, 2)));
    Set<HttpVersion> h2Versions = ConcurrentHashMap.newKeySet();
    List<String> h2Headers = new CopyOnWriteArrayList<>();
    HttpServer h2 =
        server(
            pki.server("h2", "127.0.0.1"),
            new HttpServerOptions(),
            req -> {
              h2Versions.add(req.version());
              h2Headers.add(String.valueOf(req.getHeader("connection")));
              answer(req);
            });
    RequestRunner overH2 =
        runner(
            "https://127.0.0.1:" + h2.actualPort(), false, Transport.of(pki.caFile(), false, true));
    List<ClientResult> h2Results = all(List.of(send(overH2, 3), send(overH2, 4)));

    assertThat(results).allMatch(ClientResult::ok);
    // --http2 asked, http/1.1 chosen: one request per connection, and the server is told so.
    assertThat(connectionHeaders).containsExactly("close", "close");
    assertThat(h1.protocol()).isEqualTo("http/1.1");
    assertThat(h1.connectionsOpened()).isEqualTo(2);
    assertThat(h2Results).allMatch(ClientResult::ok);
    assertThat(h2Versions).containsOnly(HttpVersion.HTTP_2);
    assertThat(h2Headers).containsExactly("null", "null");
    assertThat(overH2.protocol()).isEqualTo("h2");
    results.forEach(ConnectionPoolTlsTest::splitAddsUp);
    h2Results.forEach(ConnectionPoolTlsTest::splitAddsUp);
  }

  @Test
  void aRequestHandedAConnectionOpenedBeforeItAskedCarriesThePartItWaitedThrough()
      throws Exception {
    // Reuse off: two requests, two connections. The first connection is held at the relay, so
    // the second one opened comes first and goes to the first request (the longest waiter); the
    // first connection, begun before the second request asked, then goes to the second.
    AtomicInteger accepted = new AtomicInteger();
    NetServer relay =
        relay(
            http11Only.actualPort(),
            client -> {
              Promise<Void> p = Promise.promise();
              if (accepted.getAndIncrement() == 0) {
                vertx.setTimer(300, id -> p.complete());
              } else {
                p.complete();
              }
              return p.future();
            });
    RequestRunner r =
        runner(
            "https://127.0.0.1:" + relay.actualPort(),
            false,
            Transport.of(pki.caFile(), false, false));
    // A first request warms everything up (and is the relay's first connection).
    assertThat(await(send(r, 0)).ok()).isTrue();
    accepted.set(0);
    List<ClientResult> results = all(List.of(send(r, 1), send(r, 2)));

    assertThat(results).allMatch(ClientResult::ok);
    assertThat(r.connectionsOpened()).isEqualTo(3);
    // Both opened a connection; each carries the part of a set-up it waited through.
    for (ClientResult x : results) {
      assertThat(x.connectNanos()).isGreaterThanOrEqualTo(0);
      assertThat(x.dnsNanos()).isEqualTo(-1);
      splitAddsUp(x);
    }
  }

  @Test
  void failedHandshakesLeaveNoNoteBehind() throws Exception {
    // The platform's trust refuses the test CA: every handshake fails at the client.
    RequestRunner r =
        runner("https://127.0.0.1:" + http11Only.actualPort(), false, Transport.DEFAULT);
    List<Future<ClientResult>> sent = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      sent.add(send(r, i));
    }
    List<ClientResult> results = all(sent);

    assertThat(results).allMatch(x -> x.error() == ErrorClass.CONNECT);
    assertThat(await(vertx.executeBlocking(() -> r.pool.tlsNotesHeld()))).isZero();
  }

  @Test
  void theUrlsHostMustBeInTheCertificateWhateverAddressItResolvesTo() throws Exception {
    HttpServer namedOnly =
        server(
            pki.server("named", "localhost"),
            new HttpServerOptions(),
            ConnectionPoolTlsTest::answer);
    HttpServer addressOnly =
        server(
            pki.server("address", "127.0.0.1"),
            new HttpServerOptions(),
            ConnectionPoolTlsTest::answer);
    Transport trust = Transport.of(pki.caFile(), false, false);

    ClientResult byAddress =
        await(send(runner("https://127.0.0.1:" + namedOnly.actualPort(), true, trust), 1));
    ClientResult byName =
        await(send(runner("https://localhost:" + namedOnly.actualPort(), true, trust), 2));
    ClientResult nameToAddress =
        await(send(runner("https://localhost:" + addressOnly.actualPort(), true, trust), 3));
    ClientResult address =
        await(send(runner("https://127.0.0.1:" + addressOnly.actualPort(), true, trust), 4));

    assertThat(byAddress.error()).isEqualTo(ErrorClass.CONNECT);
    assertThat(nameToAddress.error()).isEqualTo(ErrorClass.CONNECT);
    // The controls: the same servers, the names they carry.
    assertThat(byName.ok()).isTrue();
    assertThat(address.ok()).isTrue();
  }

  @Test
  void anH2ConnectionPastItsLoweredStreamLimitTakesNoMoreStreams() throws Exception {
    List<HttpServerRequest> pending = new CopyOnWriteArrayList<>();
    Map<HttpConnection, Integer> streamsSeen = new ConcurrentHashMap<>();
    Promise<Void> lowered = Promise.promise();
    HttpServer h2 =
        server(
            pki.server("h2", "127.0.0.1"),
            new HttpServerOptions(),
            req ->
                req.body()
                    .onComplete(
                        b -> {
                          streamsSeen.merge(req.connection(), 1, Integer::sum);
                          pending.add(req);
                          if (pending.size() == 2) {
                            // Two streams open on the connection: the limit drops to one.
                            req.connection()
                                .updateSettings(new Http2Settings().setMaxConcurrentStreams(1))
                                .onComplete(v -> lowered.tryComplete());
                          } else if (pending.size() == 3) {
                            pending.forEach(
                                p ->
                                    p.response()
                                        .putHeader("content-type", "text/event-stream")
                                        .end(STREAM));
                          }
                        }));
    RequestRunner r =
        runner(
            "https://127.0.0.1:" + h2.actualPort(), true, Transport.of(pki.caFile(), false, true));
    Future<ClientResult> first = send(r, 1);
    Future<ClientResult> second = send(r, 2);
    await(lowered.future());
    Future<ClientResult> third = send(r, 3);
    List<ClientResult> results = all(List.of(first, second, third));

    assertThat(results).allMatch(ClientResult::ok);
    // The third went out on a second connection, not as a third stream on the first.
    assertThat(r.connectionsOpened()).isEqualTo(2);
    assertThat(streamsSeen.values()).containsExactlyInAnyOrder(2, 1);
  }
}
