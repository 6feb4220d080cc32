package io.phasemeter.proxy.telemetry;

import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.metrics.InstrumentType;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.AggregationTemporality;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.PointData;
import io.opentelemetry.sdk.metrics.export.CollectionRegistration;
import io.opentelemetry.sdk.metrics.export.MetricReader;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import io.phasemeter.core.SpanAttributes;
import java.util.Collection;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * How the proxy's own span export is doing, so a report can state that measuring did not perturb
 * the system: the batch processor's queue (read from the SDK's own instrumentation through a pull
 * reader, on demand), spans dropped because that queue was full or an export failed, and how long
 * exports take.
 */
public final class SpanExportHealth implements MetricReader {
  private volatile CollectionRegistration registration = CollectionRegistration.noop();
  private final SdkMeterProvider meterProvider;
  private final LongAdder exported = new LongAdder();
  private final LongAdder failed = new LongAdder();
  private final LongAdder exports = new LongAdder();
  private final AtomicLong exportNanos = new AtomicLong();
  private final AtomicLong lastExportNanos = new AtomicLong();

  public SpanExportHealth() {
    this.meterProvider = SdkMeterProvider.builder().registerMetricReader(this).build();
  }

  /** The meter provider the batch span processor reports its queue to. */
  public SdkMeterProvider meterProvider() {
    return meterProvider;
  }

  /** Wraps an exporter so each export's duration and outcome are counted. */
  public SpanExporter measure(SpanExporter delegate) {
    return new SpanExporter() {
      @Override
      public CompletableResultCode export(Collection<SpanData> spans) {
        long start = System.nanoTime();
        int n = spans.size();
        CompletableResultCode result = delegate.export(spans);
        result.whenComplete(
            () -> {
              long took = System.nanoTime() - start;
              exports.increment();
              exportNanos.addAndGet(took);
              lastExportNanos.set(took);
              if (result.isSuccess()) {
                exported.add(n);
              } else {
                failed.add(n);
              }
            });
        return result;
      }

      @Override
      public CompletableResultCode flush() {
        return delegate.flush();
      }

      @Override
      public CompletableResultCode shutdown() {
        return delegate.shutdown();
      }
    };
  }

  /** Spans waiting in the batch processor's queue now. */
  public long queueSize() {
    return sum("otel.sdk.processor.span.queue.size", null);
  }

  /** The batch processor's queue capacity. */
  public long queueCapacity() {
    return sum("otel.sdk.processor.span.queue.capacity", null);
  }

  /** Spans dropped: the queue was full, or their export failed. */
  public long droppedSpans() {
    return sum("otel.sdk.processor.span.processed", "queue_full") + failed.sum();
  }

  /** Spans delivered to the collector. */
  public long exportedSpans() {
    return exported.sum();
  }

  /** Export calls finished (successful or not). */
  public long exports() {
    return exports.sum();
  }

  /** Total time spent in finished exports, in seconds. */
  public double exportSeconds() {
    return exportNanos.get() / 1e9;
  }

  private long sum(String metric, String errorType) {
    long total = 0;
    for (MetricData md : registration.collectAllMetrics()) {
      if (!md.getName().equals(metric)) {
        continue;
      }
      for (PointData p : md.getData().getPoints()) {
        if (errorType != null
            && !errorType.equals(p.getAttributes().get(SpanAttributes.ERROR_TYPE))) {
          continue;
        }
        if (p instanceof LongPointData lp) {
          total += lp.getValue();
        }
      }
    }
    return total;
  }

  @Override
  public void register(CollectionRegistration registration) {
    this.registration = registration;
  }

  @Override
  public AggregationTemporality getAggregationTemporality(InstrumentType instrumentType) {
    return AggregationTemporality.CUMULATIVE;
  }

  @Override
  public CompletableResultCode forceFlush() {
    return CompletableResultCode.ofSuccess();
  }

  @Override
  public CompletableResultCode shutdown() {
    return CompletableResultCode.ofSuccess();
  }
}
