package io.phasemeter.proxy.upstream;

import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientConnection;
import io.vertx.core.http.HttpConnectOptions;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.IntSupplier;

/**
 * One upstream's spare connections: opened ahead of demand while its connections carry one request
 * each, so that a request finds one open instead of connecting on its way (Envoy's preconnect).
 * When one is taken another is opened, up to {@code target}, never past {@code room} (what {@code
 * connections.max} leaves beside the requests in flight). A spare idle past {@code keep_alive} is
 * closed and replaced; one the upstream closes is replaced at once, unless it lived less than a
 * second: that, or a failed connect, waits a backoff that doubles from {@code ejection.backoff} to
 * {@code ejection.max_backoff}, as it does while the upstream is ejected or down. So an upstream
 * that refuses, or accepts and hangs up, costs one attempt a backoff, never a loop; a health check
 * that finds the upstream up again (after down or ejected) ends the backoff ({@link #upAgain}). A
 * failed preconnect ejects nothing: only a request's own connect failure counts towards ejection. A
 * spare found closed is dropped, never handed out (see {@link OpenConnections}).
 *
 * <p>Every event loop takes from it: state is guarded by the instance's lock; connects and timers
 * run outside it.
 */
final class SpareConnections {
  private static final long SHORT_LIVED_NANOS = 1_000_000_000L;

  private final Vertx vertx;
  private final HttpClientAgent client;
  private final UpstreamHost host;
  private final NanoClock clock;
  private final HttpConnectOptions connect;
  private final long keepAliveMs;
  private final long backoffMs;
  private final long maxBackoffMs;
  private final IntSupplier room;
  private final AtomicLong opened;
  private final BiConsumer<HttpClientConnection, Runnable> track;

  private final ArrayDeque<Spare> ready = new ArrayDeque<>();
  private int target;
  private int connecting;
  private int failuresInRow;
  private long retryTimer = -1;
  private boolean closed;

  private final class Spare {
    final HttpClientConnection connection;
    final long openedAt;
    long idleTimer = -1;
    boolean taken;
    boolean gone; // Closed by the upstream (its close handler ran).

    Spare(HttpClientConnection connection, long openedAt) {
      this.connection = connection;
      this.openedAt = openedAt;
    }
  }

  SpareConnections(
      Vertx vertx,
      HttpClientAgent client,
      UpstreamHost host,
      NanoClock clock,
      ProxyConfig.Pool config,
      IntSupplier room,
      AtomicLong opened,
      BiConsumer<HttpClientConnection, Runnable> track) {
    this.track = track;
    this.vertx = vertx;
    this.client = client;
    this.host = host;
    this.clock = clock;
    this.room = room;
    this.opened = opened;
    ProxyConfig.Upstream u = host.address();
    this.connect =
        new HttpConnectOptions()
            .setHost(u.host())
            .setPort(u.port())
            .setSsl(u.tls())
            .setConnectTimeout(config.timeouts().connect().toMillis());
    this.keepAliveMs = config.connections().keepAlive().toMillis();
    this.backoffMs = Math.max(1, config.ejection().backoff().toMillis());
    this.maxBackoffMs = Math.max(backoffMs, config.ejection().maxBackoff().toMillis());
  }

  /** The options a connection of its own is opened with (the same as a spare's). */
  HttpConnectOptions connectOptions() {
    return connect;
  }

  /** Keeps {@code n} spares from now on (0: none; those open are closed). */
  void target(int n) {
    java.util.List<Spare> drop = new java.util.ArrayList<>();
    synchronized (this) {
      if (closed || n == target) {
        return;
      }
      target = n;
      while (ready.size() > n) {
        drop.add(ready.pollLast());
      }
    }
    for (Spare s : drop) {
      discard(s);
    }
    fill();
  }

  /** Spares being connected now. */
  synchronized int connecting() {
    return connecting;
  }

  /** Failed connects, and spares hung up on at once, in a row: the backoff's exponent. */
  synchronized int failuresInRow() {
    return failuresInRow;
  }

  /** Spares open and waiting for a request now. */
  synchronized int ready() {
    return ready.size();
  }

  /**
   * A spare connection, or null when none is open; another is opened in its place once the caller's
   * current task is done (so after the request it sends now: a connect started here, a new channel
   * set up and registered, came before the request's write, ~0.1 ms of it warm). The caller owns
   * the connection from here (it carries one request, then closes).
   */
  HttpClientConnection take() {
    HttpClientConnection got = null;
    java.util.List<Spare> dead = new java.util.ArrayList<>();
    synchronized (this) {
      Spare s;
      while (got == null && (s = ready.pollFirst()) != null) {
        if (s.idleTimer >= 0) {
          vertx.cancelTimer(s.idleTimer);
          s.idleTimer = -1;
        }
        if (!OpenConnections.open(s.connection)) {
          // Closed by the upstream, its close handler not run yet: dropped, never handed out.
          s.gone = true;
          dead.add(s);
          continue;
        }
        s.taken = true;
        got = s.connection;
        failuresInRow = 0; // It carries a request: the upstream takes connections again.
      }
    }
    for (Spare s : dead) {
      lost(s);
    }
    // On the caller's context, so on its event loop: the replacement is opened where the next
    // request will most likely run (the listener's one event loop), never a thread hop away.
    vertx.runOnContext(v -> fill());
    return got;
  }

  /** Opens spares until {@code target} are open or being opened, within {@code room}. */
  void fill() {
    int toOpen;
    synchronized (this) {
      if (closed || retryTimer >= 0) {
        return;
      }
      if (target > 0 && !host.available(clock.nanoTime())) {
        // Ejected or down: looked at again after a backoff, never in a loop.
        retryLater(backoffMs);
        return;
      }
      toOpen = Math.min(target - ready.size() - connecting, room.getAsInt() - connecting);
      if (toOpen <= 0) {
        return;
      }
      connecting += toOpen;
    }
    for (int i = 0; i < toOpen; i++) {
      open();
    }
  }

  private void open() {
    try {
      client.connect(connect).onComplete(ar -> connected(ar.succeeded() ? ar.result() : null));
    } catch (IllegalStateException e) {
      connected(null); // The client closed (the proxy is stopping).
    }
  }

  private void connected(HttpClientConnection c) {
    if (c == null) {
      synchronized (this) {
        connecting--;
        failed();
      }
      return;
    }
    Spare s = new Spare(c, clock.nanoTime());
    // Runs the close handler at once when the upstream closed the connection already (it may have,
    // before this future's handler ran): s is then gone, never ready while closed.
    track.accept(c, () -> closedByUpstream(s));
    boolean closeIt;
    synchronized (this) {
      connecting--;
      opened.incrementAndGet();
      if (s.gone) {
        failed(); // Hung up on at once: a backoff, then a replacement.
        return;
      }
      closeIt = closed || ready.size() >= target;
      if (!closeIt) {
        // failuresInRow stays: an upstream that accepts then hangs up at once connects fine every
        // time, and only a spare taken or outliving SHORT_LIVED_NANOS shows it takes them again.
        ready.addLast(s);
      }
    }
    if (closeIt) {
      discard(s);
      return;
    }
    if (keepAliveMs > 0) {
      long t = vertx.setTimer(keepAliveMs, id -> expired(s));
      synchronized (this) {
        if (!s.taken && !s.gone) {
          s.idleTimer = t;
        } else {
          vertx.cancelTimer(t);
        }
      }
    }
  }

  /** A spare idle for keep_alive: closed and replaced, one reconnect a keep_alive at most. */
  private void expired(Spare s) {
    synchronized (this) {
      if (s.taken || !ready.remove(s)) {
        return;
      }
      s.idleTimer = -1;
      failuresInRow = 0; // It lived its keep_alive.
    }
    discard(s);
    fill();
  }

  private void closedByUpstream(Spare s) {
    synchronized (this) {
      boolean wasGone = s.gone;
      s.gone = true;
      if (wasGone || s.taken || !ready.remove(s)) {
        return; // Not published yet (connected() sees gone), taken, or dropped by take().
      }
      if (s.idleTimer >= 0) {
        vertx.cancelTimer(s.idleTimer);
      }
    }
    lost(s);
  }

  /** A spare the upstream closed, out of {@code ready}: replaced, at once or after a backoff. */
  private void lost(Spare s) {
    boolean shortLived;
    synchronized (this) {
      shortLived = clock.nanoTime() - s.openedAt < SHORT_LIVED_NANOS;
      if (shortLived) {
        failed();
        return;
      }
    }
    // Closed after waiting a while (an engine's own idle timeout): replaced at once.
    synchronized (this) {
      failuresInRow = 0;
    }
    fill();
  }

  /**
   * The upstream is up again (a health check found it so after it was down or ejected): the backoff
   * waiting is cancelled, the failures in a row forgotten, and spares opened at once.
   */
  void upAgain() {
    synchronized (this) {
      if (closed) {
        return;
      }
      if (retryTimer >= 0) {
        vertx.cancelTimer(retryTimer);
        retryTimer = -1;
      }
      failuresInRow = 0;
    }
    fill();
  }

  /**
   * Under the lock: a connect failed, or a spare was hung up on at once; retried after a backoff.
   */
  private void failed() {
    int n = Math.min(failuresInRow++, 30);
    retryLater(Math.min(maxBackoffMs, backoffMs << n));
  }

  private void retryLater(long ms) {
    if (closed || retryTimer >= 0) {
      return;
    }
    retryTimer =
        vertx.setTimer(
            Math.max(1, ms),
            id -> {
              synchronized (this) {
                retryTimer = -1;
              }
              fill();
            });
  }

  private void discard(Spare s) {
    s.taken = true;
    if (s.idleTimer >= 0) {
      vertx.cancelTimer(s.idleTimer);
    }
    s.connection.close();
  }

  /** Closes the spares; none is opened after. */
  void close() {
    java.util.List<Spare> drop;
    synchronized (this) {
      closed = true;
      drop = new java.util.ArrayList<>(ready);
      ready.clear();
      if (retryTimer >= 0) {
        vertx.cancelTimer(retryTimer);
        retryTimer = -1;
      }
    }
    for (Spare s : drop) {
      discard(s);
    }
  }
}
