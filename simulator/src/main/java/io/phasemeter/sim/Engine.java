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
 */
final class Engine {
  private static final Logger LOG = LoggerFactory.getLogger(Engine.class);

  private final Vertx vertx;
  private final int slots;
  private final int maxQueue;
  private final CostModel cost;
  private final LongSupplier clock;
  private final VllmMetrics metrics;
  private final EngineTracer tracer;

  private final ArrayDeque<Sequence> waiting = new ArrayDeque<>();
  private final Set<Sequence> running = new LinkedHashSet<>();

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
    this.tracer = tracer;
    this.vertx = vertx;
    this.slots = config.slots();
    this.maxQueue = config.maxQueue();
    this.cost = cost;
    this.clock = clock;
    this.metrics = metrics;
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
    s.dueNanos = now + cost.prefillNanos(s.request.promptTokens()) + s.holdNanos;
    arm(s, now);
  }

  private void release(Sequence s) {
    running.remove(s);
    runningCount.decrementAndGet();
    metrics.running(s.request.model(), -1);
    while (running.size() < slots && !waiting.isEmpty()) {
      Sequence next = waiting.poll();
      waitingCount.decrementAndGet();
      metrics.waiting(next.request.model(), -1);
      start(next);
    }
  }

  private void arm(Sequence s, long now) {
    long epoch = ++s.epoch;
    long delayMs = CostModel.timerDelayMs(now, s.dueNanos);
    if (delayMs == 0) {
      vertx.runOnContext(v -> fire(s, epoch));
    } else {
      s.timerId = vertx.setTimer(delayMs, id -> fire(s, epoch));
    }
  }

  private void disarm(Sequence s) {
    s.epoch++;
    if (s.timerId >= 0) {
      vertx.cancelTimer(s.timerId);
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
    } else {
      metrics.interToken(model, (now - s.lastTokenNanos) / 1e9);
    }
    s.lastTokenNanos = now;
    if (!pooling) {
      metrics.generated(model);
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
