package io.phasemeter.proxy.telemetry;

import io.micrometer.core.instrument.Clock;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.phasemeter.proxy.upstream.UpstreamHost;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;

/**
 * The Prometheus metrics of DESIGN.md §4. Histograms are recorded while the request's span (or the
 * phase's span) is current, so each carries an exemplar pointing at its trace. Labels come only
 * from configuration: a model that no pool serves is {@code other}, a request that never reached a
 * pool is in pool {@code none}; the number of series is bounded by the config, not the traffic.
 */
public final class ProxyMetrics implements RequestObserver, EngineSpans.Observer, AutoCloseable {
  /** The pool label of a request that failed before routing. */
  public static final String NO_POOL = "none";

  private final PrometheusMeterRegistry registry;
  private final JvmGcMetrics gcMetrics = new JvmGcMetrics();
  private final java.util.concurrent.atomic.AtomicReference<DoubleSupplier> exportedRatio =
      new java.util.concurrent.atomic.AtomicReference<>();
  private final java.util.List<Object> sources = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final Map<String, Timer> timers = new ConcurrentHashMap<>();
  private final Map<String, Counter> counters = new ConcurrentHashMap<>();
  private final Counter droppedRecords;
  private final java.util.concurrent.atomic.AtomicReference<java.util.function.LongSupplier>
      spanDrops = new java.util.concurrent.atomic.AtomicReference<>(() -> 0L);

  private ProxyMetrics(PrometheusMeterRegistry registry) {
    this.registry = registry;
    new JvmMemoryMetrics().bindTo(registry);
    gcMetrics.bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    new ClassLoaderMetrics().bindTo(registry);
    new ProcessorMetrics().bindTo(registry);
    new UptimeMetrics().bindTo(registry);
    this.droppedRecords = dropped("records");
    FunctionCounter.builder("llm.telemetry.dropped", spanDrops, r -> (double) r.get().getAsLong())
        .tag("signal", "spans")
        .description("Telemetry the proxy could not deliver (slow subscribers, full queues)")
        .register(registry);
  }

  /**
   * Exemplars only where OpenMetrics 1.0 allows them (histogram buckets, counter totals).
   * Micrometer's default also puts them on {@code _count}, which Prometheus 2.x refuses: the whole
   * scrape fails with "does not support exemplars".
   */
  private static final PrometheusConfig OPEN_METRICS_1_0 =
      new PrometheusConfig() {
        @Override
        public String get(String key) {
          return null;
        }

        @Override
        public java.util.Properties prometheusProperties() {
          java.util.Properties p = new java.util.Properties();
          p.setProperty("io.prometheus.exporter.exemplarsOnAllMetricTypes", "false");
          return p;
        }
      };

  /** A registry whose histograms take exemplars from the current OpenTelemetry span. */
  public static ProxyMetrics create() {
    return new ProxyMetrics(
        new PrometheusMeterRegistry(
            OPEN_METRICS_1_0, new PrometheusRegistry(), Clock.SYSTEM, new OtelExemplarContext()));
  }

  public PrometheusMeterRegistry registry() {
    return registry;
  }

  /** Gauges that read live state: requests in flight and, per pool, queue and slots. */
  public void bindPipeline(
      Map<String, java.util.concurrent.atomic.AtomicInteger> inFlightByPool,
      Map<String, SlotPool> pools) {
    inFlightByPool.forEach(
        (pool, count) ->
            Gauge.builder(
                    "llm.requests.in_flight", count, java.util.concurrent.atomic.AtomicInteger::get)
                .tags("llm.pool", pool)
                .strongReference(true)
                .description("Requests between headers parsed and response end")
                .register(registry));
    for (SlotPool p : pools.values()) {
      Tags pool = Tags.of("llm.pool", p.name());
      Gauge.builder("llm.queue.depth", p, SlotPool::queueDepth)
          .tags(pool)
          .description("Requests waiting for a slot")
          .register(registry);
      Gauge.builder("llm.slots.in_use", p, SlotPool::inUse)
          .tags(pool)
          .description("Upstream requests running")
          .register(registry);
      Gauge.builder("llm.slots.capacity", p, SlotPool::capacity)
          .tags(pool)
          .description("Configured slots")
          .register(registry);
    }
  }

  /**
   * Upstream health per pool: {@code llm_upstreams_available}, {@code llm_upstreams_configured},
   * {@code llm_upstream_ejections_total} and {@code llm_upstream_retries_total}; with {@code
   * perUpstream} also {@code llm_upstream_available} and {@code llm_upstream_in_flight} labelled by
   * {@code upstream} (one series per configured upstream; off by default).
   */
  public void bindUpstreams(List<UpstreamPool> pools, boolean perUpstream) {
    for (UpstreamPool p : pools) {
      Tags pool = Tags.of("llm.pool", p.config().name());
      Gauge.builder("llm.upstreams.available", p, UpstreamPool::availableCount)
          .tags(pool)
          .strongReference(true)
          .description("Upstreams healthy and not ejected")
          .register(registry);
      Gauge.builder("llm.upstreams.configured", p, x -> x.hosts().size())
          .tags(pool)
          .strongReference(true)
          .description("Configured upstreams")
          .register(registry);
      FunctionCounter.builder("llm.upstream.ejections", p, UpstreamPool::ejections)
          .tags(pool)
          .description("Upstreams ejected after connection failures in a row")
          .register(registry);
      FunctionCounter.builder("llm.upstream.retries", p, UpstreamPool::retries)
          .tags(pool)
          .description("Requests retried on another upstream before any byte reached the client")
          .register(registry);
      if (perUpstream) {
        for (UpstreamHost h : p.hosts()) {
          Tags tags = pool.and("upstream", h.address().authority());
          Gauge.builder("llm.upstream.available", h, x -> p.isAvailable(x) ? 1 : 0)
              .tags(tags)
              .strongReference(true)
              .description("1 when the upstream is healthy and not ejected")
              .register(registry);
          Gauge.builder("llm.upstream.in_flight", h, UpstreamHost::inFlight)
              .tags(tags)
              .strongReference(true)
              .description("Requests running on the upstream")
              .register(registry);
        }
      }
    }
  }

  /**
   * The keys file: {@code llm_auth_keys} (keys accepted now) and {@code llm_auth_reloads_total} by
   * {@code result} ({@code reloaded}, {@code failed}: a bad file, the previous keys stay).
   */
  public void bindKeys(io.phasemeter.proxy.gateway.KeyStore keys) {
    Gauge.builder("llm.auth.keys", keys, k -> k.stats().keys())
        .strongReference(true)
        .description("API keys accepted now")
        .register(registry);
    FunctionCounter.builder("llm.auth.reloads", keys, k -> k.stats().reloads())
        .tags("result", "reloaded")
        .description("Keys file reloads")
        .register(registry);
    FunctionCounter.builder("llm.auth.reloads", keys, k -> k.stats().failedReloads())
        .tags("result", "failed")
        .description("Keys file reloads")
        .register(registry);
  }

  /** The share of finished requests whose traces were exported. */
  public void bindExportedRatio(DoubleSupplier ratio) {
    exportedRatio.compareAndSet(null, ratio);
    Gauge.builder(
            "llm.traces.exported.ratio",
            exportedRatio,
            r -> r.get() == null ? Double.NaN : r.get().getAsDouble())
        .strongReference(true)
        .description("Share of finished requests whose traces were exported")
        .register(registry);
  }

  /**
   * The engine's own spans: {@code llm_engine_spans_total} by {@code result} ({@code matched}: a
   * record got its engine span; {@code missing}: a record was published without one; {@code
   * unmatched}: an engine span no record claimed in time), {@code llm_engine_spans_evicted_total}
   * and {@code llm_engine_spans_held} by {@code held} ({@code records}, {@code timings}).
   */
  public void bindEngineSpans(EngineSpans engine) {
    sources.add(engine);
    String description = "Records matched with the engine's own span, or not";
    FunctionCounter.builder("llm.engine.spans", engine, e -> e.stats().matched())
        .tag("result", "matched")
        .description(description)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans", engine, e -> e.stats().missing())
        .tag("result", "missing")
        .description(description)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans", engine, e -> e.stats().unmatched())
        .tag("result", "unmatched")
        .description(description)
        .register(registry);
    FunctionCounter.builder("llm.engine.spans.evicted", engine, e -> e.stats().evictedRecords())
        .tag("held", "records")
        .description(
            "Held records or engine spans pushed out by telemetry.engine_spans.max_pending")
        .register(registry);
    FunctionCounter.builder("llm.engine.spans.evicted", engine, e -> e.stats().evictedTimings())
        .tag("held", "timings")
        .description(
            "Held records or engine spans pushed out by telemetry.engine_spans.max_pending")
        .register(registry);
    Gauge.builder("llm.engine.spans.held", engine, e -> e.stats().heldRecords())
        .tag("held", "records")
        .description("Records waiting for their engine span, engine spans waiting for their record")
        .register(registry);
    Gauge.builder("llm.engine.spans.held", engine, e -> e.stats().heldTimings())
        .tag("held", "timings")
        .description("Records waiting for their engine span, engine spans waiting for their record")
        .register(registry);
  }

  /** The engine's split of generation, recorded with the generation span as the exemplar. */
  @Override
  public void onEngine(EngineSpans.Request request, EngineTimings timings) {
    if (timings == null) {
      return;
    }
    String pool = request.pool() == null ? NO_POOL : request.pool();
    try (Scope s = Span.wrap(request.generation()).makeCurrent()) {
      engineTimer("engine_queue", request.model(), pool, timings.queueNanos());
      engineTimer("prefill", request.model(), pool, timings.prefillNanos());
      engineTimer("decode", request.model(), pool, timings.decodeNanos());
    }
  }

  private void engineTimer(String phase, String model, String pool, long nanos) {
    if (nanos >= 0) {
      phaseTimer(phase, model, pool).record(nanos, TimeUnit.NANOSECONDS);
    }
  }

  /** Counts a record that a slow feed subscriber could not take. */
  public void recordDropped() {
    droppedRecords.increment();
  }

  /**
   * Publishes span export health: spans dropped (queue full, export failed, orphaned), the export
   * queue's size, export calls and the time spent in them, and the share of traces exported.
   */
  public void bindSpanExport(
      java.util.function.LongSupplier dropped,
      java.util.function.LongSupplier queueSize,
      java.util.function.LongSupplier exports,
      DoubleSupplier exportSeconds,
      DoubleSupplier exportedRatio) {
    spanDrops.set(dropped);
    Gauge.builder("llm.telemetry.span_queue.size", queueSize, q -> (double) q.getAsLong())
        .description("Spans waiting to be exported")
        .strongReference(true)
        .register(registry);
    FunctionCounter.builder("llm.telemetry.exports", exports, e -> (double) e.getAsLong())
        .description("Span export calls finished")
        .register(registry);
    FunctionCounter.builder(
            "llm.telemetry.export.duration.seconds", exportSeconds, DoubleSupplier::getAsDouble)
        .description("Time spent exporting spans")
        .register(registry);
    // Function counters hold their source weakly: keep the suppliers reachable.
    sources.add(exports);
    sources.add(exportSeconds);
    this.exportedRatio.set(exportedRatio);
  }

  @Override
  public void onFinished(RequestContext ctx) {
    String model = ctx.modelLabel();
    String pool = ctx.poolName() == null ? NO_POOL : ctx.poolName();
    try (Scope root = ctx.rootSpan().makeCurrent()) {
      timer(
              "gen_ai.server.request.duration",
              Buckets.REQUEST,
              "gen_ai.operation.name",
              ctx.route().operation(),
              "gen_ai.request.model",
              model,
              "llm.pool",
              pool,
              "outcome",
              ctx.outcome().label(),
              "llm.streaming",
              Boolean.toString(ctx.streaming()))
          .record(ctx.rootNanos(), TimeUnit.NANOSECONDS);
      if (ctx.serverTtftNanos() >= 0) {
        timer(
                "gen_ai.server.time_to_first_token",
                Buckets.TTFT,
                "gen_ai.request.model",
                model,
                "llm.pool",
                pool)
            .record(ctx.serverTtftNanos(), TimeUnit.NANOSECONDS);
      }
      if (ctx.tpotNanos() >= 0) {
        timer(
                "gen_ai.server.time_per_output_token",
                Buckets.TPOT,
                "gen_ai.request.model",
                model,
                "llm.pool",
                pool)
            .record(ctx.tpotNanos(), TimeUnit.NANOSECONDS);
      }
      long gateway = gatewayNanos(ctx);
      if (gateway >= 0) {
        phaseTimer("gateway", model, pool).record(gateway, TimeUnit.NANOSECONDS);
      }
      long unattributed = ctx.unattributedNanos();
      if (unattributed >= 0) {
        phaseTimer("unattributed", model, pool).record(unattributed, TimeUnit.NANOSECONDS);
      }
    }
    for (Phase p : Phase.values()) {
      long nanos = ctx.phaseNanos(p);
      if (nanos < 0) {
        continue;
      }
      Span span = ctx.phaseSpan(p);
      try (Scope s = span.makeCurrent()) {
        phaseTimer(p.label(), model, pool).record(nanos, TimeUnit.NANOSECONDS);
      }
    }
    if (ctx.inputTokens() > 0) {
      tokens("input", model, pool).increment(ctx.inputTokens());
    }
    if (ctx.outputTokens() > 0) {
      tokens("output", model, pool).increment(ctx.outputTokens());
    }
  }

  @Override
  public void onInterTokenGap(RequestContext ctx, long gapNanos) {
    try (Scope s = ctx.rootSpan().makeCurrent()) {
      timer(
              "llm.inter_token_latency",
              Buckets.ITL,
              "gen_ai.request.model",
              ctx.modelLabel(),
              "llm.pool",
              ctx.poolName())
          .record(gapNanos, TimeUnit.NANOSECONDS);
    }
  }

  /** auth + prepare + route, or -1 when one of them did not run to its end. */
  public static long gatewayNanos(RequestContext ctx) {
    long auth = ctx.phaseNanos(Phase.AUTH);
    long prepare = ctx.phaseNanos(Phase.PREPARE);
    long route = ctx.phaseNanos(Phase.ROUTE);
    return auth < 0 || prepare < 0 || route < 0 ? -1 : auth + prepare + route;
  }

  private Timer phaseTimer(String phase, String model, String pool) {
    return timer(
        "llm.phase.duration",
        Buckets.PHASE,
        "llm.phase",
        phase,
        "gen_ai.request.model",
        model,
        "llm.pool",
        pool);
  }

  private Timer timer(String name, double[] buckets, String... tags) {
    String key = key(name, tags);
    Timer t = timers.get(key);
    if (t == null) {
      t =
          timers.computeIfAbsent(
              key,
              k ->
                  Timer.builder(name)
                      .tags(tags)
                      .serviceLevelObjectives(Buckets.durations(buckets))
                      .minimumExpectedValue(Duration.ofNanos(1))
                      .maximumExpectedValue(Duration.ofHours(1))
                      .register(registry));
    }
    return t;
  }

  private Counter tokens(String type, String model, String pool) {
    String key = key("llm.tokens", "gen_ai.token.type", type, "m", model, "p", pool);
    return counters.computeIfAbsent(
        key,
        k ->
            Counter.builder("llm.tokens")
                .tags("gen_ai.token.type", type, "gen_ai.request.model", model, "llm.pool", pool)
                .description("Tokens by type")
                .register(registry));
  }

  private Counter dropped(String signal) {
    return Counter.builder("llm.telemetry.dropped")
        .tag("signal", signal)
        .description("Telemetry the proxy could not deliver (slow subscribers, full queues)")
        .register(registry);
  }

  private static String key(String name, String... tags) {
    StringBuilder sb = new StringBuilder(name);
    for (String t : tags) {
      sb.append('\u0000').append(t);
    }
    return sb.toString();
  }

  /** The number of meters (series groups) registered; tests check it stays bounded. */
  public int meterCount() {
    return registry.getMeters().size();
  }

  @Override
  public void close() {
    gcMetrics.close();
    registry.close();
  }
}
