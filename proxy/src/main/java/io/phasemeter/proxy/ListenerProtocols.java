package io.phasemeter.proxy;

import io.netty.handler.timeout.IdleStateHandler;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.LoggerFactory;

/**
 * Which HTTP versions the public listener speaks ({@code listen.http2}), in one place: the ALPN
 * list a TLS listener offers, h2c with prior knowledge on plaintext, and the HTTP/2 limits each
 * connection advertises in its SETTINGS and enforces.
 *
 * <p>With cleartext HTTP/2 on, Vert.x holds a new connection until it knows the protocol: until the
 * first bytes are or are not the HTTP/2 preface, and for HTTP/1.x until a whole request head has
 * arrived (it checks the head for an h2c upgrade). The server's connection handler, where {@link
 * ListenerGuard} starts its head timer, runs only then, so a client that sends nothing, half a
 * preface or a head a byte at a time would never be timed. A read-idle handler, set up by Vert.x
 * when the connection is accepted, covers that stretch: nothing read reaches it until the protocol
 * is known, so it fires {@code limits.receive_timeout} after the accept however the client
 * dribbles, and Vert.x closes the connection. Once the connection handler runs, {@link
 * IdleHandover#accepted} takes it away and the guard's timer takes over (an HTTP/2 connection whose
 * first stream's headers never complete is closed by that timer).
 *
 * <p>A TLS listener needs none of this: ALPN settles the protocol in the handshake, which Vert.x
 * bounds by its {@code sslHandshakeTimeout} (10 s), and the connection handler runs as soon as the
 * handshake is done, before any request byte is read. It gets no cleartext HTTP/2 and no read-idle
 * handler.
 */
final class ListenerProtocols {
  private ListenerProtocols() {}

  /** Whether the listener speaks HTTP/2 at all. */
  static boolean http2(ProxyConfig.Listen listen) {
    return Boolean.TRUE.equals(listen.http2());
  }

  /**
   * Whether the listener speaks HTTP/2 in cleartext (h2c): HTTP/2 on a listener without TLS. Only
   * then is a connection's protocol decided after it was accepted, by its first bytes.
   */
  static boolean h2c(ProxyConfig.Listen listen) {
    return http2(listen) && listen.tls() == null;
  }

  /** The protocols a TLS listener offers by ALPN, most preferred first. */
  static List<HttpVersion> alpnVersions(ProxyConfig.Listen listen) {
    return http2(listen)
        ? List.of(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1)
        : List.of(HttpVersion.HTTP_1_1);
  }

  /**
   * Sets the listener's protocol options: HTTP/1.x only, or also HTTP/2 with its limits; on
   * plaintext, h2c and the bound on the time before the protocol is known ({@code receiveTimeout}).
   */
  static HttpServerOptions apply(
      HttpServerOptions options, ProxyConfig.Listen listen, Duration receiveTimeout) {
    options.setAlpnVersions(alpnVersions(listen)).setHttp2ClearTextEnabled(h2c(listen));
    if (!http2(listen)) {
      return options;
    }
    options.setInitialSettings(
        new Http2Settings()
            .setMaxConcurrentStreams(listen.http2MaxConcurrentStreams())
            .setMaxHeaderListSize(listen.http2MaxHeaderListSize()));
    if (!h2c(listen)) {
      return options;
    }
    return options
        .setReadIdleTimeout(
            (int) Math.min(Integer.MAX_VALUE, Math.max(1, receiveTimeout.toMillis())))
        .setIdleTimeoutUnit(TimeUnit.MILLISECONDS);
  }

  /**
   * Takes the read-idle handler ({@link #apply}) away from each connection of one h2c listener once
   * its protocol is known. The handler lives in the connection's Netty pipeline, which Vert.x
   * reaches only through an internal class ({@code ConnectionBase}); if a Vert.x upgrade changes
   * that, or the handler is not where it should be, the handler would stay and close every
   * connection quiet for {@code limits.receive_timeout}, a stream waiting for a long generation
   * included. That is said once, as an error naming the remedy ({@code listen.http2: false}), and
   * the listener goes on serving.
   */
  static final class IdleHandover {
    private final String listener;
    private final Consumer<String> error;
    private final AtomicBoolean told = new AtomicBoolean();

    /** For the listener named {@code listener}, its error said to the proxy's log. */
    IdleHandover(String listener) {
      this(listener, LoggerFactory.getLogger(ListenerProtocols.class)::error);
    }

    /** As {@link #IdleHandover(String)}, the error said to {@code error} (tests). */
    IdleHandover(String listener, Consumer<String> error) {
      this.listener = listener;
      this.error = error;
    }

    /**
     * The server's connection handler saw {@code connection}: its protocol is known, and the
     * guard's timers bound it from now on, not the read-idle handler. Returns whether the handler
     * was taken away; when it could not be, the error is said (once for the listener).
     */
    boolean accepted(HttpConnection connection) {
      if (!(connection instanceof io.vertx.core.net.impl.ConnectionBase base)) {
        return failed(
            "its connections are no longer Vert.x's ConnectionBase ("
                + connection.getClass().getName()
                + ")");
      }
      var channel = base.channelHandlerContext().channel();
      IdleStateHandler idle = channel.pipeline().get(IdleStateHandler.class);
      if (idle == null) {
        // A connection already closed has lost its handlers with its pipeline: nothing to say.
        return channel.isActive() ? failed("a connection has no read-idle handler") : false;
      }
      if (idle.getAllIdleTimeInMillis() != 0 || idle.getWriterIdleTimeInMillis() != 0) {
        // Vert.x installs one handler for read, write and all idle: taking it away would take the
        // other timers with it.
        return failed("the connection's idle handler also times writes or all idleness");
      }
      channel.pipeline().remove(idle);
      return true;
    }

    private boolean failed(String why) {
      if (told.compareAndSet(false, true)) {
        error.accept(
            "listen.http2: the "
                + listener
                + " listener cannot take away the read-idle timer that bounds an h2c connection"
                + " before its protocol is known: "
                + why
                + ". Every connection quiet for limits.receive_timeout will be closed, a stream"
                + " waiting for its first token included. Set listen.http2: false (or serve TLS)"
                + " until the proxy is built for this Vert.x.");
      }
      return false;
    }
  }
}
