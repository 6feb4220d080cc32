package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.phasemeter.proxy.gateway.Priority;
import io.phasemeter.proxy.pipeline.SlotPool.Slot;
import io.phasemeter.proxy.pipeline.SlotPool.Ticket;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class SlotPoolTest {

  private static final Duration LONG = Duration.ofMinutes(5);

  private Vertx vertx;
  private Context context;

  @BeforeEach
  void startVertx() {
    vertx = Vertx.vertx();
    context = vertx.getOrCreateContext();
  }

  @AfterEach
  void closeVertx() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  /**
   * Runs {@code action} on {@code ctx}, as the request's event loop would, and returns its value.
   */
  private static <T> T on(Context ctx, Callable<T> action) throws Exception {
    CompletableFuture<T> result = new CompletableFuture<>();
    ctx.runOnContext(
        v -> {
          try {
            result.complete(action.call());
          } catch (Throwable t) {
            result.completeExceptionally(t);
          }
        });
    return result.get(10, TimeUnit.SECONDS);
  }

  private Ticket acquire(SlotPool pool) throws Exception {
    return on(context, pool::acquire);
  }

  private static Slot slot(Ticket t) throws Exception {
    return t.future().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  private static ProxyFailure failure(Future<?> f) {
    await().atMost(Duration.ofSeconds(10)).until(f::isComplete);
    assertThat(f.failed()).as("future failed").isTrue();
    assertThat(f.cause()).isInstanceOf(ProxyFailure.class);
    return (ProxyFailure) f.cause();
  }

  private void release(Slot s) throws Exception {
    on(
        context,
        () -> {
          s.release();
          return null;
        });
  }

  @Test
  void grantsUpToCapacityThenQueues() throws Exception {
    SlotPool pool = new SlotPool("p", 2, 10, LONG, vertx);

    Ticket a = acquire(pool);
    Ticket b = acquire(pool);
    Ticket c = acquire(pool);
    Ticket d = acquire(pool);

    assertThat(a.future().succeeded()).isTrue();
    assertThat(b.future().succeeded()).isTrue();
    assertThat(a.depthAtEntry()).isZero();
    assertThat(c.future().isComplete()).isFalse();
    assertThat(d.future().isComplete()).isFalse();
    assertThat(c.depthAtEntry()).isZero();
    assertThat(d.depthAtEntry()).isEqualTo(1);
    assertThat(pool.inUse()).isEqualTo(2);
    assertThat(pool.queueDepth()).isEqualTo(2);
    assertThat(pool.capacity()).isEqualTo(2);
    assertThat(pool.name()).isEqualTo("p");
  }

  @Test
  void releaseHandsTheSlotToWaitersInArrivalOrder() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Ticket first = acquire(pool);
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> waiting = new ArrayList<>();
    for (String name : List.of("b", "c", "d")) {
      Ticket t = acquire(pool);
      t.future().onSuccess(s -> granted.add(name));
      waiting.add(t);
    }

    release(slot(first));
    for (Ticket t : waiting) {
      Slot s = slot(t);
      assertThat(pool.inUse()).isEqualTo(1);
      release(s);
    }

    assertThat(granted).containsExactly("b", "c", "d");
    await().until(() -> pool.inUse() == 0);
    assertThat(pool.queueDepth()).isZero();
  }

  @Test
  void releaseWithNoWaitersFreesTheSlot() throws Exception {
    SlotPool pool = new SlotPool("p", 3, 10, LONG, vertx);
    Slot a = slot(acquire(pool));
    Slot b = slot(acquire(pool));
    assertThat(pool.inUse()).isEqualTo(2);

    release(a);
    release(b);

    assertThat(pool.inUse()).isZero();
    assertThat(slot(acquire(pool))).isNotNull();
  }

  @Test
  void fullQueueRejectsAtOnce() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 2, LONG, vertx);
    acquire(pool);
    acquire(pool);
    acquire(pool);

    Ticket rejected = acquire(pool);

    assertThat(rejected.future().failed()).isTrue();
    ProxyFailure f = failure(rejected.future());
    assertThat(f.kind()).isEqualTo(ProxyFailure.Kind.QUEUE_FULL);
    assertThat(f.retryAfterSeconds()).isEqualTo(1);
    assertThat(f.getMessage()).contains("'p'");
    assertThat(rejected.depthAtEntry()).isEqualTo(2);
    assertThat(pool.queueDepth()).isEqualTo(2);
    assertThat(pool.inUse()).isEqualTo(1);
    rejected.cancel(); // nothing to give back
    assertThat(pool.inUse()).isEqualTo(1);
  }

  @Test
  void zeroQueueRejectsAsSoonAsSlotsRunOut() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 0, LONG, vertx);
    acquire(pool);

    assertThat(failure(acquire(pool).future()).kind()).isEqualTo(ProxyFailure.Kind.QUEUE_FULL);
  }

  @Test
  void waitTimesOutAndLeavesTheQueue() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, Duration.ofMillis(20), vertx);
    Slot held = slot(acquire(pool));

    Ticket waiting = acquire(pool);

    ProxyFailure f = failure(waiting.future());
    assertThat(f.kind()).isEqualTo(ProxyFailure.Kind.QUEUE_TIMEOUT);
    assertThat(f.getMessage()).contains("'p'");
    assertThat(pool.queueDepth()).isZero();
    release(held);
    assertThat(pool.inUse()).isZero();
  }

  @Test
  void cancelLeavesTheQueue() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Slot held = slot(acquire(pool));
    Ticket waiting = acquire(pool);
    Ticket behind = acquire(pool);

    on(
        context,
        () -> {
          waiting.cancel();
          return null;
        });

    assertThat(failure(waiting.future()).kind()).isEqualTo(ProxyFailure.Kind.CLIENT_CANCELLED);
    assertThat(pool.queueDepth()).isEqualTo(1);
    release(held);
    release(slot(behind));
    assertThat(pool.inUse()).isZero();
    assertThat(pool.queueDepth()).isZero();
  }

  @Test
  void cancelOfAGrantedTicketReleasesItsSlot() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Ticket t = acquire(pool);

    t.cancel();
    t.cancel();

    assertThat(pool.inUse()).isZero();
  }

  @Test
  void cancelJustAfterTheGrantGivesTheSlotBack() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Slot held = slot(acquire(pool));
    Ticket waiting = acquire(pool);

    // The grant is queued onto the waiter's context; the cancel runs before it lands.
    on(
        context,
        () -> {
          held.release();
          waiting.cancel();
          return null;
        });

    await().until(() -> pool.inUse() == 0);
    assertThat(pool.queueDepth()).isZero();
    assertThat(slot(acquire(pool))).isNotNull();
  }

  @Test
  void cancelRacingAGrantFromAnotherEventLoopNeverLeaksASlot() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Context other = vertx.getOrCreateContext();
    for (int i = 0; i < 300; i++) {
      Slot held = on(other, () -> pool.acquire().future().result());
      Ticket waiting = acquire(pool);

      other.runOnContext(v -> held.release());
      context.runOnContext(v -> waiting.cancel());

      await()
          .pollDelay(Duration.ZERO)
          .pollInterval(Duration.ofMillis(1))
          .until(() -> pool.inUse() == 0 && pool.queueDepth() == 0);
    }
  }

  @Test
  void releaseIsIdempotent() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Slot first = slot(acquire(pool));
    Ticket second = acquire(pool);
    Ticket third = acquire(pool);

    release(first);
    release(first);

    Slot s = slot(second);
    assertThat(pool.inUse()).isEqualTo(1);
    assertThat(third.future().isComplete()).isFalse();
    assertThat(pool.queueDepth()).isEqualTo(1);

    release(s);
    Slot last = slot(third);
    release(last);
    release(last);
    release(s);
    assertThat(pool.inUse()).isZero();
    assertThat(pool.queueDepth()).isZero();
  }

  @Test
  void aThousandWaitFifoAndTheNextIsRejected() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 1000, LONG, vertx);
    Slot held = slot(acquire(pool));
    List<Integer> order = new CopyOnWriteArrayList<>();
    List<Ticket> tickets =
        on(
            context,
            () -> {
              List<Ticket> all = new ArrayList<>();
              for (int i = 0; i < 1000; i++) {
                int n = i;
                Ticket t = pool.acquire();
                t.future()
                    .onSuccess(
                        s -> {
                          order.add(n);
                          s.release();
                        });
                all.add(t);
              }
              return all;
            });
    assertThat(pool.queueDepth()).isEqualTo(1000);
    assertThat(tickets.get(999).depthAtEntry()).isEqualTo(999);

    Ticket rejected = acquire(pool);

    ProxyFailure f = failure(rejected.future());
    assertThat(f.kind()).isEqualTo(ProxyFailure.Kind.QUEUE_FULL);
    assertThat(rejected.depthAtEntry()).isEqualTo(1000);

    release(held);
    await().until(() -> order.size() == 1000);
    assertThat(order).isSorted().doesNotHaveDuplicates();
    await().until(() -> pool.inUse() == 0);
    assertThat(pool.queueDepth()).isZero();
  }

  /** Queues {@code names} at {@code priority}, recording the grant order into {@code granted}. */
  private List<Ticket> enqueue(
      SlotPool pool, Priority priority, List<String> granted, String... names) throws Exception {
    List<Ticket> out = new ArrayList<>();
    for (String name : names) {
      Ticket t = on(context, () -> pool.acquire(priority));
      t.future().onSuccess(s -> granted.add(name));
      out.add(t);
    }
    return out;
  }

  /** Releases the held slot, then each granted slot in turn, until {@code n} grants happened. */
  private void drain(Slot held, List<Ticket> tickets, List<String> granted, int n)
      throws Exception {
    release(held);
    for (int i = 0; i < n; i++) {
      int before = i;
      await().atMost(Duration.ofSeconds(10)).until(() -> granted.size() > before);
      String name = granted.get(i);
      Ticket t =
          tickets.stream()
              .filter(x -> x.future().succeeded() && !released.contains(x))
              .findFirst()
              .orElseThrow();
      released.add(t);
      release(t.future().result());
      assertThat(name).isNotNull();
    }
  }

  private final List<Ticket> released = new ArrayList<>();

  @Test
  void higherPriorityIsServedFirstAndFifoWithinAPriority() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 100, LONG, 16, vertx);
    Slot held = slot(acquire(pool));
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> all = new ArrayList<>();
    all.addAll(enqueue(pool, Priority.LOW, granted, "low1", "low2"));
    all.addAll(enqueue(pool, Priority.NORMAL, granted, "normal1"));
    all.addAll(enqueue(pool, Priority.HIGH, granted, "high1", "high2"));
    assertThat(pool.queueDepth(Priority.HIGH)).isEqualTo(2);
    assertThat(pool.queueDepth(Priority.LOW)).isEqualTo(2);
    assertThat(pool.queueDepth()).isEqualTo(5);

    drain(held, all, granted, 5);

    assertThat(granted).containsExactly("high1", "high2", "normal1", "low1", "low2");
    await().until(() -> pool.inUse() == 0);
    assertThat(pool.queueDepth()).isZero();
  }

  @Test
  void aWaiterIsOvertakenAtMostMaxOvertakesTimes() throws Exception {
    // One low waiter, then a steady stream of high arrivals: with a bound of 3, the low one is
    // served after exactly three high ones overtook it, whatever keeps arriving.
    SlotPool pool = new SlotPool("p", 1, 100, LONG, 3, vertx);
    Slot held = slot(acquire(pool));
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> all = new ArrayList<>();
    all.addAll(enqueue(pool, Priority.LOW, granted, "low"));
    all.addAll(enqueue(pool, Priority.HIGH, granted, "h1", "h2", "h3", "h4", "h5", "h6"));

    drain(held, all, granted, 7);

    assertThat(granted).containsExactly("h1", "h2", "h3", "low", "h4", "h5", "h6");
  }

  @Test
  void zeroOvertakesIsPlainFifo() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 100, LONG, 0, vertx);
    Slot held = slot(acquire(pool));
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> all = new ArrayList<>();
    all.addAll(enqueue(pool, Priority.LOW, granted, "low1"));
    all.addAll(enqueue(pool, Priority.HIGH, granted, "high1"));
    all.addAll(enqueue(pool, Priority.NORMAL, granted, "normal1"));
    all.addAll(enqueue(pool, Priority.LOW, granted, "low2"));

    drain(held, all, granted, 4);

    assertThat(granted).containsExactly("low1", "high1", "normal1", "low2");
  }

  @Test
  void aCancelledPriorityWaiterLeavesItsQueue() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 100, LONG, 16, vertx);
    Slot held = slot(acquire(pool));
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> high = enqueue(pool, Priority.HIGH, granted, "gone");
    List<Ticket> low = enqueue(pool, Priority.LOW, granted, "stays");
    on(
        context,
        () -> {
          high.get(0).cancel();
          return null;
        });
    assertThat(failure(high.get(0).future()).kind()).isEqualTo(ProxyFailure.Kind.CLIENT_CANCELLED);
    assertThat(pool.queueDepth()).isEqualTo(1);
    assertThat(pool.queueDepth(Priority.HIGH)).isZero();

    drain(held, low, granted, 1);

    assertThat(granted).containsExactly("stays");
    await().until(() -> pool.inUse() == 0);
  }
}
