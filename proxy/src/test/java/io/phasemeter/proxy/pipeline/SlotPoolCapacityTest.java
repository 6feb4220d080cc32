package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
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

/**
 * A pool's capacity following its available upstreams: a shrink revokes no granted slot and grants
 * none until in use is below it, a growth grants waiters at once, and none at all refuses waiters
 * and newcomers as a pool with no available upstream does.
 */
class SlotPoolCapacityTest {
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

  private <T> T on(Callable<T> action) throws Exception {
    CompletableFuture<T> result = new CompletableFuture<>();
    context.runOnContext(
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
    return on(pool::acquire);
  }

  private void release(Slot s) throws Exception {
    on(
        () -> {
          s.release();
          return null;
        });
  }

  private static Slot slot(Ticket t) throws Exception {
    return t.future().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  private static ProxyFailure failure(Future<?> f) {
    await().atMost(Duration.ofSeconds(10)).until(f::isComplete);
    assertThat(f.failed()).as("future failed").isTrue();
    return (ProxyFailure) f.cause();
  }

  private List<Slot> fill(SlotPool pool, int n) throws Exception {
    List<Slot> held = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      held.add(slot(acquire(pool)));
    }
    return held;
  }

  @Test
  void aShrinkRevokesNoGrantedSlotAndGrantsNoneUntilInUseIsBelowIt() throws Exception {
    SlotPool pool = new SlotPool("p", 4, 10, LONG, vertx);
    List<Slot> held = fill(pool, 4);
    Ticket waiter = acquire(pool);

    pool.capacity(2);

    assertThat(pool.capacity()).isEqualTo(2);
    assertThat(pool.configured()).isEqualTo(4);
    assertThat(pool.inUse()).as("nothing taken back").isEqualTo(4);
    release(held.get(0));
    assertThat(pool.inUse()).isEqualTo(3);
    release(held.get(1));
    assertThat(pool.inUse()).isEqualTo(2);
    assertThat(waiter.future().isComplete()).as("in use is not below 2 yet").isFalse();
    assertThat(pool.queueDepth()).isEqualTo(1);

    release(held.get(2)); // In use would be 1: the slot goes to the waiter.

    assertThat(slot(waiter)).isNotNull();
    assertThat(pool.inUse()).isEqualTo(2);
    assertThat(pool.queueDepth()).isZero();
    assertThat(acquire(pool).future().isComplete()).as("2 of 2 in use: a newcomer waits").isFalse();
  }

  @Test
  void aGrowthGrantsWaitersAtOnceInTheirOrder() throws Exception {
    SlotPool pool = new SlotPool("p", 4, 10, LONG, vertx);
    pool.capacity(2);
    fill(pool, 2);
    List<String> granted = new CopyOnWriteArrayList<>();
    List<Ticket> waiting = new ArrayList<>();
    for (String name : List.of("a", "b", "c")) {
      Ticket t = acquire(pool);
      t.future().onSuccess(s -> granted.add(name));
      waiting.add(t);
    }
    assertThat(pool.queueDepth()).isEqualTo(3);

    pool.capacity(4);

    await().atMost(Duration.ofSeconds(10)).until(() -> granted.size() == 2);
    assertThat(granted).containsExactly("a", "b");
    assertThat(pool.inUse()).isEqualTo(4);
    assertThat(pool.queueDepth()).isEqualTo(1);
    assertThat(waiting.get(2).future().isComplete()).isFalse();
  }

  @Test
  void noCapacityRefusesNewcomersAndKeepsWaitersUntilItComesBack() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, LONG, vertx);
    Slot held = slot(acquire(pool));
    Ticket w1 = acquire(pool);
    Ticket w2 = acquire(pool);

    pool.capacity(0);

    ProxyFailure newcomer = failure(acquire(pool).future());
    assertThat(newcomer.kind()).isEqualTo(ProxyFailure.Kind.NO_HEALTHY_UPSTREAM);
    assertThat(newcomer.kind().status()).isEqualTo(503);
    assertThat(newcomer.retryAfterSeconds()).isEqualTo(1);
    assertThat(newcomer.getMessage()).contains("pool 'p'");
    assertThat(pool.inUse()).as("the running request keeps its slot").isEqualTo(1);
    release(held);
    assertThat(pool.inUse()).as("a freed slot is not handed on at capacity 0").isZero();
    assertThat(pool.queueDepth()).as("waiters stay, bounded by their timeout").isEqualTo(2);
    assertThat(w1.future().isComplete()).isFalse();

    pool.capacity(1); // e.g. a half-open upstream's probe slot

    assertThat(slot(w1)).isNotNull();
    assertThat(w2.future().isComplete()).isFalse();
    assertThat(pool.queueDepth()).isEqualTo(1);
  }

  @Test
  void aWaiterAtNoCapacityEndsAtTheQueuesTimeout() throws Exception {
    SlotPool pool = new SlotPool("p", 1, 10, Duration.ofMillis(200), vertx);
    Slot held = slot(acquire(pool));
    Ticket waiter = acquire(pool);

    pool.capacity(0);
    release(held);

    assertThat(failure(waiter.future()).kind()).isEqualTo(ProxyFailure.Kind.QUEUE_TIMEOUT);
    assertThat(pool.queueDepth()).isZero();
    assertThat(pool.inUse()).isZero();
  }

  @Test
  void waitersAfterAShrinkAreStillBoundedByTheQueuesTimeoutAndSize() throws Exception {
    SlotPool pool = new SlotPool("p", 2, 1, Duration.ofMillis(50), vertx);
    fill(pool, 2);
    pool.capacity(1);

    Ticket waiter = acquire(pool);
    Ticket overflow = acquire(pool);

    assertThat(failure(overflow.future()).kind()).isEqualTo(ProxyFailure.Kind.QUEUE_FULL);
    assertThat(failure(waiter.future()).kind()).isEqualTo(ProxyFailure.Kind.QUEUE_TIMEOUT);
    assertThat(pool.queueDepth()).isZero();
    assertThat(pool.inUse()).isEqualTo(2);
  }

  @Test
  void aWaiterThatLeavesAfterAShrinkLeavesTheQueue() throws Exception {
    SlotPool pool = new SlotPool("p", 2, 10, LONG, vertx);
    List<Slot> held = fill(pool, 2);
    pool.capacity(1);
    Ticket leaving = acquire(pool);
    Ticket staying = acquire(pool);

    on(
        () -> {
          leaving.cancel();
          return null;
        });
    release(held.get(0));
    release(held.get(1));

    assertThat(failure(leaving.future()).kind()).isEqualTo(ProxyFailure.Kind.CLIENT_CANCELLED);
    assertThat(slot(staying)).isNotNull();
    assertThat(pool.inUse()).isEqualTo(1);
  }

  @Test
  void theGaugesSayTheCapacityNowAndTheConfiguredSlots() {
    SlotPool pool = new SlotPool("p", 8, 10, LONG, vertx);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    pool.bindTo(registry);

    pool.capacity(3);

    assertThat(registry.get("llm.slots.capacity").tag("llm.pool", "p").gauge().value())
        .isEqualTo(3.0);
    assertThat(registry.get("llm.slots.configured").tag("llm.pool", "p").gauge().value())
        .isEqualTo(8.0);
    assertThat(registry.get("llm.slots.capacity").gauge().getId().getDescription())
        .isEqualTo("Slots of the pool's available upstreams");
  }
}
