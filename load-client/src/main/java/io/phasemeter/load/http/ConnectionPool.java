package io.phasemeter.load.http;

import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientConnection;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpConnectOptions;
import io.vertx.core.http.HttpVersion;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * The runner's keep-alive HTTP/1.1 connections. A request takes the most recently used idle
 * connection; when none is idle it waits in arrival order and a new connection is opened for it,
 * and it takes whichever comes first: that connection, or one another request hands back (as Go's
 * {@code http.Transport} does). At most {@link #MAX_CONNECTING} connections are being opened at
 * once, and at most {@code max} are open. Taking and returning a connection costs the same however
 * many are open. Every method runs on the runner's context.
 *
 * <p>Why not Vert.x's own pool: its connection selector walks every pooled connection on every
 * request ({@code SharedHttpClientConnectionGroup}'s LIFO selector), each new connection gets a
 * context of its own, and a request always waits for the connection opened for it. An open-model
 * client that falls behind for a moment (a GC pause, the JIT at the start of a run) sends a burst,
 * opens a connection for every request of the burst, and then pays for all of them on every
 * request, which makes it fall further behind: at 2,000 req/s against a fast stub the pool grew to
 * 3,800 connections (nginx's limit) and the selector took a quarter of the event loop (JFR,
 * docs/performance.md). Here a burst opens a few connections and the rest of it goes out on
 * connections that free up meanwhile; the wait, if any, is part of {@code transport_setup} and of
 * every latency from the intended start.
 *
 * <p>A connection is reused only after its response ended and neither side asked to close it
 * ({@code Connection: close}, or HTTP/1.0 without keep-alive), and only within its keep-alive time:
 * the client's default or the server's {@code Keep-Alive: timeout=N}. A connection the server
 * closes while it is idle leaves the pool as soon as the close arrives, and is counted ({@link
 * #closedByServer()}): some engines (llama.cpp's server) close after a streamed response although
 * they announced keep-alive, and a request sent on such a connection before its close was seen
 * fails with nothing received; {@code Exchange} retries it once on a fresh connection. With reuse
 * off every connection carries one request and is closed after it, as k6's {@code
 * noConnectionReuse}.
 */
final class ConnectionPool {
  /**
   * Connections being opened at once, at most. Enough to open thousands a second on a local
   * network; a burst larger than this waits for the first connection that is handed back or opened.
   */
  static final int MAX_CONNECTING = 64;

  /** A close this soon after a kept-alive response is the server's, not an idle timeout. */
  static final long PROMPT_CLOSE_NANOS = 1_000_000_000L;

  /** An exchange waiting for a connection. */
  interface Waiter {
    /** The connection is this waiter's until it hands it back with {@link #release}. */
    void onConnection(Conn conn);

    /** No connection could be opened for this waiter. */
    void onConnectFailure(Throwable cause);

    /** Whether the waiter has ended meanwhile (a timeout): it is skipped. */
    boolean gone();
  }

  /** One connection of the pool. */
  static final class Conn {
    final HttpClientConnection http;
    private long idleSinceNanos;
    private long keepAliveNanos;
    private boolean closed;
    private boolean idle;
    private boolean discarded;
    // Requests handed this connection so far, the current one included.
    private int requests;

    private Conn(HttpClientConnection http, long keepAliveNanos) {
      this.http = http;
      this.keepAliveNanos = keepAliveNanos;
    }
  }

  private final HttpClientAgent client;
  private final HttpConnectOptions connect;
  private final int max;
  private final long keepAliveNanos;
  private final boolean reuse;
  // Written on the runner's context only; read by the reporter from another thread.
  private volatile long opened;
  private volatile long closedByServer;
  private volatile boolean shuttingDown;
  private final ArrayDeque<Conn> idle = new ArrayDeque<>();
  private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
  // Connections open or being opened, not yet closed or discarded.
  private int open;
  private int connecting;

  /**
   * @param client the Vert.x client that opens the connections
   * @param connect where to connect, with the connect timeout
   * @param max connections open at once, at most
   * @param keepAliveSeconds how long an idle connection is reused unless the server says otherwise
   * @param reuse false: every connection carries one request and is closed after it
   */
  ConnectionPool(
      HttpClientAgent client,
      HttpConnectOptions connect,
      int max,
      int keepAliveSeconds,
      boolean reuse) {
    this.client = client;
    this.connect = connect;
    this.max = max;
    this.keepAliveNanos = TimeUnit.SECONDS.toNanos(keepAliveSeconds);
    this.reuse = reuse;
  }

  /** Whether connections are kept alive and reused. */
  boolean reuses() {
    return reuse;
  }

  /** Connections opened so far. */
  long opened() {
    return opened;
  }

  /**
   * Connections the server closed while they waited in the pool, within a second of a response that
   * announced keep-alive.
   */
  long closedByServer() {
    return closedByServer;
  }

  /** The client is closing every connection: closes from now on are not the server's. */
  void shutdown() {
    shuttingDown = true;
  }

  /** Whether {@link #shutdown} was called. */
  boolean shuttingDown() {
    return shuttingDown;
  }

  /** Whether {@code c} carried a request before the one it carries now. */
  static boolean reused(Conn c) {
    return c.requests > 1;
  }

  /** Closes a connection whose request failed; it never goes back to the pool. */
  void discardBroken(Conn c) {
    if (!c.closed) {
      discard(c);
    }
  }

  /** Hands the waiter an idle connection, or queues it and opens one if it may. */
  void acquire(Waiter waiter) {
    long now = System.nanoTime();
    Conn c;
    while ((c = idle.pollFirst()) != null) {
      if (c.closed) {
        continue;
      }
      c.idle = false;
      if (now - c.idleSinceNanos > c.keepAliveNanos) {
        discard(c);
        continue;
      }
      hand(waiter, c);
      return;
    }
    waiters.addLast(waiter);
    connectForWaiters();
  }

  /**
   * Opens a new connection for this waiter alone, never an idle or handed-back one: its request
   * failed on a reused connection, and another might be as stale. It may take the pool one over
   * {@code max} for a moment (one per retry in flight); afterwards it is released as any other.
   */
  void acquireFresh(Waiter waiter) {
    open++;
    try {
      client
          .connect(connect)
          .onComplete(
              ar -> {
                if (ar.failed()) {
                  open--;
                  waiter.onConnectFailure(ar.cause());
                  connectForWaiters();
                  return;
                }
                opened++;
                Conn c = new Conn(ar.result(), keepAliveNanos);
                c.http.closeHandler(v -> closedByPeer(c));
                if (waiter.gone()) {
                  reuse(c);
                } else {
                  hand(waiter, c);
                }
              });
    } catch (IllegalStateException e) {
      open--;
      waiter.onConnectFailure(e);
    }
  }

  /**
   * Gives a connection back.
   *
   * @param ended the response that ended on it, or null when it did not end (reset, timeout,
   *     failure): the connection is then closed
   */
  void release(Conn c, HttpClientResponse ended) {
    if (c.closed) {
      return;
    }
    if (!reuse || ended == null || !keepsAlive(ended)) {
      discard(c);
      return;
    }
    long serverKeepAlive = keepAliveSeconds(ended.getHeader("keep-alive"));
    if (serverKeepAlive >= 0) {
      c.keepAliveNanos = TimeUnit.SECONDS.toNanos(serverKeepAlive);
    }
    reuse(c);
  }

  /** Gives back a connection that carried no request (its waiter was gone). */
  void releaseUnused(Conn c) {
    c.requests--;
    if (!c.closed) {
      reuse(c);
    }
  }

  private void reuse(Conn c) {
    Waiter w = nextWaiter();
    if (w != null) {
      hand(w, c);
    } else {
      c.idleSinceNanos = System.nanoTime();
      c.idle = true;
      idle.addFirst(c);
    }
  }

  private void hand(Waiter w, Conn c) {
    c.requests++;
    w.onConnection(c);
  }

  /** The first waiter still waiting, removed from the queue; null when none. */
  private Waiter nextWaiter() {
    Waiter w;
    while ((w = waiters.pollFirst()) != null) {
      if (!w.gone()) {
        return w;
      }
    }
    return null;
  }

  /** Opens connections while waiters outnumber the connections being opened, within the caps. */
  private void connectForWaiters() {
    while (connecting < MAX_CONNECTING && open < max && waiters.size() > connecting) {
      Waiter head = waiters.peekFirst();
      if (head.gone()) {
        waiters.pollFirst();
        continue;
      }
      open++;
      connecting++;
      connect();
    }
  }

  private void connect() {
    try {
      client
          .connect(connect)
          .onComplete(
              ar -> {
                connecting--;
                if (ar.failed()) {
                  open--;
                  // The longest waiter is the one this connection was opened for.
                  Waiter w = nextWaiter();
                  if (w != null) {
                    w.onConnectFailure(ar.cause());
                  }
                } else {
                  opened++;
                  Conn c = new Conn(ar.result(), keepAliveNanos);
                  c.http.closeHandler(v -> closedByPeer(c));
                  reuse(c);
                }
                connectForWaiters();
              });
    } catch (IllegalStateException e) {
      // The client was closed: nothing will connect again.
      connecting--;
      open--;
      Waiter w;
      while ((w = nextWaiter()) != null) {
        w.onConnectFailure(e);
      }
    }
  }

  private void discard(Conn c) {
    c.discarded = true;
    closed(c);
    c.http.close();
  }

  /**
   * The connection closed without this pool closing it. Counted as the server's change of mind when
   * it came within {@link #PROMPT_CLOSE_NANOS} of the response that announced keep-alive (an idle
   * timeout, uvicorn's 5 s for one, is not such a close).
   */
  private void closedByPeer(Conn c) {
    if (!c.closed && c.idle) {
      idle.remove(c);
      if (!c.discarded
          && !shuttingDown
          && c.requests > 0
          && System.nanoTime() - c.idleSinceNanos <= PROMPT_CLOSE_NANOS) {
        closedByServer++;
      }
    }
    closed(c);
  }

  private void closed(Conn c) {
    if (c.closed) {
      return;
    }
    c.closed = true;
    c.idle = false;
    open--;
    connectForWaiters();
  }

  /** RFC 9112 §9.3: persistent unless either side says close; HTTP/1.0 only with keep-alive. */
  static boolean keepsAlive(HttpClientResponse r) {
    String connection = r.getHeader("connection");
    String tokens = connection == null ? "" : connection.toLowerCase(Locale.ROOT);
    if (tokens.contains("close")) {
      return false;
    }
    return r.version() != HttpVersion.HTTP_1_0 || tokens.contains("keep-alive");
  }

  /** The {@code timeout} of a {@code Keep-Alive} header in seconds, or -1. */
  static long keepAliveSeconds(String header) {
    if (header == null) {
      return -1;
    }
    for (String part : header.split(",")) {
      String p = part.trim();
      if (p.regionMatches(true, 0, "timeout=", 0, 8)) {
        try {
          return Math.max(0, Long.parseLong(p.substring(8).trim()));
        } catch (NumberFormatException e) {
          return -1;
        }
      }
    }
    return -1;
  }
}
