package io.phasemeter.load.http;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.ssl.DelegatingSslContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslHandler;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.spi.tls.SslContextFactory;
import java.net.InetSocketAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import javax.net.ssl.SSLEngine;

/**
 * The instant each TLS connection's TCP connect completed, so that a connection's set-up splits
 * into {@code connect} and {@code tls}. Vert.x reports a TLS connection only once its handshake is
 * done (its {@code ChannelProvider} completes the connect on the handshake's completion event, and
 * its metrics' {@code connected} comes after that too); the TCP-connected instant is Netty's {@code
 * channelActive} on the channel, which is where the TLS handler sends its ClientHello. So the run's
 * client builds its TLS handlers through {@link #engineOptions()}: the JDK engine Vert.x would use,
 * with a handler that notes {@link System#nanoTime()} at {@code channelActive}, by the connection's
 * local port, before starting the handshake, and the instant Vert.x added it to the channel, just
 * before the TCP connect (Netty's bootstrap runs the channel's initializer at registration, then
 * connects). The pool takes the note by the port of the connection it was handed ({@link #take}).
 * Between the name resolved and the channel set up, Vert.x builds (the first time) or finds its TLS
 * context: client-side TLS work, counted in {@code tls}.
 *
 * <p>Costs nothing per request: one map entry per connection opened, taken once. Bounded: local
 * ports key the entries, so a note never taken (a handshake that failed) is replaced by the next
 * connection from that port; at most 65,536 entries (each a handler whose channel is closed).
 */
final class TlsTiming {
  private final ConcurrentHashMap<Integer, Note> notes = new ConcurrentHashMap<>();

  /**
   * One TLS connection's note.
   *
   * @param connectStartNanos when its channel was set up, just before the TCP connect
   * @param tcpUpNanos when its TCP connect completed
   * @param handler its TLS handler: the protocol ALPN chose, once the handshake is done
   */
  record Note(long connectStartNanos, long tcpUpNanos, SslHandler handler) {
    /** The protocol ALPN chose ({@code h2}), or http/1.1 when none was chosen. */
    String protocol() {
      String p = handler.applicationProtocol();
      return p == null || p.isEmpty() ? "http/1.1" : p;
    }
  }

  /** The note of the connection from local port {@code port}, or null; removed. */
  Note take(int port) {
    return notes.remove(port);
  }

  /** Vert.x's JDK engine options, building handlers that note the TCP-connected instant. */
  JdkSSLEngineOptions engineOptions() {
    return new Options(this);
  }

  private void note(ChannelHandlerContext ctx, long connectStart, SslHandler handler) {
    long now = System.nanoTime();
    if (ctx.channel().localAddress() instanceof InetSocketAddress local) {
      notes.put(local.getPort(), new Note(connectStart < 0 ? now : connectStart, now, handler));
    }
  }

  private static final class Options extends JdkSSLEngineOptions {
    private final TlsTiming timing;

    Options(TlsTiming timing) {
      this.timing = timing;
    }

    @Override
    public JdkSSLEngineOptions copy() {
      return new Options(timing);
    }

    @Override
    public SslContextFactory sslContextFactory() {
      SslContextFactory jdk = super.sslContextFactory();
      return new SslContextFactory() {
        @Override
        public SslContextFactory useAlpn(boolean useAlpn) {
          jdk.useAlpn(useAlpn);
          return this;
        }

        @Override
        public SslContextFactory clientAuth(io.netty.handler.ssl.ClientAuth clientAuth) {
          jdk.clientAuth(clientAuth);
          return this;
        }

        @Override
        public SslContextFactory forClient(boolean forClient) {
          jdk.forClient(forClient);
          return this;
        }

        @Override
        public SslContextFactory keyMananagerFactory(javax.net.ssl.KeyManagerFactory kmf) {
          jdk.keyMananagerFactory(kmf);
          return this;
        }

        @Override
        public SslContextFactory trustManagerFactory(javax.net.ssl.TrustManagerFactory tmf) {
          jdk.trustManagerFactory(tmf);
          return this;
        }

        @Override
        public SslContextFactory enabledCipherSuites(java.util.Set<String> suites) {
          jdk.enabledCipherSuites(suites);
          return this;
        }

        @Override
        public SslContextFactory applicationProtocols(java.util.List<String> protocols) {
          jdk.applicationProtocols(protocols);
          return this;
        }

        @Override
        public SslContextFactory serverName(String serverName) {
          jdk.serverName(serverName);
          return this;
        }

        @Override
        public SslContext create() throws javax.net.ssl.SSLException {
          return new Timed(jdk.create(), timing);
        }
      };
    }
  }

  /** The JDK context as it is, but for the handler it makes. */
  private static final class Timed extends DelegatingSslContext {
    private final TlsTiming timing;

    Timed(SslContext jdk, TlsTiming timing) {
      super(jdk);
      this.timing = timing;
    }

    @Override
    protected void initEngine(SSLEngine engine) {
      // Vert.x's own wrapper around this context configures the engine.
    }

    @Override
    protected SslHandler newHandler(
        ByteBufAllocator alloc, String host, int port, boolean startTls, Executor executor) {
      return new Handler(newEngine(alloc, host, port), startTls, executor, timing);
    }

    @Override
    protected SslHandler newHandler(ByteBufAllocator alloc, boolean startTls, Executor executor) {
      return new Handler(newEngine(alloc), startTls, executor, timing);
    }
  }

  private static final class Handler extends SslHandler {
    private final TlsTiming timing;
    // When Vert.x set the channel up (its initializer adds this handler), before the TCP connect.
    private long added = -1;

    Handler(SSLEngine engine, boolean startTls, Executor executor, TlsTiming timing) {
      super(engine, startTls, executor);
      this.timing = timing;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) throws Exception {
      added = System.nanoTime();
      if (ctx.channel().isActive()) {
        timing.note(ctx, added, this);
      }
      super.handlerAdded(ctx);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
      // TCP is up; the ClientHello leaves from super.channelActive.
      timing.note(ctx, added, this);
      super.channelActive(ctx);
    }
  }
}
