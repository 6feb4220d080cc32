package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.phasemeter.core.SpanAttributes;
import io.vertx.core.Future;
import java.util.EnumSet;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The one place a phase is timed. {@link Pipeline} walks the phases down through {@link #timed},
 * which opens a phase's span, runs the phase and ends the span when the phase's future completes,
 * as vertx-http-proxy's ReverseProxy walks its interceptor chain down and back up; a phase does its
 * work and records its result on the {@link RequestContext}, and never opens or closes a span.
 *
 * <p>Where a phase ends on each path:
 *
 * <ul>
 *   <li>success: when its future completes; generation at the instant it marked on its {@link
 *       PhaseTimer} (the upstream's last byte), see {@link #timedToMark};
 *   <li>failure of auth, receive, prepare or route ({@link #INTERRUPTIBLE}), or any unexpected
 *       exception: left open for {@link #interrupted}, which marks it with the request's error type
 *       once the {@link Verdict} is known, and ends it;
 *   <li>failure of queue, generation or write: when its future fails; those phases record how they
 *       ended themselves ({@code llm.queue.outcome}, generation's {@code error.type}; a write fails
 *       only by the client's doing, which the root says);
 *   <li>the error answer: {@link #answer} times it as write, continuing an open write span.
 * </ul>
 *
 * A cancellation is a failure like any other (the phase's future fails), so it ends the same way.
 * {@link RequestContext#finish} closes whatever is still open at the root's end.
 */
final class PhaseChain {
  /** Phases a failure interrupts: see the class comment. */
  static final Set<Phase> INTERRUPTIBLE =
      EnumSet.of(Phase.AUTH, Phase.RECEIVE, Phase.PREPARE, Phase.ROUTE);

  private PhaseChain() {}

  /** Runs {@code work} as {@code phase}, from now. */
  static <T> Future<T> timed(RequestContext ctx, Phase phase, Function<Span, Future<T>> work) {
    return timed(ctx, phase, ctx.now(), work);
  }

  /** Runs {@code work} as {@code phase}: its span opens at {@code start}, and ends with it. */
  static <T> Future<T> timed(
      RequestContext ctx, Phase phase, long start, Function<Span, Future<T>> work) {
    Span span = ctx.begin(phase, start);
    return ended(ctx, phase, null, run(work, span));
  }

  /**
   * Runs {@code work} as {@code phase}, from now, handing it a {@link PhaseTimer}: on success the
   * phase ends where the work marked it (when it marked nothing, as it completes).
   */
  static <T> Future<T> timedToMark(
      RequestContext ctx, Phase phase, Function<PhaseTimer, Future<T>> work) {
    PhaseTimer timer = new PhaseTimer(ctx.begin(phase));
    return ended(ctx, phase, timer, run(work, timer));
  }

  /** A phase that does its work before it returns, and fails by throwing. */
  static Future<Void> done(Runnable work) {
    work.run();
    return Future.succeededFuture();
  }

  /**
   * Marks the phases a failure interrupted (open ones, but write, which the answer continues) with
   * the verdict's error type, and an error status when it is not the client's doing; ends them now.
   */
  static void interrupted(RequestContext ctx, Verdict verdict) {
    long now = ctx.now();
    for (Phase p : Phase.all()) {
      if (p != Phase.WRITE && ctx.isOpen(p)) {
        Span s = ctx.phaseSpan(p);
        s.setAttribute(SpanAttributes.ERROR_TYPE, verdict.errorType());
        if (verdict.marksError()) {
          s.setStatus(StatusCode.ERROR);
        }
        ctx.end(p, now);
      }
    }
  }

  /** Times the error answer {@code write} as phase write (continuing its span if open). */
  static Future<Void> answer(RequestContext ctx, Supplier<Future<Void>> write) {
    if (!ctx.isOpen(Phase.WRITE)) {
      ctx.begin(Phase.WRITE);
    }
    return write.get().onComplete(ar -> ctx.end(Phase.WRITE));
  }

  private static <T> Future<T> ended(
      RequestContext ctx, Phase phase, PhaseTimer timer, Future<T> result) {
    // Registered before anything the caller chains on: the phase has ended before the next begins.
    return result.onComplete(
        ar -> {
          if (ar.succeeded()
              || (!INTERRUPTIBLE.contains(phase) && ar.cause() instanceof ProxyFailure)) {
            long now = ctx.now();
            ctx.end(phase, timer == null ? now : timer.endOr(now));
          }
        });
  }

  private static <A, T> Future<T> run(Function<A, Future<T>> work, A arg) {
    try {
      return work.apply(arg);
    } catch (RuntimeException e) {
      return Future.failedFuture(e);
    }
  }
}
