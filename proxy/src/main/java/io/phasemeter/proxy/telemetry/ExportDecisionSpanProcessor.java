package io.phasemeter.proxy.telemetry;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Decides what is exported when a request's root span ends (DESIGN.md §3): every span is recorded;
 * the finished children of a root wait here, bounded, until the root ends, and then the whole
 * request is forwarded to {@code delegate} when it failed, when it was slower than a threshold, or
 * when its trace id falls within {@code ratio}; otherwise it is dropped. Children that never see
 * their root are evicted at the bound and counted.
 */
public final class ExportDecisionSpanProcessor implements SpanProcessor {
  private static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("llm.outcome");

  private final SpanProcessor delegate;
  private final ExportPolicy policy;
  private final Cache<String, List<ReadableSpan>> pending;
  private final LongAdder roots = new LongAdder();
  private final LongAdder exportedRoots = new LongAdder();
  private final AtomicLong evictedSpans = new AtomicLong();

  /**
   * @param delegate receives the spans of kept requests (usually a batch exporter)
   * @param ratio share of ordinary requests kept, by trace id
   * @param keepErrors keep every request that did not succeed
   * @param keepSlowerThan keep every request at least this slow
   * @param maxPendingRoots bound on requests whose children wait for their root
   */
  public ExportDecisionSpanProcessor(
      SpanProcessor delegate,
      double ratio,
      boolean keepErrors,
      Duration keepSlowerThan,
      int maxPendingRoots) {
    this.delegate = delegate;
    this.policy = new ExportPolicy(ratio, keepErrors, keepSlowerThan);
    this.pending =
        Caffeine.newBuilder()
            .maximumSize(maxPendingRoots)
            .expireAfterWrite(Duration.ofMinutes(15))
            .<String, List<ReadableSpan>>removalListener(
                (k, v, cause) -> {
                  if (cause.wasEvicted() && v != null) {
                    evictedSpans.addAndGet(v.size());
                  }
                })
            .build();
  }

  @Override
  public void onStart(Context parentContext, ReadWriteSpan span) {
    delegate.onStart(parentContext, span);
  }

  @Override
  public boolean isStartRequired() {
    return delegate.isStartRequired();
  }

  @Override
  public void onEnd(ReadableSpan span) {
    SpanContext parent = span.getParentSpanContext();
    boolean localRoot = !parent.isValid() || parent.isRemote();
    if (!localRoot) {
      String key = key(span.getSpanContext().getTraceId(), parent.getSpanId());
      // compute() is atomic per key: no child is lost to an eviction racing the add, and two
      // children ending on different threads never write one list at once.
      pending
          .asMap()
          .compute(
              key,
              (k, list) -> {
                List<ReadableSpan> l = list == null ? new ArrayList<>(8) : list;
                l.add(span);
                return l;
              });
      return;
    }
    List<ReadableSpan> children =
        pending
            .asMap()
            .remove(key(span.getSpanContext().getTraceId(), span.getSpanContext().getSpanId()));
    roots.increment();
    if (keep(span)) {
      exportedRoots.increment();
      if (children != null) {
        for (ReadableSpan c : children) {
          delegate.onEnd(c);
        }
      }
      delegate.onEnd(span);
    }
  }

  private boolean keep(ReadableSpan root) {
    String outcome = root.getAttribute(OUTCOME);
    boolean failed =
        root.toSpanData().getStatus().getStatusCode() == StatusCode.ERROR
            || (outcome != null && !outcome.equals("success"));
    return policy.keep(failed, root.getLatencyNanos(), root.getSpanContext().getTraceId());
  }

  private static String key(String traceId, String spanId) {
    return traceId + spanId;
  }

  @Override
  public boolean isEndRequired() {
    return true;
  }

  /** The share of finished requests whose traces were exported (1.0 before any request). */
  public double exportedRatio() {
    long total = roots.sum();
    return total == 0 ? 1.0 : (double) exportedRoots.sum() / total;
  }

  /** Child spans dropped because their root never arrived within the bound. */
  public long evictedSpans() {
    pending.cleanUp();
    return evictedSpans.get();
  }

  @Override
  public CompletableResultCode shutdown() {
    pending.invalidateAll();
    return delegate.shutdown();
  }

  @Override
  public CompletableResultCode forceFlush() {
    return delegate.forceFlush();
  }
}
