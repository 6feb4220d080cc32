package io.phasemeter.proxy.pipeline;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.proxy.gateway.Priority;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A pool's inference slots: at most {@code capacity} upstream requests at once; the rest wait in a
 * bounded queue with a timeout. The capacity follows the pool's available upstreams ({@link
 * #capacity(int)}): a smaller one revokes no slot already granted (in use may exceed it until those
 * requests end) and grants none until in use is below it; a larger one grants waiters at once; none
 * at all (no upstream available) refuses new requests with {@code no_healthy_upstream}, as a pool
 * with no available upstream always has, while those already waiting stay, bounded by the queue's
 * timeout (an ejection's backoff is often shorter, and its half-open probe gives a slot). A freed
 * slot goes to the oldest waiter of the highest priority, except that a waiter overtaken {@code
 * maxOvertakes} times by later arrivals goes first: low priority is served later, never starved
 * ({@code maxOvertakes = 0} is plain FIFO). Shared by every event loop, so state changes happen
 * under the pool's lock and waiters are completed on their own context.
 */
public final class SlotPool implements MeterBinder {
  private static final Priority[] LEVELS = Priority.values();

  private final String name;
  private final int configured;
  private final int maxQueue;
  private final long timeoutMs;
  private final int maxOvertakes;
  private final Vertx vertx;

  /** One FIFO per priority, highest first; each is in arrival ({@code seq}) order. */
  @SuppressWarnings("unchecked")
  private final ArrayDeque<Waiter>[] waiters = new ArrayDeque[LEVELS.length];

  private int waiting;
  private long nextSeq;
  private int inUse;
  private int capacity;

  /**
   * Creates a pool of {@code capacity} slots (its configured slots, all available at first) and a
   * queue of at most {@code maxQueue} waiters.
   */
  public SlotPool(String name, int capacity, int maxQueue, Duration timeout, Vertx vertx) {
    this(name, capacity, maxQueue, timeout, 16, vertx);
  }

  /** As above, with the starvation bound: how often a waiter may be overtaken. */
  public SlotPool(
      String name, int capacity, int maxQueue, Duration timeout, int maxOvertakes, Vertx vertx) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity: must be at least 1 (got " + capacity + ")");
    }
    this.name = name;
    this.configured = capacity;
    this.capacity = capacity;
    this.maxQueue = maxQueue;
    this.timeoutMs = Math.max(1, timeout.toMillis());
    this.maxOvertakes = maxOvertakes;
    this.vertx = vertx;
    for (int i = 0; i < waiters.length; i++) {
      waiters[i] = new ArrayDeque<>();
    }
  }

  /**
   * Registers {@code llm_queue_depth}, {@code llm_slots_in_use}, {@code llm_slots_capacity} (now)
   * and {@code llm_slots_configured}, labelled by the pool.
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    Tags pool = Tags.of("llm.pool", name);
    Gauge.builder("llm.queue.depth", this, SlotPool::queueDepth)
        .tags(pool)
        .description("Requests waiting for a slot")
        .register(registry);
    Gauge.builder("llm.slots.in_use", this, SlotPool::inUse)
        .tags(pool)
        .description("Upstream requests running")
        .register(registry);
    Gauge.builder("llm.slots.capacity", this, SlotPool::capacity)
        .tags(pool)
        .description("Slots of the pool's available upstreams")
        .register(registry);
    Gauge.builder("llm.slots.configured", this, SlotPool::configured)
        .tags(pool)
        .description("Slots of all the pool's upstreams, available or not")
        .register(registry);
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

  /** Asks for a slot at normal priority; see {@link #acquire(Priority)}. */
  public Ticket acquire() {
    return acquire(Priority.NORMAL);
  }

  /** Asks for a slot; must be called on a Vert.x context (the request's event loop). */
  public Ticket acquire(Priority priority) {
    Context context = vertx.getOrCreateContext();
    Waiter w;
    int depth;
    synchronized (this) {
      depth = waiting;
      if (capacity == 0) {
        return new Ticket(Future.failedFuture(noUpstream()), depth, null);
      }
      if (inUse < capacity && waiting == 0) {
        inUse++;
        return new Ticket(Future.succeededFuture(new Slot()), 0, null);
      }
      if (waiting >= maxQueue) {
        return new Ticket(
            Future.failedFuture(
                ProxyFailure.retryAfter(
                    ProxyFailure.Kind.QUEUE_FULL,
                    "Pool '" + name + "' is at capacity and its queue is full; retry later.",
                    1)),
            depth,
            null);
      }
      w = new Waiter(context, priority.ordinal(), nextSeq++);
      waiters[w.level].addLast(w);
      waiting++;
    }
    w.timer = context.owner().setTimer(timeoutMs, id -> w.timeout());
    return new Ticket(w.promise.future(), depth, w);
  }

  private void release() {
    Waiter next;
    synchronized (this) {
      // After a shrink, in use may be above the capacity: the slot is then not handed on.
      next = inUse <= capacity ? takeNext() : null;
      if (next == null) {
        inUse--;
        return;
      }
      next.granted = true;
    }
    next.grant(new Slot());
  }

  /**
   * Sets the capacity to {@code slots} (the slots of the pool's available upstreams): larger grants
   * waiters at once up to it; smaller takes back nothing granted; 0 grants nothing, and those
   * waiting stay until it grows or their timeout (a request arriving then is refused).
   */
  public void capacity(int slots) {
    if (slots < 0) {
      throw new IllegalArgumentException("capacity: must be 0 or more (got " + slots + ")");
    }
    java.util.List<Waiter> granted = new java.util.ArrayList<>();
    synchronized (this) {
      capacity = slots;
      while (inUse < capacity) {
        Waiter next = takeNext();
        if (next == null) {
          break;
        }
        next.granted = true;
        inUse++;
        granted.add(next);
      }
    }
    for (Waiter w : granted) {
      w.grant(new Slot());
    }
  }

  private ProxyFailure noUpstream() {
    return ProxyFailure.retryAfter(
        ProxyFailure.Kind.NO_HEALTHY_UPSTREAM,
        "No upstream of pool '" + name + "' is available; retry later.",
        1);
  }

  /** Removes and returns the waiter the next free slot belongs to; call under the lock. */
  private Waiter takeNext() {
    Waiter best = null;
    for (ArrayDeque<Waiter> q : waiters) {
      if (!q.isEmpty()) {
        best = q.peekFirst();
        break;
      }
    }
    if (best == null) {
      return null;
    }
    // Only a level's head can be the most overtaken of its level: later ones arrived later.
    Waiter chosen = best;
    for (int level = best.level + 1; level < waiters.length; level++) {
      Waiter head = waiters[level].peekFirst();
      if (head != null && head.seq < chosen.seq && head.overtaken >= maxOvertakes) {
        chosen = head;
      }
    }
    waiters[chosen.level].pollFirst();
    waiting--;
    // Everyone still waiting who arrived before the chosen one has just been overtaken.
    for (ArrayDeque<Waiter> q : waiters) {
      for (Waiter w : q) {
        if (w.seq > chosen.seq) {
          break;
        }
        w.overtaken++;
      }
    }
    return chosen;
  }

  /** Slots in use now. */
  public synchronized int inUse() {
    return inUse;
  }

  /** Requests waiting now. */
  public synchronized int queueDepth() {
    return waiting;
  }

  /** Requests of {@code priority} waiting now. */
  public synchronized int queueDepth(Priority priority) {
    return waiters[priority.ordinal()].size();
  }

  /** The slots that may be in use now: those of the pool's available upstreams. */
  public synchronized int capacity() {
    return capacity;
  }

  /** The slots of all the pool's upstreams, available or not. */
  public int configured() {
    return configured;
  }

  public String name() {
    return name;
  }

  private final class Waiter {
    final Context context;
    final int level;
    final long seq;
    final Promise<Slot> promise = Promise.promise();
    long timer = -1;
    int overtaken;
    boolean granted;

    Waiter(Context context, int level, long seq) {
      this.context = context;
      this.level = level;
      this.seq = seq;
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
        for (Iterator<Waiter> it = waiters[level].iterator(); it.hasNext(); ) {
          if (it.next() == this) {
            it.remove();
            waiting--;
            return true;
          }
        }
        return false;
      }
    }
  }
}
