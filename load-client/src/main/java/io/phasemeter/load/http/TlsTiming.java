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
 * The instant each TLS connection's TCP connect completed, and the protocol its handshake chose, so
 * that a connection's set-up splits into {@code connect} and {@code tls}. Vert.x reports a TLS
 * connection only once its handshake is done (its {@code ChannelProvider} completes the connect on
 * the handshake's completion event, and its metrics' {@code connected} comes after that too); the
 * TCP-connected instant is Netty's {@code channelActive} on the channel, which is where the TLS
 * handler sends its ClientHello. So the run's client builds its TLS handlers through {@link
 * #engineOptions()}: the JDK engine Vert.x would use, with a handler that notes {@link
 * System#nanoTime()} at {@code channelActive}, by the connection's local port, before starting the
 * handshake, and reads the protocol ALPN chose when the handshake succeeds (its promise completes
 * before the completion event reaches Vert.x). The pool takes the note by the port of the
 * connection it was handed ({@link #take}).
 *
 * <p>Costs nothing per request: one map entry per connection opened, taken once. Bounded: a note
 * holds a number and a string, never the handler or its channel, and leaves the map when it is
 * taken, when its handshake fails and when its channel closes (only the note it put there: a later
 * connection from the same port keeps its own), so a server whose handshakes all fail leaves
 * nothing behind; at most one entry per local port in use.
 *
 * <p>Its handlers are built without the context's Netty {@code ResumptionController} (package-
 * private in Netty). That controller only matters for a trust manager implementing Netty's {@code
 * ResumableX509ExtendedTrustManager}, to tell it of a resumed session (whose chain the JDK does not
 * check again); none of the client's trust managers (the platform's, {@code --ca-file}'s PEM one,
 * {@code --insecure}'s) implements it, and with none configured the controller does nothing.
 * Session resumption itself is the JDK engine's: engines are made by the same context with the
 * peer's host and port ({@code newEngine(alloc, host, port)}), so its client session cache still
 * offers tickets. A resumed handshake is timed as a full one: from the TCP-connected instant to the
 * handshake's end. The engine's set-up (SNI, the host name's check, protocols) is Vert.x's own
 * wrapper's, around this context; {@code ConnectionSplitTest} pins that a certificate without the
 * URL's host is refused.
 */
final class TlsTiming {
  private final ConcurrentHashMap<Integer, Note> notes = new ConcurrentHashMap<>();

  /** One TLS connection's note; {@code protocol} is set once its handshake succeeded. */
  static final class Note {
    final long tcpUpNanos;
    private volatile String protocol;

    Note(long tcpUpNanos) {
      this.tcpUpNanos = tcpUpNanos;
    }

    /**
     * The protocol ALPN chose ({@code h2}, {@code http/1.1}; http/1.1 when none was chosen), or
     * null while the handshake is not done.
     */
    String protocol() {
      return protocol;
    }
  }

  /** The note of the connection from local port {@code port}, or null; removed. */
  Note take(int port) {
    return notes.remove(port);
  }

  /** Notes held now (connections whose handshake is under way, or done and not yet taken). */
  int size() {
    return notes.size();
  }

  /** Vert.x's JDK engine options, building handlers that note the TCP-connected instant. */
  JdkSSLEngineOptions engineOptions() {
    return new Options(this);
  }

  /** TCP is up on {@code ctx}'s channel: a note for its port, dropped if it comes to nothing. */
  private void tcpUp(ChannelHandlerContext ctx, SslHandler handler) {
    if (!(ctx.channel().localAddress() instanceof InetSocketAddress local)) {
      return;
    }
    Integer port = local.getPort();
    Note note = new Note(System.nanoTime());
    notes.put(port, note);
    handler
        .handshakeFuture()
        .addListener(
            f -> {
              if (f.isSuccess()) {
                String p = handler.applicationProtocol();
                note.protocol = p == null || p.isEmpty() ? "http/1.1" : p;
              } else {
                notes.remove(port, note);
              }
            });
    ctx.channel().closeFuture().addListener(f -> notes.remove(port, note));
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
    private boolean noted;

    Handler(SSLEngine engine, boolean startTls, Executor executor, TlsTiming timing) {
      super(engine, startTls, executor);
      this.timing = timing;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) throws Exception {
      if (ctx.channel().isActive()) {
        note(ctx);
      }
      super.handlerAdded(ctx);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
      // TCP is up; the ClientHello leaves from super.channelActive.
      note(ctx);
      super.channelActive(ctx);
    }

    private void note(ChannelHandlerContext ctx) {
      if (!noted) {
        noted = true;
        timing.tcpUp(ctx, this);
      }
    }
  }
}
