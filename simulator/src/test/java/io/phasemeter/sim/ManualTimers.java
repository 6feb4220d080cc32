package io.phasemeter.sim;

import java.util.Comparator;
import java.util.HashSet;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * The engine's timers on a manual clock: nothing runs until a test advances the time, then every
 * task due by then runs in due order (ties in the order they were set), with the clock at its due
 * time. A timer of {@code d} ms fires exactly {@code d} ms after it was set.
 */
final class ManualTimers implements Engine.Timers {
  private record Task(long dueNanos, long id, Runnable run) {}

  private final PriorityQueue<Task> queue =
      new PriorityQueue<>(Comparator.comparingLong(Task::dueNanos).thenComparingLong(Task::id));
  private final Set<Long> cancelled = new HashSet<>();
  private long now;
  private long ids;

  /** The engine's clock. */
  LongSupplier clock() {
    return () -> now;
  }

  long now() {
    return now;
  }

  @Override
  public long set(long delayMs, Runnable task) {
    if (delayMs < 1) {
      throw new IllegalArgumentException("Vert.x timers take at least 1 ms, got " + delayMs);
    }
    long id = ++ids;
    queue.add(new Task(now + delayMs * 1_000_000, id, task));
    return id;
  }

  @Override
  public void cancel(long id) {
    cancelled.add(id);
  }

  @Override
  public void runSoon(Runnable task) {
    queue.add(new Task(now, ++ids, task));
  }

  /** Runs every task due by {@code t}, then leaves the clock at {@code t}. */
  void advanceTo(long t) {
    while (!queue.isEmpty() && queue.peek().dueNanos() <= t) {
      Task task = queue.poll();
      if (cancelled.remove(task.id())) {
        continue;
      }
      now = Math.max(now, task.dueNanos());
      task.run().run();
    }
    now = Math.max(now, t);
  }

  /**
   * A busy event loop: the clock jumps to {@code t} first, then every task due by then runs, late,
   * with the clock at {@code t}.
   */
  void lateTo(long t) {
    now = Math.max(now, t);
    advanceTo(t);
  }

  void advanceToMs(double ms) {
    advanceTo(Math.round(ms * 1e6));
  }

  /** Runs until no task is left; the clock stays at the last one's time. */
  void drain() {
    while (!queue.isEmpty()) {
      advanceTo(queue.peek().dueNanos());
    }
  }

  /** Tasks set and neither run nor cancelled. */
  long live() {
    return queue.stream().filter(t -> !cancelled.contains(t.id())).count();
  }
}
