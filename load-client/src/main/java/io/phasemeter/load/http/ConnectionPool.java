package io.phasemeter.load.http;

import io.netty.util.NetUtil;
import io.phasemeter.core.net.TlsVersions;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientConnection;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpConnectOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.SocketAddress;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * The runner's keep-alive connections (HTTP/1.1, or h2 with {@code --http2}). A request takes the
 * most recently used idle connection; when none is idle it waits in arrival order and a new
 * connection is opened for it, and it takes whichever comes first: that connection, or one another
 * request hands back (as Go's {@code http.Transport} does). At most {@link #MAX_CONNECTING}
 * connections are being opened at once, and at most {@code max} are open. Taking and returning a
 * connection costs the same however many are open. Every method runs on the runner's context.
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
 *
 * <p>Over HTTP/2 ({@code --http2}) a connection carries up to the server's {@code
 * SETTINGS_MAX_CONCURRENT_STREAMS} streams at once (at most {@link
 * Transport#MAX_STREAMS_PER_CONNECTION}): a connection with a free stream stays at the head of the
 * available ones, so streams gather on few connections, and a burst opens connections for the
 * streams the open ones cannot take. A stream that ends badly (reset, timeout) frees its stream;
 * the connection stays unless it closed. A {@code GOAWAY} retires the connection: its streams
 * finish, no new one starts on it, and it closes after the last. Retry rules are the same as over
 * HTTP/1.1: a request that fails on a reused connection before any response byte goes once more on
 * a fresh one.
 *
 * <p>Each connection's set-up is timed ({@link Conn#setUpSince}): the host name is resolved here,
 * by the JDK's resolver on a worker thread (none for an IP literal), and the connection made to the
 * address found, keeping the name for SNI and the certificate's check; the TCP-connected instant of
 * a TLS connection and the protocol its handshake chose come from {@link TlsTiming}. A connection
 * carries as many streams at once as its own protocol allows, whatever was asked: one over http/1.1
 * (ALPN may choose it though {@code --http2} asked for h2), the server's {@code
 * SETTINGS_MAX_CONCURRENT_STREAMS} over h2.
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

  /**
   * A connection's set-up as one request waited through it; -1 for a part that is absent.
   *
   * @param dns resolving the host name
   * @param connect the connect, from the pool asking for it to TCP up
   * @param tls TCP up to the connection ready: the handshake (and over h2 the server's SETTINGS)
   */
  record SetUp(long dns, long connect, long tls) {
    /** No set-up: a reused connection, or one ready before the request asked. */
    static final SetUp NONE = new SetUp(-1, -1, -1);
  }

  /** One connection of the pool. */
  static final class Conn {
    final HttpClientConnection http;

    /** When its set-up began (client clock): before the name's resolution. */
    final long startNanos;

    /**
     * When the name was resolved and the connect asked for; {@code startNanos} for an IP literal.
     */
    final long resolvedNanos;

    /** Whether a name was resolved (not an IP literal). */
    final boolean resolved;

    /** When its TCP connect completed (TLS only); -1 when not known (plain http, no note). */
    final long tcpUpNanos;

    /** When it was ready to carry a request. */
    final long readyNanos;

    /** {@code h2} or {@code http/1.1}; null until known (a TLS connection without its note). */
    String protocol;

    private long idleSinceNanos;
    private long keepAliveNanos;
    private boolean closed;
    // In the pool's deque of connections with a free stream.
    private boolean available;
    private boolean discarded;
    private boolean retiring;
    // Streams it may carry at once (1 over HTTP/1.1) and those it carries now.
    private int capacity;
    private int streams;
    // Requests handed this connection so far, the current one included.
    private int requests;

    private Conn(
        HttpClientConnection http,
        long keepAliveNanos,
        String protocol,
        long startNanos,
        long resolvedNanos,
        boolean resolved,
        long tcpUpNanos,
        long readyNanos) {
      this.http = http;
      this.keepAliveNanos = keepAliveNanos;
      this.capacity = 1;
      this.protocol = protocol;
      this.startNanos = startNanos;
      this.resolvedNanos = resolvedNanos;
      this.resolved = resolved;
      this.tcpUpNanos = tcpUpNanos;
      this.readyNanos = readyNanos;
    }

    /**
     * The part of this connection's set-up that a request asking for a connection at {@code asked}
     * waited through, split: {@code dns} (-1 for an IP literal), {@code connect} (from the connect
     * asked for to TCP up; plain http and a TLS connection without its note: to the connection
     * ready), {@code tls} (TCP up to ready; -1 when not known); they add up to {@code ready -
     * max(start, asked)}. A request that asked after the set-up began (it took a connection opened
     * for another waiter, which took one that came first) gets the parts after it asked, so that
     * its {@code transport_setup} is still its wait plus the three; one that asked after the
     * connection was ready gets none.
     */
    SetUp setUpSince(long asked) {
      if (asked >= readyNanos) {
        return SetUp.NONE;
      }
      long dns = resolved ? Math.max(0, resolvedNanos - Math.max(startNanos, asked)) : -1;
      long from = Math.max(resolvedNanos, asked);
      if (tcpUpNanos < 0) {
        return new SetUp(dns, readyNanos - from, -1);
      }
      long connect = Math.max(0, tcpUpNanos - from);
      return new SetUp(dns, connect, readyNanos - Math.max(tcpUpNanos, from));
    }

    /** Whether this is the first request the connection carries. */
    boolean fresh() {
      return requests == 1;
    }
  }

  private final Vertx vertx;
  private final HttpClientAgent client;
  private final HttpConnectOptions connect;
  private final boolean ssl;
  private final boolean http2;
  private final boolean ipLiteral;
  private final TlsTiming timing;
  private final Future<Void> warmed;
  private final int max;
  private final long keepAliveNanos;
  private final boolean reuse;
  // Written on the runner's context only; read by the reporter from another thread.
  private volatile long opened;
  private volatile long closedByServer;
  private volatile boolean shuttingDown;
  private volatile String protocol;
  private volatile String tlsVersion;
  private final ArrayDeque<Conn> idle = new ArrayDeque<>();
  private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
  // Connections open or being opened, not yet closed or discarded.
  private int open;
  private int connecting;
  // Streams the last connection opened could carry at once: how many waiters one opening serves.
  private int perConnection;

  /**
   * @param vertx the Vert.x on whose worker threads the host name is resolved
   * @param client the Vert.x client that opens the connections
   * @param connect where to connect, with the connect timeout
   * @param http2 whether connections speak h2 (prior knowledge over http, ALPN over https)
   * @param timing where TLS connections note their TCP-connected instant
   * @param warmed completes once the client's TLS context is built ({@link TlsWarmUp}); no
   *     connection is opened before
   * @param max connections open at once, at most
   * @param keepAliveSeconds how long an idle connection is reused unless the server says otherwise
   * @param reuse false: every connection carries one request and is closed after it
   */
  ConnectionPool(
      Vertx vertx,
      HttpClientAgent client,
      HttpConnectOptions connect,
      boolean http2,
      TlsTiming timing,
      Future<Void> warmed,
      int max,
      int keepAliveSeconds,
      boolean reuse) {
    this.vertx = vertx;
    this.client = client;
    this.connect = connect;
    this.ssl = Boolean.TRUE.equals(connect.isSsl());
    this.http2 = http2;
    this.ipLiteral =
        NetUtil.isValidIpV4Address(connect.getHost())
            || NetUtil.isValidIpV6Address(connect.getHost());
    this.timing = timing;
    this.warmed = warmed;
    this.max = max;
    this.keepAliveNanos = TimeUnit.SECONDS.toNanos(keepAliveSeconds);
    this.reuse = reuse;
    // Over h2, one connection is expected to carry many streams until the first one says; from
    // then on each new connection says what the next one will likely carry.
    this.perConnection = http2 && reuse ? 100 : 1;
  }

  /** Whether connections are kept alive and reused. */
  boolean reuses() {
    return reuse;
  }

  /** TLS notes held now: connections whose note the pool has not taken (see {@link TlsTiming}). */
  int tlsNotesHeld() {
    return timing.size();
  }

  /** Connections opened so far. */
  long opened() {
    return opened;
  }

  /**
   * The protocol of the connections opened ({@code h2}, {@code http/1.1}); both, comma-separated,
   * when they differed; null before the first.
   */
  String protocol() {
    return protocol;
  }

  /**
   * The TLS version of the connections opened ({@code 1.3}: OpenTelemetry's spelling, as the
   * proxy's records and spans); null over plain http.
   */
  String tlsVersion() {
    return tlsVersion;
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

  /**
   * A request failed on {@code c} in a way that makes the connection suspect: over HTTP/1.1 it is
   * closed; over h2 the request's stream is freed and the connection retired (closed after its
   * other streams).
   */
  void discardBroken(Conn c) {
    c.streams--;
    if (!c.closed) {
      retire(c);
    }
  }

  /** Hands the waiter a connection with a free stream, or queues it and opens one if it may. */
  void acquire(Waiter waiter) {
    long now = System.nanoTime();
    Conn c;
    while ((c = idle.peekFirst()) != null) {
      if (c.closed || c.retiring) {
        idle.pollFirst();
        c.available = false;
        continue;
      }
      if (c.streams == 0 && now - c.idleSinceNanos > c.keepAliveNanos) {
        idle.pollFirst();
        c.available = false;
        discard(c);
        continue;
      }
      if (c.streams >= c.capacity) {
        // The server lowered its stream limit while the connection waited: it comes back when a
        // stream ends or the limit rises.
        idle.pollFirst();
        c.available = false;
        continue;
      }
      if (c.streams + 1 >= c.capacity) {
        idle.pollFirst();
        c.available = false;
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
    open(
        c -> {
          if (waiter.gone()) {
            reuse(c);
          } else {
            hand(waiter, c);
          }
        },
        cause -> {
          open--;
          waiter.onConnectFailure(cause);
          connectForWaiters();
        });
  }

  /**
   * Gives a stream back.
   *
   * @param ended the response that ended on it, or null when it did not end (reset, timeout,
   *     failure): over HTTP/1.1 the connection is then closed
   */
  void release(Conn c, HttpClientResponse ended) {
    c.streams--;
    if (c.closed) {
      return;
    }
    if (!reuse || c.retiring) {
      if (c.streams <= 0) {
        discard(c);
      }
      return;
    }
    if ("h2".equals(c.protocol)) {
      // h2: a reset or failed stream leaves the connection as it is; a close is seen on its own.
      reuse(c);
      return;
    }
    if (ended == null || !keepsAlive(ended)) {
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
    c.streams--;
    if (!c.closed) {
      reuse(c);
    }
  }

  /** Hands {@code c}'s free streams to waiters; a connection with one left waits in the pool. */
  private void reuse(Conn c) {
    if (c.retiring) {
      if (c.streams <= 0) {
        discard(c);
      }
      return;
    }
    Waiter w;
    while (c.streams < c.capacity && (w = nextWaiter()) != null) {
      hand(w, c);
    }
    if (c.streams < c.capacity) {
      if (c.streams == 0) {
        c.idleSinceNanos = System.nanoTime();
      }
      if (!c.available) {
        c.available = true;
        idle.addFirst(c);
      }
    }
  }

  private void hand(Waiter w, Conn c) {
    c.requests++;
    c.streams++;
    w.onConnection(c);
  }

  /** No new stream goes on {@code c}; it closes after its last. */
  private void retire(Conn c) {
    c.retiring = true;
    if (c.available) {
      c.available = false;
      idle.remove(c);
    }
    if (c.streams <= 0) {
      discard(c);
    }
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

  /**
   * Opens connections while the waiters outnumber the streams of the connections being opened,
   * within the caps.
   */
  private void connectForWaiters() {
    while (connecting < MAX_CONNECTING
        && open < max
        && waiters.size() > (long) connecting * perConnection) {
      Waiter head = waiters.peekFirst();
      if (head.gone()) {
        waiters.pollFirst();
        continue;
      }
      open++;
      connecting++;
      open(
          c -> {
            connecting--;
            reuse(c);
            connectForWaiters();
          },
          cause -> {
            connecting--;
            open--;
            // The longest waiter is the one this connection was opened for.
            Waiter w = nextWaiter();
            if (w != null) {
              w.onConnectFailure(cause);
            }
            connectForWaiters();
          });
    }
  }

  /**
   * Resolves the name (timed), connects to the address found and times the rest; {@code opened}
   * gets the new connection, {@code failed} the cause.
   *
   * <p>The JDK's resolver ({@link InetAddress#getByName}), on a worker thread and unordered, so
   * that lookups of a burst run side by side: public API, the same resolution as {@code
   * --admin-discover}'s (the hosts file, {@code -Djdk.net.hosts.file}, the JVM's DNS cache), and
   * nothing to lose on a Vert.x upgrade. The hop to the worker and back is inside {@code dns}.
   */
  private void open(
      java.util.function.Consumer<Conn> opened, java.util.function.Consumer<Throwable> failed) {
    if (!warmed.isComplete()) {
      // Only at the very start of a run over https: the wait is the requests' wait.
      warmed.onComplete(v -> open(opened, failed));
      return;
    }
    long start = System.nanoTime();
    if (ipLiteral) {
      connectTo(connect, start, start, false, opened, failed);
      return;
    }
    String host = connect.getHost();
    vertx
        .executeBlocking(() -> InetAddress.getByName(host), false)
        .onComplete(
            ar -> {
              long resolved = System.nanoTime();
              if (ar.failed()) {
                failed.accept(ar.cause());
                return;
              }
              HttpConnectOptions to =
                  new HttpConnectOptions(connect)
                      .setServer(
                          SocketAddress.inetSocketAddress(
                              new InetSocketAddress(ar.result(), connect.getPort())));
              connectTo(to, start, resolved, true, opened, failed);
            });
  }

  private void connectTo(
      HttpConnectOptions to,
      long start,
      long resolved,
      boolean named,
      java.util.function.Consumer<Conn> opened,
      java.util.function.Consumer<Throwable> failed) {
    try {
      client
          .connect(to)
          .onComplete(
              ar -> {
                long ready = System.nanoTime();
                if (ar.failed()) {
                  failed.accept(ar.cause());
                  return;
                }
                this.opened++;
                opened.accept(newConn(ar.result(), start, resolved, named, ready));
              });
    } catch (IllegalStateException e) {
      // The client was closed: nothing will connect again.
      failed.accept(e);
    }
  }

  /**
   * The pool's view of a connection just made. Its protocol is the one it speaks: over https the
   * one its handshake chose (ALPN), never inferred from {@code --http2}; over plain http the one
   * asked for (h2c with prior knowledge fails if the server does not speak it). A TLS connection
   * whose note is missing (not expected: see {@link TlsTiming}) has its whole set-up after the name
   * in {@code connect}, no {@code tls}, and one stream until its first request says which protocol
   * it speaks ({@link #learned}).
   */
  private Conn newConn(
      HttpClientConnection http, long start, long resolved, boolean named, long ready) {
    long tcpUp = -1;
    String proto = http2 ? "h2" : "http/1.1";
    if (ssl) {
      TlsTiming.Note note =
          http.localAddress() == null ? null : timing.take(http.localAddress().port());
      if (note != null
          && note.protocol() != null
          && note.tcpUpNanos >= resolved
          && note.tcpUpNanos <= ready) {
        tcpUp = note.tcpUpNanos;
        proto = note.protocol();
      } else {
        proto = null;
      }
      if (tlsVersion == null && http.sslSession() != null) {
        tlsVersion = TlsVersions.otel(http.sslSession().getProtocol());
      }
    }
    Conn c = new Conn(http, keepAliveNanos, proto, start, resolved, named, tcpUp, ready);
    c.http.closeHandler(v -> closedByPeer(c));
    if (proto != null) {
      speaks(c, proto);
    }
    return c;
  }

  /**
   * The protocol of a connection that had none ({@link Conn#protocol} null), from the version of
   * the first request made on it; its spare streams go to waiters.
   */
  void learned(Conn c, HttpVersion version) {
    if (c.protocol != null) {
      return;
    }
    speaks(c, version == HttpVersion.HTTP_2 ? "h2" : "http/1.1");
    if (!c.closed && c.streams < c.capacity) {
      reuse(c);
    }
  }

  /** Sets what {@code c} carries at once from the protocol it speaks. */
  private void speaks(Conn c, String proto) {
    c.protocol = proto;
    seen(proto);
    boolean h2 = proto.equals("h2");
    c.capacity = !reuse || !h2 ? 1 : streamsAllowed(c.http.maxActiveStreams());
    if (reuse) {
      perConnection = c.capacity;
    }
    if (h2) {
      c.http.goAwayHandler(g -> retire(c));
      c.http.remoteSettingsHandler(
          s -> {
            int before = c.capacity;
            c.capacity = reuse ? streamsAllowed(s.getMaxConcurrentStreams()) : 1;
            if (c.capacity > before && !c.closed && c.streams < c.capacity) {
              reuse(c);
            }
          });
    }
  }

  private static int streamsAllowed(long serverMax) {
    return (int) Math.max(1, Math.min(Transport.MAX_STREAMS_PER_CONNECTION, serverMax));
  }

  private void seen(String proto) {
    String p = protocol;
    if (p == null) {
      protocol = proto;
    } else if (!p.contains(proto)) {
      protocol = p + "," + proto;
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
    if (!c.closed && c.available) {
      idle.remove(c);
      if (!c.discarded
          && !shuttingDown
          && c.requests > 0
          && c.streams == 0
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
    c.available = false;
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
