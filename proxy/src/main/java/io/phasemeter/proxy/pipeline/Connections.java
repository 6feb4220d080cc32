package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpConnection;

/** Closing a client connection now, whatever is still queued on it. */
public final class Connections {
  private Connections() {}

  /**
   * Closes {@code connection} at once. Vert.x's {@link HttpConnection#close()} is graceful: it
   * closes once what is queued has been flushed, which a client that stopped reading never allows,
   * so the connection and the bytes queued for it would stay until the client left. Netty's channel
   * context closes the socket now; where the connection is not one Vert.x's internals expose, the
   * graceful close is the fallback.
   */
  public static void forceClose(HttpConnection connection) {
    if (connection instanceof io.vertx.core.net.impl.ConnectionBase base) {
      base.channelHandlerContext().close();
    } else {
      connection.close();
    }
  }
}
