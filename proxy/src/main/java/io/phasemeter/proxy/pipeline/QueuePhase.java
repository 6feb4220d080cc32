package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.vertx.core.Future;
import io.vertx.core.Promise;

/**
 * Phase {@code queue}: waits for one of the pool's slots. Ends when the slot is granted or refused
 * ({@code llm.queue.outcome}: acquired, timeout, rejected, cancelled); a client that leaves while
 * waiting leaves the queue at once.
 */
final class QueuePhase {
  private static final AttributeKey<String> MODEL = AttributeKey.stringKey("llm.model");
  private static final AttributeKey<String> POOL = AttributeKey.stringKey("llm.pool");
  private static final AttributeKey<String> PRIORITY = AttributeKey.stringKey("llm.priority");
  private static final AttributeKey<Long> DEPTH_AT_ENTRY =
      AttributeKey.longKey("llm.queue.depth_at_entry");
  private static final AttributeKey<String> QUEUE_OUTCOME =
      AttributeKey.stringKey("llm.queue.outcome");

  Future<Void> acquire(RequestContext ctx, SlotPool slots) {
    Span span = ctx.begin(Phase.QUEUE);
    span.setAttribute(MODEL, ctx.modelLabel);
    span.setAttribute(POOL, ctx.pool.name());
    span.setAttribute(PRIORITY, ctx.priority.label());
    SlotPool.Ticket ticket = slots.acquire(ctx.priority);
    span.setAttribute(DEPTH_AT_ENTRY, (long) ticket.depthAtEntry());
    ctx.onCancel(ticket::cancel);
    Promise<Void> done = Promise.promise();
    ticket
        .future()
        .onComplete(
            ar -> {
              if (ar.succeeded()) {
                if (ctx.isFinished() || ctx.isCancelled()) {
                  ar.result().release();
                  span.setAttribute(QUEUE_OUTCOME, "cancelled");
                  ctx.end(Phase.QUEUE);
                  done.tryFail(
                      ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."));
                  return;
                }
                ctx.slot = ar.result();
                span.setAttribute(QUEUE_OUTCOME, "acquired");
                ctx.end(Phase.QUEUE);
                done.complete();
              } else {
                ProxyFailure f = ErrorResponder.classify(ar.cause());
                span.setAttribute(QUEUE_OUTCOME, queueOutcome(f.kind()));
                ctx.end(Phase.QUEUE);
                done.fail(f);
              }
            });
    return done.future();
  }

  private static String queueOutcome(ProxyFailure.Kind kind) {
    return switch (kind) {
      case QUEUE_TIMEOUT -> "timeout";
      case QUEUE_FULL -> "rejected";
      default -> "cancelled";
    };
  }
}
