package io.phasemeter.proxy;

import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

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
 * dribbles, and Vert.x closes the connection. Once the connection handler runs, {@link #accepted}
 * takes it away and the guard's timer takes over (an HTTP/2 connection whose first stream's headers
 * never complete is closed by that timer).
 */
final class ListenerProtocols {
  /** The name Vert.x gives its idle handler in a connection's channel pipeline. */
  private static final String IDLE = "idle";

  private ListenerProtocols() {}

  /** Whether the listener speaks HTTP/2 at all. */
  static boolean http2(ProxyConfig.Listen listen) {
    return Boolean.TRUE.equals(listen.http2());
  }

  /** The protocols a TLS listener offers by ALPN, most preferred first. */
  static List<HttpVersion> alpnVersions(ProxyConfig.Listen listen) {
    return http2(listen)
        ? List.of(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1)
        : List.of(HttpVersion.HTTP_1_1);
  }

  /**
   * Sets the listener's protocol options: HTTP/1.x only, or also HTTP/2 with its limits and the
   * bound on the time before the protocol is known ({@code receiveTimeout}).
   */
  static HttpServerOptions apply(
      HttpServerOptions options, ProxyConfig.Listen listen, Duration receiveTimeout) {
    options.setAlpnVersions(alpnVersions(listen));
    if (!http2(listen)) {
      return options.setHttp2ClearTextEnabled(false);
    }
    return options
        .setHttp2ClearTextEnabled(true)
        .setInitialSettings(
            new Http2Settings()
                .setMaxConcurrentStreams(listen.http2MaxConcurrentStreams())
                .setMaxHeaderListSize(listen.http2MaxHeaderListSize()))
        .setReadIdleTimeout(
            (int) Math.min(Integer.MAX_VALUE, Math.max(1, receiveTimeout.toMillis())))
        .setIdleTimeoutUnit(TimeUnit.MILLISECONDS);
  }

  /**
   * The server's connection handler saw {@code connection}: its protocol is known, and the guard's
   * timers bound it from now on, not the read-idle handler (which would close a stream that waits
   * long for its engine).
   */
  static void accepted(HttpConnection connection) {
    if (connection instanceof io.vertx.core.net.impl.ConnectionBase base) {
      var pipeline = base.channelHandlerContext().pipeline();
      if (pipeline.get(IDLE) != null) {
        pipeline.remove(IDLE);
      }
    }
  }
}
