package io.phasemeter.proxy.telemetry;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.opentelemetry.api.trace.Span;
import io.prometheus.metrics.tracer.common.SpanContext;

/**
 * Lets Prometheus histograms attach exemplars: at {@code record()} time the span named with {@link
 * #recordingFor} (else the current OpenTelemetry span) gives the exemplar's trace and span ids.
 *
 * <p>{@link #recordingFor} is a plain thread-local set around the recordings of one request: making
 * a span current through the OpenTelemetry context instead costs a context and a scope per phase,
 * per request (docs/performance.md).
 */
final class OtelExemplarContext implements SpanContext {
  // A SpanContext, or a Span whose context is read only if an exemplar is taken: a deferred phase
  // span builds its context (an id string) only when asked, and samplers ask rarely.
  private static final ThreadLocal<Object> RECORDING = new ThreadLocal<>();

  /**
   * Names the span whose ids exemplars take on this thread until {@link #done()}; for the
   * histograms of {@link PrometheusMeterRegistry}.
   */
  static void recordingFor(io.opentelemetry.api.trace.SpanContext span) {
    RECORDING.set(span);
  }

  /**
   * As {@link #recordingFor(io.opentelemetry.api.trace.SpanContext)}, the span's context read late.
   */
  static void recordingFor(Span span) {
    RECORDING.set(span);
  }

  /** Ends {@link #recordingFor} (the thread keeps its entry: no allocation per request). */
  static void done() {
    RECORDING.set(null);
  }

  private static io.opentelemetry.api.trace.SpanContext current() {
    Object c = RECORDING.get();
    if (c instanceof Span s) {
      return s.getSpanContext();
    }
    return c != null ? (io.opentelemetry.api.trace.SpanContext) c : Span.current().getSpanContext();
  }

  @Override
  public String getCurrentTraceId() {
    io.opentelemetry.api.trace.SpanContext c = current();
    return c.isValid() ? c.getTraceId() : null;
  }

  @Override
  public String getCurrentSpanId() {
    io.opentelemetry.api.trace.SpanContext c = current();
    return c.isValid() ? c.getSpanId() : null;
  }

  @Override
  public boolean isCurrentSpanSampled() {
    return current().isSampled();
  }

  @Override
  public void markCurrentSpanAsExemplar() {
    // Every request is recorded and kept in the record store; nothing to mark.
  }
}
