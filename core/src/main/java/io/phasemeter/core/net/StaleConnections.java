package io.phasemeter.core.net;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;

/**
 * The rule both the proxy's upstream client and the load client use for a request sent on a
 * kept-alive connection the server had already closed (llama.cpp's server closes one after each
 * stream without {@code Connection: close}): the failure must be the connection's close, and come
 * soon after the request went out; only then is it resent once on a fresh connection.
 */
public final class StaleConnections {
  /** How soon after sending a close counts as a stale connection rather than a failure. */
  public static final long WINDOW_NANOS = 1_000_000_000L;

  /**
   * Vert.x's exception for a closed HTTP connection, matched by name so that core needs no Vert.x
   * (both sides run on Vert.x 5; the proxy's StaleConnectionsVertxTest checks the name).
   */
  static final String VERTX_HTTP_CLOSED = "io.vertx.core.http.HttpClosedException";

  private StaleConnections() {}

  /** Whether {@code t} says the connection was closed (not a decode, TLS or timeout failure). */
  public static boolean closedConnection(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (isVertxHttpClosed(c) || c instanceof ClosedChannelException) {
        return true;
      }
      String m = c.getMessage();
      if (c instanceof IOException
          && m != null
          && (m.contains("Connection reset") || m.contains("Broken pipe"))) {
        return true;
      }
    }
    return false;
  }

  private static boolean isVertxHttpClosed(Throwable t) {
    for (Class<?> k = t.getClass(); k != null; k = k.getSuperclass()) {
      if (VERTX_HTTP_CLOSED.equals(k.getName())) {
        return true;
      }
    }
    return false;
  }
}
