package io.phasemeter.proxy;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.phasemeter.proxy.pipeline.Connections;
import io.vertx.core.MultiMap;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What every listener (public and admin) needs before a request reaches its handler: a bound on
 * open connections and on the time a request head may take. A connection past {@code
 * maxConnections} is closed as soon as it is accepted, as nginx does past {@code
 * worker_connections} and Envoy past its downstream connection limit: the listener never holds more
 * descriptors than its share, so one listener cannot starve the other, or the upstream connections,
 * of file descriptors. A connection on which no complete request head arrived within {@code
 * headTimeout}, since it opened or since its previous response ended, is closed: the body has its
 * own bound, and without this one a client that dribbles its headers a byte at a time (slowloris),
 * or connects and sends nothing, would hold a connection forever, and a kept-alive connection left
 * idle would never be closed.
 *
 * <p>Registers {@code llm_listener_connections} (open now), {@code llm_listener_connections_limit},
 * {@code llm_listener_connections_refused_total} and {@code llm_listener_head_timeouts_total}, each
 * by {@code listener}.
 */
public final class ListenerGuard {
  private final Vertx vertx;
  private final long timeoutMs;
  private final int maxConnections;
  private final AtomicInteger open = new AtomicInteger();
  private final Counter refused;
  private final Counter timedOut;
  // Connection → its pending timer; only connections waiting for a request head are here.
  private final Map<HttpConnection, Long> waiting = new ConcurrentHashMap<>();
  // Connections whose last response said "Connection: close": nothing more is read from them.
  private final Set<HttpConnection> closing = ConcurrentHashMap.newKeySet();
  // HTTP/2 connections → their streams between request head and response end: the head timer
  // runs only while a connection has none.
  private final Map<HttpConnection, Integer> streams = new ConcurrentHashMap<>();

  /**
   * A guard for the listener named {@code listener} ({@code public} or {@code admin}), its meters
   * on {@code registry}.
   */
  public ListenerGuard(
      Vertx vertx,
      String listener,
      Duration headTimeout,
      int maxConnections,
      MeterRegistry registry) {
    if (maxConnections < 1) {
      throw new IllegalArgumentException("maxConnections must be at least 1");
    }
    this.vertx = vertx;
    this.timeoutMs = Math.max(1, headTimeout.toMillis());
    this.maxConnections = maxConnections;
    Gauge.builder("llm.listener.connections", open, AtomicInteger::get)
        .tag("listener", listener)
        .description("Connections open on the listener")
        .register(registry);
    Gauge.builder("llm.listener.connections.limit", this, g -> g.maxConnections)
        .tag("listener", listener)
        .description("Connections the listener keeps open at most; more are closed when accepted")
        .register(registry);
    this.refused =
        Counter.builder("llm.listener.connections.refused")
            .tag("listener", listener)
            .description("Connections closed when accepted: the listener had its maximum open")
            .register(registry);
    this.timedOut =
        Counter.builder("llm.listener.head.timeouts")
            .tag("listener", listener)
            .description("Connections closed because no complete request head arrived in time")
            .register(registry);
  }

  /** The most connections the listener keeps open. */
  public int maxConnections() {
    return maxConnections;
  }

  /** Connections open now. */
  public int open() {
    return open.get();
  }

  /**
   * A connection opened: past the maximum it is closed at once and false is returned; otherwise its
   * first request head must arrive in time.
   */
  public boolean opened(HttpConnection connection) {
    if (open.incrementAndGet() > maxConnections) {
      open.decrementAndGet();
      refused.increment();
      Connections.forceClose(connection);
      return false;
    }
    connection.closeHandler(
        v -> {
          open.decrementAndGet();
          disarm(connection);
          closing.remove(connection);
          streams.remove(connection);
        });
    arm(connection);
    return true;
  }

  /**
   * A request head arrived: the clock stops, and starts again when its response has ended. A
   * response that says {@code Connection: close} closes its connection when it ends; a request
   * already read behind it (pipelined) is never answered. Returns false for such a request: the
   * caller must drop it.
   */
  public boolean requestStarted(HttpServerRequest request) {
    return requestStarted(request, true);
  }

  /**
   * As {@link #requestStarted(HttpServerRequest)}, but without taking the response's head and end
   * handlers when {@code hooks} is false: a response has one of each, and a caller that needs them
   * (Vert.x Web's router takes the end handler for {@code addEndHandler}) calls {@link
   * #headersEnded} and {@link #responseEnded} itself.
   */
  public boolean requestStarted(HttpServerRequest request, boolean hooks) {
    HttpConnection connection = request.connection();
    if (request.version() == HttpVersion.HTTP_2) {
      streamStarted(request, connection);
      return true;
    }
    if (closing.contains(connection)) {
      connection.close();
      return false;
    }
    disarm(connection);
    if (request.headers().contains("transfer-encoding")) {
      // Decided now, not when the answer is written: Vert.x hands a pipelined request to the
      // handler inside end(), before any end handler runs.
      closing.add(connection);
    }
    if (hooks) {
      request.response().headersEndHandler(v -> headersEnded(request));
      request.response().endHandler(v -> responseEnded(request));
    }
    return true;
  }

  /**
   * The response's head is being written: a {@code Connection: close} in it closes the connection
   * once the response ends. (The head is written before the next pipelined request is dispatched,
   * so a close decided by the response is seen in time.)
   */
  public void headersEnded(HttpServerRequest request) {
    if ("close".equalsIgnoreCase(request.response().headers().get("connection"))) {
      closing.add(request.connection());
    }
  }

  /**
   * The response has ended: the connection closes if it was to, or waits for its next request head
   * within the timeout.
   */
  public void responseEnded(HttpServerRequest request) {
    HttpConnection connection = request.connection();
    if (closing.contains(connection)) {
      connection.close();
    } else {
      arm(connection);
    }
  }

  /**
   * A stream of an HTTP/2 connection: the connection's head timer stops while any stream is open
   * and starts again when the last one ends. The response never carries HTTP/1's connection headers
   * (RFC 9113 §8.2.2: a client must treat them as malformed); a close the pipeline asks for with
   * {@code Connection: close} ends only this stream, which its end does anyway.
   */
  private void streamStarted(HttpServerRequest request, HttpConnection connection) {
    streams.merge(connection, 1, Integer::sum);
    disarm(connection);
    AtomicBoolean ended = new AtomicBoolean();
    request.response().headersEndHandler(v -> stripConnectionHeaders(request.response().headers()));
    request
        .response()
        .endHandler(
            v -> {
              if (!ended.compareAndSet(false, true)) {
                return;
              }
              boolean[] last = {false};
              streams.computeIfPresent(
                  connection,
                  (c, n) -> {
                    last[0] = n == 1;
                    return last[0] ? null : n - 1;
                  });
              if (last[0]) {
                arm(connection);
              }
            });
  }

  /** Removes the headers that mean something only to an HTTP/1.x connection. */
  static void stripConnectionHeaders(MultiMap headers) {
    for (String name : HTTP1_ONLY) {
      headers.remove(name);
    }
  }

  private static final List<String> HTTP1_ONLY =
      List.of("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade");

  private void arm(HttpConnection connection) {
    long timer = vertx.setTimer(timeoutMs, id -> timedOut(connection, id));
    Long previous = waiting.put(connection, timer);
    if (previous != null) {
      vertx.cancelTimer(previous);
    }
  }

  private void timedOut(HttpConnection connection, long timer) {
    if (waiting.remove(connection, timer)) {
      timedOut.increment();
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
