package io.phasemeter.proxy;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * What was built, in the order it was built, closed in reverse: the last thing built, which may use
 * the ones before it, is closed first. Each step runs when the one before it has finished, whether
 * it succeeded, failed or threw; {@link #close()} fails with the first failure, the others attached
 * as suppressed, once every step has run. Closing twice runs nothing the second time.
 */
final class CloseList {
  /** One close step, named for the failure it may report. */
  private record Step(String name, Supplier<Future<?>> close) {}

  private final Deque<Step> steps = new ArrayDeque<>();

  /** Adds a step that closes at once. */
  synchronized void add(String name, Runnable close) {
    Objects.requireNonNull(close);
    addAsync(
        name,
        () -> {
          close.run();
          return Future.succeededFuture();
        });
  }

  /** Adds a step that has closed when its future completes. */
  synchronized void addAsync(String name, Supplier<Future<?>> close) {
    steps.push(new Step(Objects.requireNonNull(name), Objects.requireNonNull(close)));
  }

  /** The names of the steps still to run, in the order {@link #close()} runs them. */
  synchronized java.util.List<String> names() {
    return steps.stream().map(Step::name).toList();
  }

  /** Runs every step, last added first. */
  Future<Void> close() {
    Promise<Void> done = Promise.promise();
    next(done, null);
    return done.future();
  }

  private void next(Promise<Void> done, Throwable failure) {
    Step step;
    synchronized (this) {
      step = steps.poll();
    }
    if (step == null) {
      if (failure == null) {
        done.complete();
      } else {
        done.fail(failure);
      }
      return;
    }
    Future<?> closed;
    try {
      closed = Objects.requireNonNull(step.close().get(), step.name());
    } catch (RuntimeException e) {
      closed = Future.failedFuture(e);
    }
    closed.onComplete(
        ar -> next(done, ar.succeeded() ? failure : merge(failure, step.name(), ar.cause())));
  }

  private static Throwable merge(Throwable first, String step, Throwable cause) {
    Throwable named = new IllegalStateException("closing " + step + " failed: " + cause, cause);
    if (first == null) {
      return named;
    }
    first.addSuppressed(named);
    return first;
  }
}
