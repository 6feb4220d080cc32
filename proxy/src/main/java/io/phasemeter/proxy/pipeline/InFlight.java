package io.phasemeter.proxy.pipeline;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Requests between headers parsed and root end: in all, and by the pool that serves them; requests
 * not yet routed (or refused before routing) count under {@link #NO_POOL}. The pipeline counts; the
 * counts are read by a drain and by {@code llm_requests_in_flight}.
 */
public final class InFlight implements MeterBinder {
  /** The pool label of a request that has no pool (yet). */
  public static final String NO_POOL = "none";

  private final AtomicInteger total = new AtomicInteger();
  private final AtomicInteger unrouted = new AtomicInteger();
  private final Map<String, AtomicInteger> byPool;

  /** Counts for the pools named {@code pools}, in that order. */
  public InFlight(List<String> pools) {
    Map<String, AtomicInteger> counts = new LinkedHashMap<>();
    for (String pool : pools) {
      counts.put(pool, new AtomicInteger());
    }
    this.byPool = Collections.unmodifiableMap(counts);
  }

  /** Every request in flight. */
  public AtomicInteger total() {
    return total;
  }

  /** Requests in flight that no pool serves yet. */
  public AtomicInteger unrouted() {
    return unrouted;
  }

  /** Requests in flight by the configured pool serving them, in config order. */
  public Map<String, AtomicInteger> byPool() {
    return byPool;
  }

  /** {@link #byPool()} and, under {@link #NO_POOL}, {@link #unrouted()}. */
  public Map<String, AtomicInteger> byPoolAndUnrouted() {
    Map<String, AtomicInteger> out = new LinkedHashMap<>(byPool);
    out.put(NO_POOL, unrouted);
    return out;
  }

  /** Registers {@code llm_requests_in_flight} by {@code llm_pool}, {@code none} included. */
  @Override
  public void bindTo(MeterRegistry registry) {
    byPoolAndUnrouted()
        .forEach(
            (pool, count) ->
                Gauge.builder("llm.requests.in_flight", count, AtomicInteger::get)
                    .tags("llm.pool", pool)
                    .strongReference(true)
                    .description("Requests between headers parsed and response end")
                    .register(registry));
  }
}
