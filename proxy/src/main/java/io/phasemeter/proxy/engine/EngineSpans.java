package io.phasemeter.proxy.engine;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.opentelemetry.api.trace.SpanContext;
import io.phasemeter.proxy.config.ProxyConfig;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Matches the engine's per-request spans to the proxy's finished requests by trace id. Either side
 * may come first: a finished record is held until its engine span arrives or {@code wait} has
 * passed (then it is published as missing), and an engine span is held until its record finishes or
 * {@code wait} has passed (then it is counted unmatched). At most {@code max_pending} of each are
 * held; past that the oldest goes first and is counted (a held record is still published, as
 * missing). Time comes from an injected ticker (nanoseconds), so tests advance it by hand.
 *
 * <p>Two insertion-ordered maps rather than Caffeine caches: every entry has the same lifetime, so
 * the oldest entry is both the next to expire and the one to evict, and callers need that order
 * (and a callback for every held record) to be exact. Caffeine's size eviction picks by frequency,
 * and its removal callbacks run when maintenance runs.
 */
public final class EngineSpans implements MeterBinder {
  /** The request a held record belongs to: its labels and its generation span (for exemplars). */
  public record Request(
      String traceId, String model, String pool, String tenant, SpanContext generation) {
    /** A request of no allowlisted tenant ({@code other}). */
    public Request(String traceId, String model, String pool, SpanContext generation) {
      this(traceId, model, pool, io.phasemeter.proxy.gateway.TenantAllowlist.OTHER, generation);
    }
  }

  /** Told once per held record, after the record itself was published. */
  public interface Observer {
    /**
     * The record of {@code request} was published with {@code timings}, or without (null): no
     * engine span came in time. Called on whichever thread resolved it; must not block.
     */
    void onEngine(Request request, EngineTimings timings);
  }

  private record Held(Request request, Consumer<EngineTimings> publish, long since) {}

  private record Timings(EngineTimings timings, long since) {}

  private record Resolved(Held held, EngineTimings timings) {}

  private final boolean enabled;
  private final long waitNanos;
  private final int maxPending;
  private final LongSupplier ticker;
  private final List<Observer> observers;
  private final LinkedHashMap<String, Held> records = new LinkedHashMap<>();
  private final LinkedHashMap<String, Timings> timings = new LinkedHashMap<>();
  private long matched;
  private long missing;
  private long unmatched;
  private long evictedRecords;
  private long evictedTimings;
  private long received;

  /**
   * @param config {@code telemetry.engine_spans}
   * @param ticker nanoseconds from an arbitrary origin (the proxy's clock)
   * @param observers told about every held record once it is resolved (metrics, live stats)
   */
  public EngineSpans(
      ProxyConfig.EngineSpans config, LongSupplier ticker, List<Observer> observers) {
    this.enabled = config.enabled();
    this.waitNanos = config.maxWait().toNanos();
    this.maxPending = config.maxPending();
    this.ticker = Objects.requireNonNull(ticker);
    this.observers = List.copyOf(observers);
  }

  /** Whether records wait for engine spans at all ({@code telemetry.engine_spans.enabled}). */
  public boolean enabled() {
    return enabled;
  }

  /**
   * Holds a finished record until its engine span is known: {@code publish} runs exactly once, with
   * the timings, or with null when none came within {@code wait} (or the record was evicted).
   */
  public void hold(Request request, Consumer<EngineTimings> publish) {
    List<Resolved> done = new ArrayList<>(2);
    synchronized (this) {
      long now = ticker.getAsLong();
      Timings t = timings.remove(request.traceId());
      if (t != null) {
        matched++;
        done.add(new Resolved(new Held(request, publish, now), t.timings()));
      } else {
        Held previous = records.put(request.traceId(), new Held(request, publish, now));
        if (previous != null) {
          // A client reused a trace id: the older record cannot be told apart any more.
          missing++;
          done.add(new Resolved(previous, null));
        }
        if (records.size() > maxPending) {
          Iterator<Held> oldest = records.values().iterator();
          Held evicted = oldest.next();
          oldest.remove();
          evictedRecords++;
          missing++;
          done.add(new Resolved(evicted, null));
        }
      }
    }
    resolve(done);
  }

  /** An engine span arrived (from the OTLP receiver). */
  public void onEngineSpan(String traceId, EngineTimings engine) {
    List<Resolved> done = new ArrayList<>(1);
    synchronized (this) {
      received++;
      Held held = records.remove(traceId);
      if (held != null) {
        matched++;
        done.add(new Resolved(held, engine));
      } else {
        // Re-inserting moves a repeated trace id to the young end, with its newest timings.
        timings.remove(traceId);
        timings.put(traceId, new Timings(engine, ticker.getAsLong()));
        if (timings.size() > maxPending) {
          Iterator<Timings> oldest = timings.values().iterator();
          oldest.next();
          oldest.remove();
          evictedTimings++;
          unmatched++;
        }
      }
    }
    resolve(done);
  }

  /** Publishes records that waited {@code wait} as missing, and drops engine spans as old. */
  public void expire() {
    List<Resolved> done = new ArrayList<>();
    synchronized (this) {
      long now = ticker.getAsLong();
      Iterator<Held> r = records.values().iterator();
      while (r.hasNext()) {
        Held h = r.next();
        if (now - h.since() < waitNanos) {
          break;
        }
        r.remove();
        missing++;
        done.add(new Resolved(h, null));
      }
      Iterator<Timings> t = timings.values().iterator();
      while (t.hasNext()) {
        if (now - t.next().since() < waitNanos) {
          break;
        }
        t.remove();
        unmatched++;
      }
    }
    resolve(done);
  }

  /** Publishes every held record now, as missing (the proxy is closing). */
  public void flush() {
    List<Resolved> done = new ArrayList<>();
    synchronized (this) {
      for (Held h : records.values()) {
        missing++;
        done.add(new Resolved(h, null));
      }
      records.clear();
    }
    resolve(done);
  }

  private void resolve(List<Resolved> done) {
    for (Resolved r : done) {
      r.held().publish().accept(r.timings());
      for (Observer o : observers) {
        o.onEngine(r.held().request(), r.timings());
      }
    }
  }

  /** Counters since start, and what is held now. */
  public record Stats(
      long received,
      long matched,
      long missing,
      long unmatched,
      long evictedRecords,
      long evictedTimings,
      int heldRecords,
      int heldTimings) {
    /**
     * matched ÷ (matched + missing): the share of records that got their engine span; NaN before.
     */
    public double coverage() {
      long n = matched + missing;
      return n == 0 ? Double.NaN : (double) matched / n;
    }
  }

  public synchronized Stats stats() {
    return new Stats(
        received,
        matched,
        missing,
        unmatched,
        evictedRecords,
        evictedTimings,
        records.size(),
        timings.size());
  }

  /**
   * Registers {@code llm_engine_spans_total} by {@code result} ({@code matched}: a record got its
   * engine span; {@code missing}: a record was published without one; {@code unmatched}: an engine
   * span no record claimed in time), {@code llm_engine_spans_evicted_total} and {@code
   * llm_engine_spans_held} by {@code held} ({@code records}, {@code timings}).
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    String description = "Records matched with the engine's own span, or not";
    FunctionCounter.builder("llm.engine.spans", this, e -> e.stats().matched())
        .tag("result", "matched")
        .description(description)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans", this, e -> e.stats().missing())
        .tag("result", "missing")
        .description(description)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans", this, e -> e.stats().unmatched())
        .tag("result", "unmatched")
        .description(description)
        .register(registry);
    String evicted =
        "Held records or engine spans pushed out by telemetry.engine_spans.max_pending";
    FunctionCounter.builder("llm.engine.spans.evicted", this, e -> e.stats().evictedRecords())
        .tag("held", "records")
        .description(evicted)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans.evicted", this, e -> e.stats().evictedTimings())
        .tag("held", "timings")
        .description(evicted)
        .register(registry);
    String held = "Records waiting for their engine span, engine spans waiting for their record";
    Gauge.builder("llm.engine.spans.held", this, e -> e.stats().heldRecords())
        .tag("held", "records")
        .description(held)
        .register(registry);
    Gauge.builder("llm.engine.spans.held", this, e -> e.stats().heldTimings())
        .tag("held", "timings")
        .description(held)
        .register(registry);
  }

  /** How often {@link #expire()} should run: a tenth of the wait, between 10 ms and 1 s. */
  public long expireIntervalMillis() {
    return Math.max(10, Math.min(1_000, waitNanos / 10_000_000));
  }
}
