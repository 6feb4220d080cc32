package io.phasemeter.load.http;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpConnectOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.SocketAddress;

/**
 * Builds the client's TLS context before the first connection, so that no request's {@code connect}
 * carries that one-off cost. Vert.x builds it when it first connects: the trust ({@code
 * --ca-file}'s PEM read on a worker thread), then, in the channel's initializer, the JDK context
 * for the URL's host (and, the first time in the JVM, the JDK's TLS classes and providers): 60 ms
 * for a runner, over a second for the first in a JVM, measured on a busy 2-core VM. Those happen
 * between the pool asking for a connection and the TCP connect, where {@code connect} is timed.
 *
 * <p>So the client connects once, with the run's own options and the URL's host (its SNI name), to
 * a listener of its own on the loopback that closes every connection at once: Vert.x builds and
 * caches everything it will use for the real connections, and sends a ClientHello that goes
 * nowhere. The server under test sees nothing. Best effort: a failure here only means the first
 * connection pays as before.
 */
final class TlsWarmUp {
  private TlsWarmUp() {}

  /** Completes (never fails) once the client's TLS context for {@code connect}'s host is built. */
  static Future<Void> run(Vertx vertx, HttpClientAgent client, HttpConnectOptions connect) {
    Promise<Void> done = Promise.promise();
    NetServer closing = vertx.createNetServer().connectHandler(NetSocket::close);
    closing
        .listen(0, "127.0.0.1")
        .compose(
            server ->
                client.connect(
                    new HttpConnectOptions(connect)
                        .setServer(
                            SocketAddress.inetSocketAddress(server.actualPort(), "127.0.0.1"))))
        .onComplete(
            ar -> {
              if (ar.succeeded()) {
                ar.result().close();
              }
              closing.close().onComplete(v -> done.complete());
            });
    return done.future();
  }
}
