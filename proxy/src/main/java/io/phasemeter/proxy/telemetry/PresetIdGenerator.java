package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.sdk.trace.IdGenerator;
import io.phasemeter.proxy.pipeline.SpanDeferral;

/**
 * The SDK's random ids, except that a span started through {@link #startWithId} gets the id it was
 * given: a deferred phase span (created before anyone knew whether it would be exported) keeps, as
 * an SDK span, the id it already handed out. The chosen id lives in a thread-local for the length
 * of one {@code startSpan} call, so other threads' spans, and spans started any other way, are
 * random as before.
 */
public final class PresetIdGenerator implements IdGenerator {
  private static final ThreadLocal<String> PRESET = new ThreadLocal<>();
  private final IdGenerator random = IdGenerator.random();

  /** Starts {@code builder}'s span with {@code spanId} as its id. */
  public static Span startWithId(SpanBuilder builder, String spanId) {
    PRESET.set(spanId);
    try {
      return builder.startSpan();
    } finally {
      PRESET.set(null);
    }
  }

  /**
   * A deferral that exports what {@code decision} says and starts each span with its chosen id: for
   * an SDK built with this generator.
   */
  public static SpanDeferral deferral(SpanDeferral.Decision decision) {
    return new SpanDeferral() {
      @Override
      public boolean exports(boolean failed, long rootNanos, String traceId) {
        return decision.exports(failed, rootNanos, traceId);
      }

      @Override
      public Span start(SpanBuilder builder, String spanId) {
        return startWithId(builder, spanId);
      }
    };
  }

  @Override
  public String generateSpanId() {
    String preset = PRESET.get();
    if (preset != null) {
      PRESET.set(null);
      return preset;
    }
    return random.generateSpanId();
  }

  @Override
  public String generateTraceId() {
    return random.generateTraceId();
  }

  @Override
  public boolean generatesRandomTraceIds() {
    return random.generatesRandomTraceIds();
  }
}
