package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.trace.Span;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SloJudgement;
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
 *
 * <p>The ring keeps each record's fields in columns (arrays of numbers, and of strings that come
 * from configuration and enums), allocated a chunk at a time as the ring first fills: keeping a
 * record allocates nothing. A ring of objects made every record created since the last young
 * collection survive it, so each pause copied thousands of them (docs/performance.md, closed-loop
 * p99); columns leave the collector nothing to copy. A record is rebuilt as an object only when it
 * is read.
 */
public final class RecordStore implements RequestObserver {
  private static final int PHASE_COUNT = Phase.all().length;
  private static final byte OCCUPIED = 1;
  private static final byte STREAM = 2;
  private static final byte EXTERNAL = 4;
  private static final byte SAMPLED = 8;

  private final int capacity;
  // The columns, in chunks of CHUNK slots allocated when the ring first reaches them: memory grows
  // with use up to the bound (~200 B a record), as a ring of objects did, and no chunk is large
  // enough to be a humongous object.
  private static final int SHIFT = 12;
  private static final int CHUNK = 1 << SHIFT;
  private final Chunk[] chunks;
  // Per slot in Chunk.numbers: rootNanos, ttftNanos, gatewayNanos, unattributedNanos, tpotNanos,
  // inputTokens, outputTokens, upstreamConnectNanos, then one per phase.
  private static final int ROOT = 0;
  private static final int TTFT = 1;
  private static final int GATEWAY = 2;
  private static final int UNATTRIBUTED = 3;
  private static final int TPOT = 4;
  private static final int INPUT = 5;
  private static final int OUTPUT = 6;
  private static final int UPSTREAM_CONNECT = 7;
  private static final int PHASES_AT = 8;
  private static final int NUMBERS = PHASES_AT + PHASE_COUNT;
  // Per slot in Chunk.strings.
  private static final int MODEL = 0;
  private static final int POOL = 1;
  private static final int ROUTE = 2;
  private static final int OUTCOME = 3;
  private static final int ERROR_TYPE = 4;
  private static final int FINISH_REASON = 5;
  private static final int PRIORITY = 6;
  private static final int KEY_NAME = 7;
  private static final int ENGINE_STATUS = 8;
  private static final int OPERATION = 9;
  private static final int TENANT = 10;
  private static final int ROUTE_REASON = 11;
  private static final int NETWORK_PROTOCOL = 12;
  private static final int TLS_PROTOCOL = 13;
  private static final int STRINGS = 14;
  // Trace id -> ring slot, open addressing with linear probing over the columns' own ids: an entry
  // is a slot + 1 (0 = free).
  private final int[] index;
  private final int mask;
  // Clients choose trace ids (traceparent): the bucket mixes both halves with a per-process seed,
  // so ids chosen to collide cannot pile up in one probe run.
  private final long seed = java.util.concurrent.ThreadLocalRandom.current().nextLong();
  private final long ttlNanos;
  private final boolean withEngine;
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
    this.capacity = maxRecords;
    this.chunks = new Chunk[(maxRecords + CHUNK - 1) >>> SHIFT];
    this.withEngine = engine != null && engine.enabled();
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
              record.traceId(),
              ctx.modelLabel(),
              ctx.poolName(),
              ctx.tenant(),
              generation.getSpanContext()),
          timings -> publish(record.withEngine(timings)));
      return;
    }
    publish(record);
  }

  /**
   * Only a successful generation on the proxy's own engine has an engine span to wait for: an
   * external provider's queue and model stay out of sight, a failed or cancelled request may never
   * reach the engine's tracing, and pooling, pass-through and background requests are not the
   * generations it traces.
   */
  private boolean waitsForEngine(RequestContext ctx) {
    return withEngine
        && ctx.outcome() == Outcome.SUCCESS
        && !ctx.external()
        && ctx.route().generates()
        && !ctx.plain()
        && ctx.phaseNanos(Phase.GENERATION) >= 0;
  }

  private void publish(RequestRecord record) {
    put(record, System.nanoTime());
    feed.publish(record);
  }

  synchronized void put(RequestRecord r, long now) {
    if (occupied(next)) {
      unindex(next);
    }
    int previous = find(r.traceHi, r.traceLo);
    if (previous >= 0) {
      // A client reused a trace id: the newest request owns it.
      unindex(previous);
      chunks[previous >>> SHIFT].flags[previous & (CHUNK - 1)] = 0;
    }
    int slot = next;
    Chunk c = chunks[slot >>> SHIFT];
    if (c == null) {
      c = chunks[slot >>> SHIFT] = new Chunk(Math.min(CHUNK, capacity - (slot & ~(CHUNK - 1))));
    }
    int k = slot & (CHUNK - 1);
    c.traceHi[k] = r.traceHi;
    c.traceLo[k] = r.traceLo;
    c.spanId[k] = r.spanId;
    c.written[k] = now;
    c.flags[k] =
        (byte)
            (OCCUPIED
                | (r.stream ? STREAM : 0)
                | (r.external ? EXTERNAL : 0)
                | (r.sampled ? SAMPLED : 0));
    c.status[k] = r.status;
    c.upstreamAttempts[k] = r.upstreamAttempts;
    int n = k * NUMBERS;
    c.numbers[n + ROOT] = r.rootNanos;
    c.numbers[n + TTFT] = r.ttftNanos;
    c.numbers[n + GATEWAY] = r.gatewayNanos;
    c.numbers[n + UNATTRIBUTED] = r.unattributedNanos;
    c.numbers[n + TPOT] = r.tpotNanos;
    c.numbers[n + INPUT] = r.inputTokens;
    c.numbers[n + OUTPUT] = r.outputTokens;
    c.numbers[n + UPSTREAM_CONNECT] = r.upstreamConnectNanos;
    System.arraycopy(r.phaseNanos, 0, c.numbers, n + PHASES_AT, PHASE_COUNT);
    int t = k * STRINGS;
    c.strings[t + MODEL] = r.model;
    c.strings[t + POOL] = r.pool;
    c.strings[t + ROUTE] = r.route;
    c.strings[t + OPERATION] = r.operation;
    c.strings[t + OUTCOME] = r.outcome;
    c.strings[t + ERROR_TYPE] = r.errorType;
    c.strings[t + FINISH_REASON] = r.finishReason;
    c.strings[t + PRIORITY] = r.priority;
    c.strings[t + KEY_NAME] = r.keyName;
    c.strings[t + TENANT] = r.tenant;
    c.strings[t + ROUTE_REASON] = r.routeReason;
    c.strings[t + NETWORK_PROTOCOL] = r.networkProtocolVersion;
    c.strings[t + TLS_PROTOCOL] = r.tlsProtocolVersion;
    c.strings[t + ENGINE_STATUS] = r.engineStatus;
    if (c.engine != null) {
      c.engine[k] = r.engine;
    }
    c.slo[k] = r.slo;
    int i = bucket(r.traceHi, r.traceLo);
    while (index[i] != 0) {
      i = (i + 1) & mask;
    }
    index[i] = slot + 1;
    next = (slot + 1) % capacity;
  }

  private boolean occupied(int slot) {
    Chunk c = chunks[slot >>> SHIFT];
    return c != null && (c.flags[slot & (CHUNK - 1)] & OCCUPIED) != 0;
  }

  private long traceHi(int slot) {
    return chunks[slot >>> SHIFT].traceHi[slot & (CHUNK - 1)];
  }

  private long traceLo(int slot) {
    return chunks[slot >>> SHIFT].traceLo[slot & (CHUNK - 1)];
  }

  /** The record in ring slot {@code slot}, rebuilt from the columns. */
  private RequestRecord read(int slot) {
    Chunk c = chunks[slot >>> SHIFT];
    int k = slot & (CHUNK - 1);
    int n = k * NUMBERS;
    int t = k * STRINGS;
    byte f = c.flags[k];
    return new RequestRecord(
        c.traceHi[k],
        c.traceLo[k],
        c.spanId[k],
        c.strings[t + MODEL],
        c.strings[t + POOL],
        c.strings[t + ROUTE],
        c.strings[t + OPERATION],
        (f & STREAM) != 0,
        c.status[k],
        c.strings[t + OUTCOME],
        c.strings[t + ERROR_TYPE],
        c.numbers[n + ROOT],
        c.numbers[n + TTFT],
        java.util.Arrays.copyOfRange(c.numbers, n + PHASES_AT, n + PHASES_AT + PHASE_COUNT),
        c.numbers[n + GATEWAY],
        c.numbers[n + UNATTRIBUTED],
        c.numbers[n + TPOT],
        c.numbers[n + INPUT],
        c.numbers[n + OUTPUT],
        c.strings[t + FINISH_REASON],
        c.strings[t + PRIORITY],
        c.upstreamAttempts[k],
        c.strings[t + ROUTE_REASON],
        c.numbers[n + UPSTREAM_CONNECT],
        c.strings[t + NETWORK_PROTOCOL],
        c.strings[t + TLS_PROTOCOL],
        (f & EXTERNAL) != 0,
        c.strings[t + KEY_NAME],
        c.strings[t + TENANT],
        (f & SAMPLED) != 0,
        c.strings[t + ENGINE_STATUS],
        c.engine == null ? null : c.engine[k],
        c.slo[k]);
  }

  /** The columns of CHUNK consecutive ring slots (fewer for the last one). */
  private final class Chunk {
    final long[] traceHi;
    final long[] traceLo;
    final long[] spanId;
    final long[] written;
    final byte[] flags;
    final int[] status;
    final int[] upstreamAttempts;
    final long[] numbers;
    final String[] strings;
    // Only with engine spans on (issue 11).
    final EngineTimings[] engine;
    // The verdict on the request's objectives: a request that met its budget's objectives, or
    // failed, shares its budget's one instance, so most slots point at a few objects.
    final SloJudgement[] slo;

    Chunk(int size) {
      traceHi = new long[size];
      traceLo = new long[size];
      spanId = new long[size];
      written = new long[size];
      flags = new byte[size];
      status = new int[size];
      upstreamAttempts = new int[size];
      numbers = new long[size * NUMBERS];
      strings = new String[size * STRINGS];
      engine = withEngine ? new EngineTimings[size] : null;
      slo = new SloJudgement[size];
    }
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
      int slot = index[i] - 1;
      if (traceHi(slot) == hi && traceLo(slot) == lo) {
        return slot;
      }
    }
    return -1;
  }

  /** Removes ring slot {@code slot}'s entry, shifting back the entries probed past it. */
  private void unindex(int slot) {
    int i = bucket(traceHi(slot), traceLo(slot));
    while (index[i] != slot + 1) {
      i = (i + 1) & mask;
    }
    int gap = i;
    for (int j = (gap + 1) & mask; index[j] != 0; j = (j + 1) & mask) {
      int moved = index[j] - 1;
      int home = bucket(traceHi(moved), traceLo(moved));
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

  /**
   * The record of {@code traceId} (a new object, rebuilt from the columns), or null when unknown,
   * overwritten or older than the TTL.
   */
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
    if (slot < 0
        || System.nanoTime() - chunks[slot >>> SHIFT].written[slot & (CHUNK - 1)] > ttlNanos) {
      return null;
    }
    return read(slot);
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
    for (Chunk c : chunks) {
      if (c == null) {
        continue;
      }
      for (int k = 0; k < c.flags.length; k++) {
        if ((c.flags[k] & OCCUPIED) != 0 && now - c.written[k] <= ttlNanos) {
          n++;
        }
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
