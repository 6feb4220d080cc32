package io.phasemeter.proxy.upstream;

import io.phasemeter.core.NanoClock;
import io.vertx.core.Vertx;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntConsumer;

/**
 * A pool's capacity: the slots of its upstreams available now (healthy, not ejected), told to one
 * listener (the pool's slot queue) whenever it changes. {@link UpstreamPool} says when something
 * may have changed; the end of an ejection's backoff, which no event marks, is noticed by a timer
 * set at the ejection, so that waiters need no request to pass by.
 *
 * <p>Every event loop may report a change, so state is guarded by the instance's lock: two changes
 * seen on two event loops are told in the order they took effect, never the older one last.
 */
final class PoolCapacity {
  private final List<UpstreamHost> hosts;
  private final NanoClock clock;
  private final Vertx vertx;
  private final Map<UpstreamHost, Long> backoffTimers = new IdentityHashMap<>();
  private IntConsumer listener;
  private int told = -1;
  private boolean closed;

  PoolCapacity(List<UpstreamHost> hosts, NanoClock clock, Vertx vertx) {
    this.hosts = hosts;
    this.clock = clock;
    this.vertx = vertx;
  }

  /** Tells {@code l} the capacity now and at every change; a second listener replaces the first. */
  synchronized void listen(IntConsumer l) {
    listener = l;
    told = available();
    l.accept(told);
  }

  /** Works the capacity out again and tells the listener if it changed. */
  synchronized void changed() {
    if (listener == null || closed) {
      return;
    }
    int now = available();
    if (now != told) {
      told = now;
      listener.accept(now);
    }
  }

  /** {@code host} was just ejected: tells the change, and again when its backoff runs out. */
  void ejected(UpstreamHost host) {
    changed();
    whenBackoffEnds(host);
  }

  private synchronized void whenBackoffEnds(UpstreamHost host) {
    if (closed) {
      return;
    }
    Long previous = backoffTimers.remove(host);
    if (previous != null) {
      vertx.cancelTimer(previous);
    }
    long left = host.ejectedUntil() - clock.nanoTime();
    if (left <= 0) {
      changed();
      return;
    }
    long ms = Math.max(1, (left + 999_999) / 1_000_000);
    long[] self = new long[1];
    self[0] =
        vertx.setTimer(
            ms,
            id -> {
              synchronized (this) {
                backoffTimers.remove(host, self[0]);
              }
              // A timer may fire a little before the clock says the backoff ended: it waits again.
              if (host.ejected(clock.nanoTime())) {
                whenBackoffEnds(host);
              } else {
                changed();
              }
            });
    backoffTimers.put(host, self[0]);
  }

  /**
   * The slots of the upstreams available now, one for a half-open one ({@link
   * UpstreamHost#slotsNow}).
   */
  int available() {
    long now = clock.nanoTime();
    int c = 0;
    for (UpstreamHost h : hosts) {
      c += h.slotsNow(now);
    }
    return c;
  }

  /** The slots of all the upstreams, available or not. */
  int configured() {
    int c = 0;
    for (UpstreamHost h : hosts) {
      c += h.slots();
    }
    return c;
  }

  /** Cancels the backoff timers; nothing is told after this. */
  synchronized void close() {
    closed = true;
    backoffTimers.values().forEach(vertx::cancelTimer);
    backoffTimers.clear();
  }
}
