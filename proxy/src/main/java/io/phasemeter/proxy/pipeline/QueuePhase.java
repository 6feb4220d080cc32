package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.phasemeter.core.SpanAttributes;
import io.vertx.core.Future;
import io.vertx.core.Promise;

/**
 * Phase {@code queue}: waits for one of the pool's slots. Ends when the slot is granted or refused
 * ({@code llm.queue.outcome}: acquired, timeout, rejected, cancelled); a client that leaves while
 * waiting leaves the queue at once.
 */
final class QueuePhase {
  /**
   * Waits for a slot of {@code slots}; {@code span} is the phase's, opened by the pipeline, which
   * ends it when this completes.
   */
  Future<Void> acquire(RequestContext ctx, SlotPool slots, Span span) {
    span.setAttribute(SpanAttributes.MODEL, ctx.modelLabel());
    span.setAttribute(SpanAttributes.POOL, ctx.poolName());
    span.setAttribute(SpanAttributes.PRIORITY, ctx.priority().label());
    SlotPool.Ticket ticket = slots.acquire(ctx.priority());
    span.setAttribute(SpanAttributes.QUEUE_DEPTH_AT_ENTRY, (long) ticket.depthAtEntry());
    ctx.onCancel(ticket::cancel);
    Promise<Void> done = Promise.promise();
    ticket
        .future()
        .onComplete(
            ar -> {
              if (ar.succeeded()) {
                if (ctx.isFinished() || ctx.isCancelled()) {
                  ar.result().release();
                  span.setAttribute(SpanAttributes.QUEUE_OUTCOME, "cancelled");
                  done.tryFail(
                      ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."));
                  return;
                }
                ctx.granted(ar.result());
                span.setAttribute(SpanAttributes.QUEUE_OUTCOME, "acquired");
                done.complete();
              } else {
                ProxyFailure f = ErrorResponder.classify(ar.cause());
                span.setAttribute(SpanAttributes.QUEUE_OUTCOME, queueOutcome(f.kind()));
                done.fail(f);
              }
            });
    return done.future();
  }

  private static String queueOutcome(ProxyFailure.Kind kind) {
    return switch (kind) {
      case QUEUE_TIMEOUT -> "timeout";
      case QUEUE_FULL, NO_HEALTHY_UPSTREAM -> "rejected";
      default -> "cancelled";
    };
  }
}
