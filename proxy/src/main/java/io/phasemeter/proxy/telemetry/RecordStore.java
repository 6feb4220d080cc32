package io.phasemeter.proxy.telemetry;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import java.time.Duration;

/**
 * Keeps the record of every finished request (success, error, cancelled) in a bounded cache for
 * {@code GET /admin/records/{traceId}} and publishes it to the live feed. Size and age bounds come
 * from {@code telemetry.records}; the oldest records go first.
 */
public final class RecordStore implements RequestObserver {
  private final Cache<String, String> records;
  private final RecordFeed feed;
  private final ExportPolicy policy;
  private final java.util.concurrent.atomic.LongAdder finished =
      new java.util.concurrent.atomic.LongAdder();
  private final java.util.concurrent.atomic.LongAdder sampled =
      new java.util.concurrent.atomic.LongAdder();

  public RecordStore(int maxRecords, Duration ttl, RecordFeed feed, ExportPolicy policy) {
    this.records = Caffeine.newBuilder().maximumSize(maxRecords).expireAfterWrite(ttl).build();
    this.feed = feed;
    this.policy = policy;
  }

  @Override
  public void onFinished(RequestContext ctx) {
    boolean sampled = policy.keep(ctx.failed(), ctx.rootNanos(), ctx.traceId());
    finished.increment();
    if (sampled) {
      this.sampled.increment();
    }
    String json = RequestRecord.json(ctx, sampled);
    records.put(ctx.traceId(), json);
    feed.publish(json);
  }

  /** The record of {@code traceId}, or null. */
  public String get(String traceId) {
    return records.getIfPresent(traceId);
  }

  /** The share of finished requests whose traces the export rule kept (1.0 before any). */
  public double exportedRatio() {
    long total = finished.sum();
    return total == 0 ? 1.0 : (double) sampled.sum() / total;
  }

  /** Records held now (approximate, as Caffeine counts). */
  public long size() {
    records.cleanUp();
    return records.estimatedSize();
  }

  public RecordFeed feed() {
    return feed;
  }

  /** The export rule the records' {@code sampled} field states. */
  public ExportPolicy policy() {
    return policy;
  }
}
