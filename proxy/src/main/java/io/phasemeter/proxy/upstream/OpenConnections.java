package io.phasemeter.proxy.upstream;

import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.impl.HttpClientConnectionInternal;
import java.lang.reflect.Field;

/**
 * Whether a connection's channel is still open. Vert.x 5.0.7 offers no public way to ask, and a
 * close handler set on a connection already closed is never called (ConnectionBase.closeHandler
 * only stores it): a connection from {@code HttpClient.connect} that the upstream closed before its
 * future's handler ran would stay counted as open, and a spare stay ready while closed. So the
 * channel is read through Vert.x's internal API: {@link HttpClientConnectionInternal}, which the
 * connection from {@code connect} wraps in a private field.
 */
final class OpenConnections {
  private static final Field ACTUAL = actualField();

  private OpenConnections() {}

  private static Field actualField() {
    try {
      Field f =
          Class.forName("io.vertx.core.http.impl.UnpooledHttpClientConnection")
              .getDeclaredField("actual");
      f.setAccessible(true);
      return f;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null; // Another Vert.x: connections count as open, as before.
    }
  }

  /** False only when the connection's channel is known closed (true when it cannot be told). */
  static boolean open(HttpConnection c) {
    Object internal = c;
    if (!(c instanceof HttpClientConnectionInternal) && ACTUAL != null) {
      try {
        internal = ACTUAL.get(c);
      } catch (IllegalAccessException | IllegalArgumentException e) {
        return true;
      }
    }
    if (internal instanceof HttpClientConnectionInternal i) {
      io.netty.channel.ChannelHandlerContext ctx = i.channelHandlerContext();
      return ctx == null || ctx.channel().isActive();
    }
    return true;
  }
}
