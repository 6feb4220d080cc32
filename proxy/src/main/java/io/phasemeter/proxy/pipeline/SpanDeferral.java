package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;

/**
 * Lets a request keep its phase spans as {@link DeferredSpan}s of its own until the root ends, and
 * turn them into SDK spans only when the request's trace is exported (docs/design.md §3: everything
 * is recorded, what is exported is decided when the root ends). A request that is not exported then
 * never builds the SDK's span objects for its phases; the root stays an SDK span, since the export
 * decision is made on it.
 *
 * <p>Needs an SDK whose span ids can be chosen ({@link #start}), so that the ids a deferred span
 * handed out earlier (the upstream {@code traceparent}, exemplars) are the ids it is exported with.
 */
public interface SpanDeferral {
  /**
   * Whether a finished request with these facts is exported; must give the same answer the span
   * processor will give when the root ends.
   *
   * @param failed the request's outcome is not success
   * @param rootNanos the root span's duration, as the SDK will compute it from its timestamps
   * @param traceId the request's trace id
   */
  boolean exports(boolean failed, long rootNanos, String traceId);

  /** Starts {@code builder}'s span with {@code spanId} (16 lowercase hex digits) as its id. */
  Span start(SpanBuilder builder, String spanId);

  /** The question {@link #exports} answers, for deferrals built from one. */
  @FunctionalInterface
  interface Decision {
    /** See {@link SpanDeferral#exports}. */
    boolean exports(boolean failed, long rootNanos, String traceId);
  }
}
