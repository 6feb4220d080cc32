package io.phasemeter.proxy.telemetry;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.function.ToDoubleFunction;

/**
 * How the traces leave: {@code llm_telemetry_dropped_total{signal="spans"}} and {@code
 * llm_traces_exported_ratio}, and, where the proxy's own SDK exports them, the export queue's size,
 * export calls and the time spent in them. Bound once, by whoever decides what is exported: the
 * proxy's own SDK ({@link #of(ProxyTelemetry)}), or, without one, the record store's export rule
 * ({@link #of(RecordStore)}, nothing dropped, no export queue).
 */
public final class TraceExportMeters implements MeterBinder {
  private final ProxyTelemetry telemetry;
  private final RecordStore records;

  private TraceExportMeters(ProxyTelemetry telemetry, RecordStore records) {
    this.telemetry = telemetry;
    this.records = records;
  }

  /** The meters of the proxy's own SDK: its export health, and the share it exported. */
  public static TraceExportMeters of(ProxyTelemetry telemetry) {
    return new TraceExportMeters(telemetry, null);
  }

  /** Without the proxy's own SDK: no span is dropped here; the share is the records' rule's. */
  public static TraceExportMeters of(RecordStore records) {
    return new TraceExportMeters(null, records);
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    if (telemetry == null) {
      // The meters hold the record store weakly; the proxy's runtime holds it.
      dropped(registry, records, r -> 0.0);
      exportedRatio(registry, records, RecordStore::exportedRatio);
      return;
    }
    SpanExportHealth health = telemetry.health();
    ExportDecisionSpanProcessor decisions = telemetry.decisions();
    dropped(registry, telemetry, t -> health.droppedSpans() + decisions.evictedSpans());
    Gauge.builder("llm.telemetry.span_queue.size", health, SpanExportHealth::queueSize)
        .description("Spans waiting to be exported")
        .strongReference(true)
        .register(registry);
    FunctionCounter.builder("llm.telemetry.exports", health, SpanExportHealth::exports)
        .description("Span export calls finished")
        .register(registry);
    FunctionCounter.builder(
            "llm.telemetry.export.duration.seconds", health, SpanExportHealth::exportSeconds)
        .description("Time spent exporting spans")
        .register(registry);
    exportedRatio(registry, decisions, ExportDecisionSpanProcessor::exportedRatio);
  }

  private static <T> void dropped(MeterRegistry registry, T source, ToDoubleFunction<T> spans) {
    FunctionCounter.builder("llm.telemetry.dropped", source, spans)
        .tag("signal", "spans")
        .description("Telemetry the proxy could not deliver (slow subscribers, full queues)")
        .register(registry);
  }

  private static <T> void exportedRatio(
      MeterRegistry registry, T source, ToDoubleFunction<T> ratio) {
    Gauge.builder("llm.traces.exported.ratio", source, ratio)
        .strongReference(true)
        .description("Share of finished requests whose traces were exported")
        .register(registry);
  }
}
