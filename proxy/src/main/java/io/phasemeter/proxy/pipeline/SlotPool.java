package io.phasemeter.proxy.pipeline;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A pool's inference slots: at most {@code slots} upstream requests at once; the rest wait in a
 * bounded FIFO queue with a timeout. Shared by every event loop, so state changes happen under the
 * pool's lock and waiters are completed on their own context.
 */
public final class SlotPool {
  private final String name;
  private final int capacity;
  private final int maxQueue;
  private final long timeoutMs;
  private final Vertx vertx;
  private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
  private int inUse;

  /** Creates a pool of {@code capacity} slots and a queue of at most {@code maxQueue} waiters. */
  public SlotPool(String name, int capacity, int maxQueue, Duration timeout, Vertx vertx) {
    this.name = name;
    this.capacity = capacity;
    this.maxQueue = maxQueue;
    this.timeoutMs = Math.max(1, timeout.toMillis());
    this.vertx = vertx;
  }

  /** A granted slot; {@link #release()} is idempotent. */
  public final class Slot {
    private final AtomicBoolean released = new AtomicBoolean();

    private Slot() {}

    /** Gives the slot back (to the next waiter, if any). */
    public void release() {
      if (released.compareAndSet(false, true)) {
        SlotPool.this.release();
      }
    }
  }

  /** A request's place in the line; see {@link SlotPool#acquire}. */
  public final class Ticket {
    private final Future<Slot> future;
    private final int depthAtEntry;
    private final Waiter waiter;

    private Ticket(Future<Slot> future, int depthAtEntry, Waiter waiter) {
      this.future = future;
      this.depthAtEntry = depthAtEntry;
      this.waiter = waiter;
    }

    /** Completes with the slot, or fails with QUEUE_FULL, QUEUE_TIMEOUT or CLIENT_CANCELLED. */
    public Future<Slot> future() {
      return future;
    }

    /** How many requests were already waiting when this one arrived. */
    public int depthAtEntry() {
      return depthAtEntry;
    }

    /** Leaves the queue at once (the client went away); a granted slot is released. */
    public void cancel() {
      if (waiter != null) {
        waiter.cancel();
      } else if (future.succeeded()) {
        future.result().release();
      }
    }
  }

  /** Asks for a slot; must be called on a Vert.x context (the request's event loop). */
  public Ticket acquire() {
    Context context = vertx.getOrCreateContext();
    Waiter w;
    int depth;
    synchronized (this) {
      depth = waiters.size();
      if (inUse < capacity && waiters.isEmpty()) {
        inUse++;
        return new Ticket(Future.succeededFuture(new Slot()), 0, null);
      }
      if (waiters.size() >= maxQueue) {
        return new Ticket(
            Future.failedFuture(
                ProxyFailure.retryAfter(
                    ProxyFailure.Kind.QUEUE_FULL,
                    "Pool '" + name + "' is at capacity and its queue is full; retry later.",
                    1)),
            depth,
            null);
      }
      w = new Waiter(context);
      waiters.addLast(w);
    }
    w.timer = context.owner().setTimer(timeoutMs, id -> w.timeout());
    return new Ticket(w.promise.future(), depth, w);
  }

  private void release() {
    Waiter next;
    synchronized (this) {
      next = waiters.pollFirst();
      if (next == null) {
        inUse--;
        return;
      }
      next.granted = true;
    }
    next.grant(new Slot());
  }

  /** Slots in use now. */
  public synchronized int inUse() {
    return inUse;
  }

  /** Requests waiting now. */
  public synchronized int queueDepth() {
    return waiters.size();
  }

  /** The number of slots. */
  public int capacity() {
    return capacity;
  }

  public String name() {
    return name;
  }

  private final class Waiter {
    final Context context;
    final Promise<Slot> promise = Promise.promise();
    long timer = -1;
    boolean granted;

    Waiter(Context context) {
      this.context = context;
    }

    void grant(Slot slot) {
      context.runOnContext(
          v -> {
            vertx.cancelTimer(timer);
            if (!promise.tryComplete(slot)) {
              slot.release();
            }
          });
    }

    void timeout() {
      if (remove()) {
        promise.tryFail(
            ProxyFailure.of(
                ProxyFailure.Kind.QUEUE_TIMEOUT,
                "Timed out waiting for a free slot in pool '" + name + "'."));
      }
    }

    void cancel() {
      if (remove()) {
        vertx.cancelTimer(timer);
        promise.tryFail(
            ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."));
      } else {
        // Granted meanwhile: the grant lands on this context after us; hand the slot back then.
        promise.future().onSuccess(Slot::release);
      }
    }

    private boolean remove() {
      synchronized (SlotPool.this) {
        if (granted) {
          return false;
        }
        for (Iterator<Waiter> it = waiters.iterator(); it.hasNext(); ) {
          if (it.next() == this) {
            it.remove();
            return true;
          }
        }
        return false;
      }
    }
  }
}
