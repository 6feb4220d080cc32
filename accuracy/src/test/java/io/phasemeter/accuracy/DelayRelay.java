package io.phasemeter.accuracy;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.NetSocket;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * A TCP relay that holds each direction's bytes for a fixed one-way delay, order preserved: per
 * connection and direction a FIFO of (deadline, buffer) drained by a single timer, so nothing is
 * ever reordered and nothing leaves before its deadline (timers are late, never early: an early
 * wake-up re-arms). A close on either side is queued behind the bytes already in flight on that
 * direction, then closes both sides. Listens on 127.0.0.1, port chosen by the kernel.
 *
 * <p>This stands in for {@code tc qdisc netem delay}, which this kernel lacks.
 */
final class DelayRelay implements AutoCloseable {
  private final Vertx vertx;
  private final NetServer server;
  private final NetClient client;
  private final String targetHost;
  private final int targetPort;
  private volatile long delayNanos;

  private DelayRelay(Vertx vertx, String targetHost, int targetPort, long delayMs) {
    this.vertx = vertx;
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.delayNanos = TimeUnit.MILLISECONDS.toNanos(delayMs);
    this.server = vertx.createNetServer(new NetServerOptions().setHost("127.0.0.1").setPort(0));
    this.client = vertx.createNetClient(new NetClientOptions().setTcpNoDelay(true));
    server.connectHandler(this::accept);
  }

  static DelayRelay start(Vertx vertx, String targetHost, int targetPort, long delayMs)
      throws Exception {
    DelayRelay relay = new DelayRelay(vertx, targetHost, targetPort, delayMs);
    relay.server.listen().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    return relay;
  }

  int port() {
    return server.actualPort();
  }

  /** Applies to bytes received from now on (a change never reorders queued bytes). */
  void setDelayMs(long delayMs) {
    this.delayNanos = TimeUnit.MILLISECONDS.toNanos(delayMs);
  }

  long delayMs() {
    return TimeUnit.NANOSECONDS.toMillis(delayNanos);
  }

  private void accept(NetSocket inbound) {
    inbound.pause();
    client
        .connect(targetPort, targetHost)
        .onComplete(
            ar -> {
              if (ar.failed()) {
                inbound.close();
                return;
              }
              NetSocket outbound = ar.result();
              Direction up = new Direction(inbound, outbound);
              Direction down = new Direction(outbound, inbound);
              up.start();
              down.start();
              inbound.resume();
            });
  }

  /** One direction of one connection: bytes from {@code from} to {@code to}, each held. */
  private final class Direction {
    private final NetSocket from;
    private final NetSocket to;

    /** Entries are Buffer (data) or CLOSE; deadlines are in {@link #deadlines}. */
    private final ArrayDeque<Object> items = new ArrayDeque<>();

    private final ArrayDeque<Long> deadlines = new ArrayDeque<>();
    private long timerId = -1;
    private boolean closed;

    Direction(NetSocket from, NetSocket to) {
      this.from = from;
      this.to = to;
    }

    void start() {
      from.handler(this::enqueue);
      from.closeHandler(v -> enqueue(CLOSE));
      from.exceptionHandler(e -> enqueue(CLOSE));
    }

    private void enqueue(Object item) {
      if (closed) {
        return;
      }
      items.add(item);
      deadlines.add(System.nanoTime() + delayNanos);
      if (timerId < 0) {
        drain();
      }
    }

    private void drain() {
      timerId = -1;
      long now = System.nanoTime();
      while (!items.isEmpty() && deadlines.peek() <= now) {
        deadlines.poll();
        Object item = items.poll();
        if (item == CLOSE) {
          closed = true;
          items.clear();
          deadlines.clear();
          to.close();
          from.close();
          return;
        }
        to.write((Buffer) item);
      }
      if (!items.isEmpty()) {
        long remaining = deadlines.peek() - now;
        long ms = Math.max(1, (remaining + 999_999) / 1_000_000);
        timerId = vertx.setTimer(ms, id -> drain());
      }
    }
  }

  private static final Object CLOSE = new Object();

  @Override
  public void close() throws Exception {
    server.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    client.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }
}
