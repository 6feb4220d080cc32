package io.phasemeter.proxy;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerRequest;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Closes a public connection on which no complete request head arrived within {@code
 * limits.receive_timeout}: since the connection opened, or since its previous response ended. The
 * body has its own bound (phase {@code receive}); without this one a client that dribbles its
 * headers a byte at a time (slowloris), or connects and sends nothing, would hold a connection
 * forever, and a kept-alive connection left idle would never be closed.
 */
final class HeadTimeout {
  private final Vertx vertx;
  private final long timeoutMs;
  // Connection → its pending timer; only connections waiting for a request head are here.
  private final Map<HttpConnection, Long> waiting = new ConcurrentHashMap<>();
  // Connections whose last response said "Connection: close": nothing more is read from them.
  private final java.util.Set<HttpConnection> closing = ConcurrentHashMap.newKeySet();

  HeadTimeout(Vertx vertx, Duration timeout) {
    this.vertx = vertx;
    this.timeoutMs = Math.max(1, timeout.toMillis());
  }

  /** A connection opened: its first request head must arrive in time. */
  void opened(HttpConnection connection) {
    connection.closeHandler(
        v -> {
          disarm(connection);
          closing.remove(connection);
        });
    arm(connection);
  }

  /**
   * A request head arrived: the clock stops, and starts again when its response has ended. A
   * response that says {@code Connection: close} closes its connection when it ends; a request
   * already read behind it (pipelined) is never answered. Returns false for such a request: the
   * caller must drop it.
   */
  boolean requestStarted(HttpServerRequest request) {
    HttpConnection connection = request.connection();
    if (closing.contains(connection)) {
      connection.close();
      return false;
    }
    disarm(connection);
    io.vertx.core.http.HttpServerResponse response = request.response();
    if (request.headers().contains("transfer-encoding")) {
      // Decided now, not when the answer is written: Vert.x hands a pipelined request to the
      // handler inside end(), before any end handler runs.
      closing.add(connection);
    }
    // The head is written before the next pipelined request is dispatched: a close decided by the
    // response (an error that closes) is seen in time too.
    response.headersEndHandler(
        v -> {
          if ("close".equalsIgnoreCase(response.headers().get("connection"))) {
            closing.add(connection);
          }
        });
    response.endHandler(
        v -> {
          if (closing.contains(connection)) {
            connection.close();
          } else {
            arm(connection);
          }
        });
    return true;
  }

  private void arm(HttpConnection connection) {
    long timer = vertx.setTimer(timeoutMs, id -> timedOut(connection, id));
    Long previous = waiting.put(connection, timer);
    if (previous != null) {
      vertx.cancelTimer(previous);
    }
  }

  private void timedOut(HttpConnection connection, long timer) {
    if (waiting.remove(connection, timer)) {
      connection.close();
    }
  }

  private void disarm(HttpConnection connection) {
    Long timer = waiting.remove(connection);
    if (timer != null) {
      vertx.cancelTimer(timer);
    }
  }
}
