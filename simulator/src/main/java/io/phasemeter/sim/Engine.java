package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.phasemeter.sim.Sequence.State;
import io.vertx.core.Vertx;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Continuous batching: at most {@code slots} sequences run, the rest wait in FIFO order. A running
 * sequence spends its prefill time (plus any requested hold), emits its first token, then one token
 * per decode step, whose cost grows with the number of running sequences. A pooling sequence
 * (embeddings) holds its slot for the prefill alone and ends in one step. Every method runs on the
 * simulator's context; only the counters are read from other threads.
 *
 * <p>How decode steps are timed is {@code --step-clock}. {@code per-sequence}: each sequence has
 * its own timer, its first token when its prefill ends and then one token per step from there, so
 * sequences started apart stay apart. {@code shared}: one step clock for the batch, as vLLM's
 * engine loop. The clock starts when the first sequence of an idle engine ends its prefill (a step
 * boundary, where it emits its first token); from there a boundary comes every decode step, its
 * length from the running batch at the boundary before. At each boundary every running sequence
 * whose prefill (and hold, or stall) has ended emits its next token, all in the same event-loop
 * turn; a sequence whose prefill ends mid-step emits its first token at the next boundary, so its
 * TTFT rounds up to a boundary. The clock stops when no sequence on it is running. Sequences with
 * an {@code x-sim-decode-step-ms} override and pooling sequences keep their own timers (they still
 * count in the batch size that sets the step).
 *
 * <p>The prefix cache ({@link PrefixCache}): when a generation sequence starts, its prompt's
 * leading blocks that the cache holds are its hit, and only the rest is prefilled; its blocks enter
 * the cache at its first token. Pooling sequences neither look up nor fill it.
 */
final class Engine {
  private static final Logger LOG = LoggerFactory.getLogger(Engine.class);

  /** The engine's timers: Vert.x's on the simulator's context; a test drives a manual one. */
  interface Timers {
    /** Runs {@code task} once, {@code delayMs} (at least 1) from now; an id for {@link #cancel}. */
    long set(long delayMs, Runnable task);

    void cancel(long id);

    /** Runs {@code task} in a later turn of the same context. */
    void runSoon(Runnable task);

    static Timers of(Vertx vertx) {
      return new Timers() {
        @Override
        public long set(long delayMs, Runnable task) {
          return vertx.setTimer(delayMs, id -> task.run());
        }

        @Override
        public void cancel(long id) {
          vertx.cancelTimer(id);
        }

        @Override
        public void runSoon(Runnable task) {
          vertx.runOnContext(v -> task.run());
        }
      };
    }
  }

  private final Timers timers;
  private final int slots;
  private final int maxQueue;
  private final CostModel cost;
  private final LongSupplier clock;
  private final VllmMetrics metrics;
  private final EngineTracer tracer;
  private final PrefixCache prefixCache;

  private final ArrayDeque<Sequence> waiting = new ArrayDeque<>();
  private final Set<Sequence> running = new LinkedHashSet<>();

  // The shared step clock (--step-clock shared); all unused with per-sequence clocks.
  private final boolean sharedClock;

  /** The running sequences on the shared clock, in admission order. */
  private final Set<Sequence> batch = new LinkedHashSet<>();

  /** A boundary happened and the batch has not emptied since: boundaries come every step. */
  private boolean ticking;

  /** Inside {@link #step}: starts and releases leave the step timer to it. */
  private boolean inStep;

  /** The next boundary; while not {@link #ticking}, the pending start of the clock. */
  private long nextStepNanos;

  private long stepTimerId = -1;
  private long stepEpoch;

  // KV-cache blocks held by the running sequences, of kvCapacityBlocks (vllm:kv_cache_usage_perc).
  private final int kvCapacityBlocks;
  private long kvBlocksUsed;

  private final AtomicInteger runningCount = new AtomicInteger();
  private final AtomicInteger waitingCount = new AtomicInteger();
  private final AtomicLong completed = new AtomicLong();
  private final AtomicLong cancelled = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicLong received = new AtomicLong();

  Engine(
      Vertx vertx,
      SimulatorConfig config,
      CostModel cost,
      LongSupplier clock,
      VllmMetrics metrics,
      EngineTracer tracer) {
    this(Timers.of(vertx), config, cost, clock, metrics, tracer);
  }

  Engine(
      Timers timers,
      SimulatorConfig config,
      CostModel cost,
      LongSupplier clock,
      VllmMetrics metrics,
      EngineTracer tracer) {
    this.tracer = tracer;
    this.timers = timers;
    this.sharedClock = config.stepClock() == SimulatorConfig.StepClock.SHARED;
    this.slots = config.slots();
    this.kvCapacityBlocks = Math.max(1, config.kvCacheBlocks());
    this.maxQueue = config.maxQueue();
    this.cost = cost;
    this.clock = clock;
    this.metrics = metrics;
    this.prefixCache = new PrefixCache(config.prefixCacheBlocks());
  }

  SimulatorStats stats() {
    return new SimulatorStats(
        runningCount.get(),
        waitingCount.get(),
        completed.get(),
        cancelled.get(),
        failed.get(),
        received.get());
  }

  void countReceived() {
    received.incrementAndGet();
  }

  /** A request that ended in an error before (or instead of) reaching the engine. */
  void countFailed() {
    failed.incrementAndGet();
  }

  /** Runs or queues the sequence; false when the queue is full. */
  boolean admit(Sequence s) {
    s.arrivalNanos = clock.getAsLong();
    if (running.size() < slots) {
      start(s);
      return true;
    }
    if (waiting.size() >= maxQueue) {
      return false;
    }
    s.state = State.WAITING;
    waiting.add(s);
    waitingCount.incrementAndGet();
    metrics.waiting(s.request.model(), 1);
    return true;
  }

  /** The client went away: the sequence leaves the queue or frees its slot at once. */
  void cancel(Sequence s) {
    if (end(s, State.CANCELLED)) {
      cancelled.incrementAndGet();
      metrics.finished(s.request.model(), "abort");
    }
  }

  /** An injected fault ended the sequence. */
  void fail(Sequence s) {
    if (end(s, State.FAILED)) {
      failed.incrementAndGet();
    }
  }

  /** Stops every sequence without counting it; used when the simulator closes. */
  void shutdown() {
    List<Sequence> all = new ArrayList<>(running);
    all.addAll(waiting);
    for (Sequence s : all) {
      end(s, State.CANCELLED);
    }
  }

  private boolean end(Sequence s, State terminal) {
    if (!s.active()) {
      return false;
    }
    State was = s.state;
    s.state = terminal;
    disarm(s);
    if (was == State.WAITING) {
      waiting.remove(s);
      waitingCount.decrementAndGet();
      metrics.waiting(s.request.model(), -1);
    } else {
      release(s);
    }
    return true;
  }

  private void start(Sequence s) {
    long now = clock.getAsLong();
    s.state = State.RUNNING;
    s.startNanos = now;
    running.add(s);
    runningCount.incrementAndGet();
    metrics.running(s.request.model(), 1);
    metrics.queueTime(s.request.model(), (now - s.arrivalNanos) / 1e9);
    holdKv(s, s.request.promptTokens());
    if (s.request.endpoint() != Endpoint.EMBEDDINGS && prefixCache.enabled()) {
      s.cachedTokens = prefixCache.lookup(s.request.blockHashes(), s.request.promptTokens());
      metrics.prefixCache(s.request.model(), s.request.promptTokens(), s.cachedTokens);
    }
    s.dueNanos = now + cost.prefillNanos(s.request.promptTokens() - s.cachedTokens) + s.holdNanos;
    if (sharedClock && s.request.endpoint() != Endpoint.EMBEDDINGS && s.decodeStepOverrideMs < 0) {
      s.onStepClock = true;
      batch.add(s);
      if (!inStep) {
        syncStep(now);
      }
    } else {
      arm(s, now);
    }
  }

  private void release(Sequence s) {
    running.remove(s);
    runningCount.decrementAndGet();
    metrics.running(s.request.model(), -1);
    kvBlocksUsed -= s.kvBlocks;
    s.kvBlocks = 0;
    publishKv();
    if (s.onStepClock) {
      batch.remove(s);
      if (!inStep) {
        syncStep(clock.getAsLong());
      }
    }
    while (running.size() < slots && !waiting.isEmpty()) {
      Sequence next = waiting.poll();
      waitingCount.decrementAndGet();
      metrics.waiting(next.request.model(), -1);
      start(next);
    }
  }

  /**
   * The running sequence {@code s} now holds {@code tokens} of context: as vLLM's paged cache, a
   * block of {@link SimulatorConfig#KV_BLOCK_TOKENS} at a time, given back when it ends. Past the
   * capacity the share stays at 1 (vLLM would preempt; the simulator does not).
   */
  private void holdKv(Sequence s, long tokens) {
    int blocks =
        (int)
            Math.min(
                Integer.MAX_VALUE,
                (tokens + SimulatorConfig.KV_BLOCK_TOKENS - 1) / SimulatorConfig.KV_BLOCK_TOKENS);
    if (blocks > s.kvBlocks) {
      kvBlocksUsed += blocks - s.kvBlocks;
      s.kvBlocks = blocks;
      publishKv();
    }
  }

  private void publishKv() {
    metrics.kvCacheUsage(Math.min(1.0, (double) kvBlocksUsed / kvCapacityBlocks));
  }

  /** The prefix cache, for tests. */
  PrefixCache prefixCache() {
    return prefixCache;
  }

  /** KV-cache blocks the running sequences hold now. */
  long kvBlocksUsed() {
    return kvBlocksUsed;
  }

  private void arm(Sequence s, long now) {
    long epoch = ++s.epoch;
    long delayMs = CostModel.timerDelayMs(now, s.dueNanos);
    if (delayMs == 0) {
      timers.runSoon(() -> fire(s, epoch));
    } else {
      s.timerId = timers.set(delayMs, () -> fire(s, epoch));
    }
  }

  private void disarm(Sequence s) {
    s.epoch++;
    if (s.timerId >= 0) {
      timers.cancel(s.timerId);
      s.timerId = -1;
    }
  }

  private void fire(Sequence s, long epoch) {
    if (epoch != s.epoch || s.state != State.RUNNING) {
      return;
    }
    s.timerId = -1;
    long now = clock.getAsLong();
    while (s.state == State.RUNNING && s.dueNanos <= now) {
      emit(s, now);
      if (s.state != State.RUNNING) {
        return;
      }
      if (!s.stallDone && s.stallAfterTokens >= 0 && s.nextIndex >= s.stallAfterTokens) {
        s.stallDone = true;
        if (s.stallNanos < 0) {
          // A hung engine: the slot stays taken until the client goes away.
          return;
        }
        // Silence is measured from the token actually sent, even when that one was late.
        s.dueNanos = Math.max(s.dueNanos, now) + s.stallNanos;
      }
      s.dueNanos += cost.decodeStepNanos(running.size(), s.decodeStepOverrideMs);
    }
    if (s.state == State.RUNNING) {
      arm(s, now);
    }
  }

  /**
   * Outside a step: stops the shared clock when its batch is empty, and points a clock that has not
   * started yet at the earliest end of a prefill (which may have changed). A ticking clock keeps
   * its boundaries.
   */
  private void syncStep(long now) {
    if (batch.isEmpty()) {
      ticking = false;
      cancelStep();
    } else if (!ticking) {
      armStep(now);
    }
  }

  private void armStep(long now) {
    cancelStep();
    long target = nextStepNanos;
    if (!ticking) {
      target = Long.MAX_VALUE;
      for (Sequence s : batch) {
        target = Math.min(target, s.dueNanos);
      }
      if (target == Long.MAX_VALUE) {
        return;
      }
      nextStepNanos = target;
    }
    long epoch = stepEpoch;
    long delayMs = CostModel.timerDelayMs(now, target);
    if (delayMs == 0) {
      timers.runSoon(() -> step(epoch));
    } else {
      stepTimerId = timers.set(delayMs, () -> step(epoch));
    }
  }

  private void cancelStep() {
    stepEpoch++;
    if (stepTimerId >= 0) {
      timers.cancel(stepTimerId);
      stepTimerId = -1;
    }
  }

  /** The shared clock's timer: every boundary due by now, in order (a late timer catches up). */
  private void step(long epoch) {
    if (epoch != stepEpoch) {
      return;
    }
    stepTimerId = -1;
    long now = clock.getAsLong();
    inStep = true;
    try {
      long t = nextStepNanos;
      while (true) {
        boolean emitted = boundary(t, now);
        if (batch.isEmpty()) {
          ticking = false;
          break;
        }
        if (!ticking && !emitted) {
          break; // the clock's first sequence went away; aimed again below
        }
        ticking = true;
        t += Math.max(1, cost.decodeStepNanos(running.size(), -1));
        nextStepNanos = t;
        if (t > now) {
          break;
        }
      }
    } finally {
      inStep = false;
    }
    if (batch.isEmpty()) {
      cancelStep();
    } else {
      armStep(now);
    }
  }

  /**
   * One step boundary at {@code t}: every sequence of the batch due by then emits a token. True
   * when one did.
   */
  private boolean boundary(long t, long now) {
    boolean emitted = false;
    // A snapshot: a token may end its sequence (and start a waiting one, which joins later).
    for (Sequence s : new ArrayList<>(batch)) {
      if (s.state != State.RUNNING || s.dueNanos > t) {
        continue;
      }
      emitted = true;
      emit(s, now);
      if (s.state != State.RUNNING) {
        continue;
      }
      if (!s.stallDone && s.stallAfterTokens >= 0 && s.nextIndex >= s.stallAfterTokens) {
        s.stallDone = true;
        // Silence from the token actually sent, then back at the next boundary; or hung until
        // the client goes away, its slot taken.
        s.dueNanos = s.stallNanos < 0 ? Long.MAX_VALUE : now + s.stallNanos;
      } else {
        s.dueNanos = t + 1; // the next boundary
      }
    }
    return emitted;
  }

  private void emit(Sequence s, long now) {
    int index = s.nextIndex++;
    boolean last = s.nextIndex >= s.plan.completionTokens();
    String model = s.request.model();
    boolean pooling = s.request.endpoint() == Endpoint.EMBEDDINGS;
    if (pooling) {
      s.firstTokenNanos = now;
      metrics.pooled(model, s.request.promptTokens());
    } else if (index == 0) {
      s.firstTokenNanos = now;
      metrics.firstToken(model, s.request.promptTokens(), (now - s.arrivalNanos) / 1e9);
      prefixCache.insert(s.request.blockHashes()); // its prefill is computed
    } else {
      metrics.interToken(model, (now - s.lastTokenNanos) / 1e9);
    }
    s.lastTokenNanos = now;
    if (!pooling) {
      metrics.generated(model);
      holdKv(s, s.request.promptTokens() + s.nextIndex);
    }
    try {
      s.listener.onToken(index, s.plan.text(index), last ? s.plan.finishReason() : null);
    } catch (RuntimeException e) {
      LOG.warn("Writing a token failed; dropping the sequence", e);
      fail(s);
      return;
    }
    if (last && s.state == State.RUNNING) {
      s.state = State.DONE;
      disarm(s);
      release(s);
      completed.incrementAndGet();
      int n = s.plan.completionTokens();
      metrics.finished(model, s.plan.finishReason());
      metrics.completed(
          model,
          (now - s.arrivalNanos) / 1e9,
          n > 1 ? (s.lastTokenNanos - s.firstTokenNanos) / 1e9 / (n - 1) : -1);
      if (!pooling) {
        tracer.finished(s);
      }
    }
  }
}
