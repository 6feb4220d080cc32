package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.trace.Span;
import io.prometheus.metrics.tracer.common.SpanContext;

/**
 * Lets Prometheus histograms attach exemplars: at {@code record()} time the request's span is
 * current (the caller makes it so), and its trace and span ids become the exemplar's labels.
 */
final class OtelExemplarContext implements SpanContext {

  @Override
  public String getCurrentTraceId() {
    io.opentelemetry.api.trace.SpanContext c = Span.current().getSpanContext();
    return c.isValid() ? c.getTraceId() : null;
  }

  @Override
  public String getCurrentSpanId() {
    io.opentelemetry.api.trace.SpanContext c = Span.current().getSpanContext();
    return c.isValid() ? c.getSpanId() : null;
  }

  @Override
  public boolean isCurrentSpanSampled() {
    return Span.current().getSpanContext().isSampled();
  }

  @Override
  public void markCurrentSpanAsExemplar() {
    // Every request is recorded and kept in the record store; nothing to mark.
  }
}
