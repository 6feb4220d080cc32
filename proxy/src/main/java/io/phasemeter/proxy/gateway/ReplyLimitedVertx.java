package io.phasemeter.proxy.gateway;

import io.vertx.core.Completable;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.internal.VertxWrapper;
import io.vertx.core.internal.net.NetClientInternal;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.ClientSSLOptions;
import io.vertx.core.net.ConnectOptions;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.SocketAddress;
import io.vertx.core.spi.metrics.Metrics;
import java.util.concurrent.TimeUnit;

/**
 * The {@link Vertx} given to the Redis client: every TCP connection it opens gets a {@link
 * RedisReplyLimit} in front of the client's parser. The client opens its connections with {@code
 * vertx.createNetClient(...)} and offers no other hook on them; everything else is the real Vert.x.
 * The limit is put in when the connection is made, before its first read: Vert.x completes the
 * connect promise on the connection's event loop, and the Redis client sets its parser and sends
 * its first command only after that.
 */
final class ReplyLimitedVertx extends VertxWrapper {

  private ReplyLimitedVertx(VertxInternal delegate) {
    super(delegate);
  }

  /** {@code vertx}, whose TCP clients put a {@link RedisReplyLimit} on each connection. */
  static Vertx of(Vertx vertx) {
    return new ReplyLimitedVertx((VertxInternal) vertx);
  }

  @Override
  public NetClient createNetClient(NetClientOptions options) {
    return new Client((NetClientInternal) delegate.createNetClient(options));
  }

  /** The handler's name in the pipeline. */
  static final String HANDLER = "phasemeter-redis-reply-limit";

  private static NetSocket limit(NetSocket socket) {
    ((NetSocketInternal) socket)
        .channelHandlerContext()
        .pipeline()
        .addBefore("handler", HANDLER, new RedisReplyLimit());
    return socket;
  }

  private record Client(NetClientInternal delegate) implements NetClientInternal {
    @Override
    public void connectInternal(
        ConnectOptions connectOptions, Promise<NetSocket> connectHandler, ContextInternal context) {
      Promise<NetSocket> limited = context.promise();
      limited
          .future()
          .onComplete(
              ar -> {
                if (ar.failed()) {
                  connectHandler.fail(ar.cause());
                  return;
                }
                try {
                  connectHandler.complete(limit(ar.result()));
                } catch (RuntimeException e) {
                  ar.result().close();
                  connectHandler.fail(e);
                }
              });
      delegate.connectInternal(connectOptions, limited, context);
    }

    @Override
    public Future<NetSocket> connect(int port, String host) {
      return delegate.connect(port, host).map(ReplyLimitedVertx::limit);
    }

    @Override
    public Future<NetSocket> connect(int port, String host, String serverName) {
      return delegate.connect(port, host, serverName).map(ReplyLimitedVertx::limit);
    }

    @Override
    public Future<NetSocket> connect(SocketAddress remoteAddress) {
      return delegate.connect(remoteAddress).map(ReplyLimitedVertx::limit);
    }

    @Override
    public Future<NetSocket> connect(SocketAddress remoteAddress, String serverName) {
      return delegate.connect(remoteAddress, serverName).map(ReplyLimitedVertx::limit);
    }

    @Override
    public Future<NetSocket> connect(ConnectOptions connectOptions) {
      return delegate.connect(connectOptions).map(ReplyLimitedVertx::limit);
    }

    @Override
    public Future<Void> close() {
      return delegate.close();
    }

    @Override
    public Future<Void> shutdown() {
      return delegate.shutdown();
    }

    @Override
    public Future<Void> shutdown(long timeout, TimeUnit unit) {
      return delegate.shutdown(timeout, unit);
    }

    @Override
    public Future<Boolean> updateSSLOptions(ClientSSLOptions options, boolean force) {
      return delegate.updateSSLOptions(options, force);
    }

    @Override
    public Future<Void> closeFuture() {
      return delegate.closeFuture();
    }

    @Override
    public void close(Completable<Void> completion) {
      delegate.close(completion);
    }

    @Override
    public Metrics getMetrics() {
      return delegate.getMetrics();
    }

    @Override
    public boolean isMetricsEnabled() {
      return delegate.isMetricsEnabled();
    }
  }
}
