package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.trace.Span;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import java.time.Duration;

/**
 * Keeps the record of every finished request (success, error, cancelled) for {@code GET
 * /admin/records/{traceId}} and publishes it to the live feed. Size and age bounds come from {@code
 * telemetry.records}; the oldest records go first.
 *
 * <p>Not a Caffeine cache: its TinyLFU admission keeps entries seen more often, and write-once
 * records all tie, so new ones lose to old ones (measured: after 5,000 puts into 1,000 places, 34
 * of the newest 1,000 remained and 411 of the oldest). Exemplars and the load client look up the
 * newest records, so this is a ring in arrival order with an index.
 */
public final class RecordStore implements RequestObserver {
  private final RequestRecord[] records;
  private final long[] written;
  // Trace id -> ring slot, open addressing with linear probing over the records' own ids: an
  // entry is a slot + 1 (0 = free), so indexing a record allocates nothing that the collector
  // must later copy (a HashMap<String, Integer> kept four objects per record).
  private final int[] index;
  private final int mask;
  // Clients choose trace ids (traceparent): the bucket mixes both halves with a per-process seed,
  // so ids chosen to collide cannot pile up in one probe run.
  private final long seed = java.util.concurrent.ThreadLocalRandom.current().nextLong();
  private final long ttlNanos;
  private int next;
  private final RecordFeed<RequestRecord> feed;
  private final ExportPolicy policy;
  private final EngineSpans engine;
  private final java.util.concurrent.atomic.LongAdder finished =
      new java.util.concurrent.atomic.LongAdder();
  private final java.util.concurrent.atomic.LongAdder sampled =
      new java.util.concurrent.atomic.LongAdder();

  public RecordStore(
      int maxRecords, Duration ttl, RecordFeed<RequestRecord> feed, ExportPolicy policy) {
    this(maxRecords, ttl, feed, policy, null);
  }

  /**
   * @param engine where records wait for the engine's span when engine spans are enabled (null:
   *     never)
   */
  public RecordStore(
      int maxRecords,
      Duration ttl,
      RecordFeed<RequestRecord> feed,
      ExportPolicy policy,
      EngineSpans engine) {
    this.engine = engine;
    this.records = new RequestRecord[maxRecords];
    this.written = new long[maxRecords];
    this.index = new int[Integer.highestOneBit(Math.max(2, maxRecords) * 2 - 1) << 1];
    this.mask = index.length - 1;
    this.ttlNanos = ttl.toNanos();
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
    RequestRecord record = RequestRecord.of(ctx, sampled);
    if (waitsForEngine(ctx)) {
      Span generation = ctx.phaseSpan(Phase.GENERATION);
      engine.hold(
          new EngineSpans.Request(
              record.traceId(), ctx.modelLabel(), ctx.poolName(), generation.getSpanContext()),
          timings -> publish(record.withEngine(timings)));
      return;
    }
    publish(record);
  }

  /**
   * Only a successful generation on the proxy's own engine has an engine span to wait for: an
   * external provider's queue and model stay out of sight, and a failed or cancelled request may
   * never reach the engine's tracing.
   */
  private boolean waitsForEngine(RequestContext ctx) {
    return engine != null
        && engine.enabled()
        && ctx.outcome() == Outcome.SUCCESS
        && !ctx.external()
        && ctx.phaseNanos(Phase.GENERATION) >= 0;
  }

  private void publish(RequestRecord record) {
    put(record, System.nanoTime());
    feed.publish(record);
  }

  synchronized void put(RequestRecord record, long now) {
    if (records[next] != null) {
      unindex(next);
    }
    int previous = find(record.traceHi(), record.traceLo());
    if (previous >= 0) {
      // A client reused a trace id: the newest request owns it.
      unindex(previous);
      records[previous] = null;
    }
    records[next] = record;
    written[next] = now;
    int i = bucket(record.traceHi(), record.traceLo());
    while (index[i] != 0) {
      i = (i + 1) & mask;
    }
    index[i] = next + 1;
    next = (next + 1) % records.length;
  }

  private int bucket(long hi, long lo) {
    return (int) mix(mix(hi ^ seed) + lo) & mask;
  }

  /** MurmurHash3's 64-bit finalizer: every input bit affects every output bit. */
  private static long mix(long k) {
    k = (k ^ (k >>> 33)) * 0xff51afd7ed558ccdL;
    k = (k ^ (k >>> 33)) * 0xc4ceb9fe1a85ec53L;
    return k ^ (k >>> 33);
  }

  /** The ring slot holding trace id (hi, lo), or -1. */
  private int find(long hi, long lo) {
    for (int i = bucket(hi, lo); index[i] != 0; i = (i + 1) & mask) {
      RequestRecord r = records[index[i] - 1];
      if (r.traceHi() == hi && r.traceLo() == lo) {
        return index[i] - 1;
      }
    }
    return -1;
  }

  /** Removes ring slot {@code slot}'s entry, shifting back the entries probed past it. */
  private void unindex(int slot) {
    RequestRecord r = records[slot];
    int i = bucket(r.traceHi(), r.traceLo());
    while (index[i] != slot + 1) {
      i = (i + 1) & mask;
    }
    int gap = i;
    for (int j = (gap + 1) & mask; index[j] != 0; j = (j + 1) & mask) {
      RequestRecord moved = records[index[j] - 1];
      int home = bucket(moved.traceHi(), moved.traceLo());
      // Move the entry into the gap unless its home lies cyclically in (gap, j].
      boolean stays = gap <= j ? gap < home && home <= j : gap < home || home <= j;
      if (!stays) {
        index[gap] = index[j];
        gap = j;
      }
    }
    index[gap] = 0;
  }

  /**
   * The record of {@code traceId} as JSON, or null when unknown, overwritten or older than the TTL.
   */
  public String get(String traceId) {
    RequestRecord r = record(traceId);
    return r == null ? null : r.json();
  }

  /** The record of {@code traceId}, or null when unknown, overwritten or older than the TTL. */
  public synchronized RequestRecord record(String traceId) {
    if (traceId == null || traceId.length() != 32) {
      return null;
    }
    int slot;
    try {
      slot =
          find(
              Long.parseUnsignedLong(traceId, 0, 16, 16),
              Long.parseUnsignedLong(traceId, 16, 32, 16));
    } catch (NumberFormatException e) {
      return null;
    }
    if (slot < 0 || System.nanoTime() - written[slot] > ttlNanos) {
      return null;
    }
    return records[slot];
  }

  /** The share of finished requests whose traces the export rule kept (1.0 before any). */
  public double exportedRatio() {
    long total = finished.sum();
    return total == 0 ? 1.0 : (double) sampled.sum() / total;
  }

  /** Records held now and younger than the TTL. */
  public synchronized long size() {
    long now = System.nanoTime();
    long n = 0;
    for (int i = 0; i < records.length; i++) {
      if (records[i] != null && now - written[i] <= ttlNanos) {
        n++;
      }
    }
    return n;
  }

  public RecordFeed<RequestRecord> feed() {
    return feed;
  }

  /** The export rule the records' {@code sampled} field states. */
  public ExportPolicy policy() {
    return policy;
  }
}
