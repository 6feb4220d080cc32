package io.phasemeter.proxy.telemetry;

import io.micrometer.core.instrument.Clock;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.phasemeter.core.Phases;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.ApiRoute;
import io.phasemeter.proxy.pipeline.InFlight;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The Prometheus metrics of docs/design.md §4. Histograms are recorded while the request's span (or
 * the phase's span) is current, so each carries an exemplar pointing at its trace. Labels come only
 * from configuration: a model that no pool serves is {@code other}, a request that never reached a
 * pool is in pool {@code none}, a request of no allowlisted tenant is tenant {@code other}; the
 * number of series is bounded by the config, not the traffic.
 *
 * <p>{@code llm_tenant} is on the request duration, TTFT, TPOT and token metrics always, on {@code
 * llm_phase_duration_seconds} only when built with tenant phase histograms ({@code
 * tenants.phase_histograms}), and never on {@code llm_inter_token_latency_seconds}: a meter name
 * has one set of label keys (Prometheus, and Micrometer's registry, require it), so where the label
 * is, it is on every series, {@code other} included.
 *
 * <p>This class holds the registry and what is recorded per request; meters that read live state
 * (in flight, slots, upstreams, keys, engine spans, span export, budgets) are registered by the
 * component that owns the state, each a {@link io.micrometer.core.instrument.binder.MeterBinder}.
 */
public final class ProxyMetrics implements RequestObserver, EngineSpans.Observer, AutoCloseable {
  /** The pool label of a request that failed before routing. */
  public static final String NO_POOL = InFlight.NO_POOL;

  private final PrometheusMeterRegistry registry;
  private final BucketLayout layout;
  private final JvmGcMetrics gcMetrics = new JvmGcMetrics();
  private static final Phase[] PHASES = Phase.all();
  private static final Outcome[] OUTCOMES = Outcome.values();

  private final boolean tenantPhases;
  private final ByLabels<Series> byLabels = new ByLabels<>(Series::new);
  private final Counter droppedRecords;
  private final Counter feedSubscribersCut;

  private ProxyMetrics(
      PrometheusMeterRegistry registry, BucketLayout layout, boolean tenantPhases) {
    this.registry = registry;
    this.layout = layout;
    this.tenantPhases = tenantPhases;
    new JvmMemoryMetrics().bindTo(registry);
    gcMetrics.bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    new ClassLoaderMetrics().bindTo(registry);
    new ProcessorMetrics().bindTo(registry);
    new UptimeMetrics().bindTo(registry);
    this.droppedRecords = dropped("records");
    this.feedSubscribersCut =
        Counter.builder("llm.record.feed.subscribers.cut")
            .description(
                "Record feed subscribers cut for taking nothing within"
                    + " telemetry.records.feed_write_timeout")
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

  /**
   * A registry whose histograms take exemplars from the current OpenTelemetry span, with the
   * semantic-convention boundaries only (no budgets).
   */
  public static ProxyMetrics create() {
    return create(BucketLayout.semconv());
  }

  /**
   * A registry whose histograms have the boundaries of {@code layout} (the budgets' limits among
   * them) and take exemplars from the current OpenTelemetry span.
   */
  public static ProxyMetrics create(BucketLayout layout) {
    return create(layout, false);
  }

  /**
   * As {@link #create(BucketLayout)}; {@code tenantPhases} puts {@code llm_tenant} on {@code
   * llm_phase_duration_seconds} too ({@code tenants.phase_histograms}).
   */
  public static ProxyMetrics create(BucketLayout layout, boolean tenantPhases) {
    return new ProxyMetrics(
        new PrometheusMeterRegistry(
            OPEN_METRICS_1_0, new PrometheusRegistry(), Clock.SYSTEM, new OtelExemplarContext()),
        layout,
        tenantPhases);
  }

  /** Whether {@code llm_phase_duration_seconds} carries {@code llm_tenant}. */
  public boolean tenantPhases() {
    return tenantPhases;
  }

  /** The bucket boundaries the histograms were built with. */
  public BucketLayout layout() {
    return layout;
  }

  public PrometheusMeterRegistry registry() {
    return registry;
  }

  /** The engine's split of generation, recorded with the generation span as the exemplar. */
  @Override
  public void onEngine(EngineSpans.Request request, EngineTimings timings) {
    if (timings == null) {
      return;
    }
    Series series = byLabels.get(request.model(), request.pool(), request.tenant());
    OtelExemplarContext.recordingFor(request.generation());
    try {
      series.record(Series.ENGINE_QUEUE, timings.queueNanos());
      series.record(Series.PREFILL, timings.prefillNanos());
      series.record(Series.DECODE, timings.decodeNanos());
    } finally {
      OtelExemplarContext.done();
    }
  }

  /** Counts a record that a slow feed subscriber could not take. */
  public void recordDropped() {
    droppedRecords.increment();
  }

  /** Counts a feed subscriber cut for taking nothing within the feed's write timeout. */
  public void feedSubscriberCut() {
    feedSubscribersCut.increment();
  }

  @Override
  public void onFinished(RequestContext ctx) {
    if (!ctx.modelTraffic()) {
      passThrough(ctx);
      return;
    }
    Series series = byLabels.get(ctx.modelLabel(), ctx.poolName(), ctx.tenant());
    OtelExemplarContext.recordingFor(ctx.rootSpan().getSpanContext());
    try {
      series
          .request(ctx.route(), ctx.outcome(), ctx.streaming())
          .record(ctx.rootNanos(), TimeUnit.NANOSECONDS);
      if (ctx.serverTtftNanos() >= 0) {
        series.timer(Series.TTFT).record(ctx.serverTtftNanos(), TimeUnit.NANOSECONDS);
      }
      if (ctx.tpotNanos() >= 0) {
        series.timer(Series.TPOT).record(ctx.tpotNanos(), TimeUnit.NANOSECONDS);
      }
      series.record(Series.GATEWAY, gatewayNanos(ctx));
      series.record(Series.UNATTRIBUTED, ctx.unattributedNanos());
      for (Phase p : PHASES) {
        long nanos = ctx.phaseNanos(p);
        if (nanos >= 0) {
          OtelExemplarContext.recordingFor(ctx.phaseSpan(p));
          series.timer(p.ordinal()).record(nanos, TimeUnit.NANOSECONDS);
        }
      }
    } finally {
      OtelExemplarContext.done();
    }
    if (ctx.inputTokens() > 0) {
      series.tokens(Series.INPUT).increment(ctx.inputTokens());
    }
    if (ctx.outputTokens() > 0) {
      series.tokens(Series.OUTPUT).increment(ctx.outputTokens());
    }
  }

  @Override
  public void onInterTokenGap(RequestContext ctx, long gapNanos) {
    Timer itl = byLabels.get(ctx.modelLabel(), ctx.poolName(), ctx.tenant()).timer(Series.ITL);
    OtelExemplarContext.recordingFor(ctx.rootSpan().getSpanContext());
    try {
      itl.record(gapNanos, TimeUnit.NANOSECONDS);
    } finally {
      OtelExemplarContext.done();
    }
  }

  /**
   * A pass-through (or a background Responses request, answered at once): {@code
   * http.server.request.duration} by route (its pattern, or {@code other}), method, outcome and
   * pool, with the root span as exemplar. It stays out of the GenAI and phase histograms, which a
   * model's budgets judge; its phases are in its record and spans.
   */
  private void passThrough(RequestContext ctx) {
    String pool = ctx.poolName() == null ? NO_POOL : ctx.poolName();
    Timer t =
        passThroughTimers.computeIfAbsent(
            new PassKey(ctx.route().path(), ctx.method(), ctx.outcome(), pool),
            k ->
                registerTimer(
                    "http.server.request.duration",
                    BucketLayout.Metric.REQUEST,
                    "http.route",
                    k.route(),
                    "http.request.method",
                    k.method(),
                    "outcome",
                    k.outcome().label(),
                    "llm.pool",
                    k.pool()));
    OtelExemplarContext.recordingFor(ctx.rootSpan().getSpanContext());
    try {
      t.record(ctx.rootNanos(), TimeUnit.NANOSECONDS);
    } finally {
      OtelExemplarContext.done();
    }
  }

  // Every part of the key is bounded: routes by the table, methods by HTTP's list, outcomes by the
  // enum, pools by the configuration.
  private record PassKey(String route, String method, Outcome outcome, String pool) {}

  private final java.util.concurrent.ConcurrentMap<PassKey, Timer> passThroughTimers =
      new java.util.concurrent.ConcurrentHashMap<>();

  /** auth + prepare + route, or -1 when one of them did not run to its end. */
  public static long gatewayNanos(RequestContext ctx) {
    long auth = ctx.phaseNanos(Phase.AUTH);
    long prepare = ctx.phaseNanos(Phase.PREPARE);
    long route = ctx.phaseNanos(Phase.ROUTE);
    return auth < 0 || prepare < 0 || route < 0 ? -1 : auth + prepare + route;
  }

  /**
   * The meters of one (model, pool, tenant), looked up once per request: each is registered on
   * first use (a series appears when it has a value, as before) and then read from an array, so
   * recording builds no key and allocates nothing. The meters without {@code llm_tenant} (ITL, and
   * the phases unless tenant phase histograms are on) are the same for every tenant of a (model,
   * pool): registering returns the one meter.
   */
  private final class Series {
    // Slots 0 .. phases-1 are llm_phase_duration_seconds by phase; the rest follow.
    static final int GATEWAY = PHASES.length;
    static final int UNATTRIBUTED = GATEWAY + 1;
    static final int ENGINE_QUEUE = GATEWAY + 2;
    static final int PREFILL = GATEWAY + 3;
    static final int DECODE = GATEWAY + 4;
    static final int TTFT = GATEWAY + 5;
    static final int TPOT = GATEWAY + 6;
    static final int ITL = GATEWAY + 7;
    static final int TIMERS = GATEWAY + 8;
    static final int INPUT = 0;
    static final int OUTPUT = 1;

    private final String model;
    private final String pool;
    private final String tenant;
    private final AtomicReferenceArray<Timer> timers = new AtomicReferenceArray<>(TIMERS);
    // By operation (a handful, from the route table): by outcome and streaming.
    private final java.util.concurrent.ConcurrentMap<String, AtomicReferenceArray<Timer>> requests =
        new java.util.concurrent.ConcurrentHashMap<>();
    private final AtomicReferenceArray<Counter> tokens = new AtomicReferenceArray<>(2);

    Series(String model, String pool, String tenant) {
      this.model = model;
      this.pool = pool;
      this.tenant = tenant;
    }

    /** Records {@code nanos} in the timer of {@code slot} when it is a measurement (≥ 0). */
    void record(int slot, long nanos) {
      if (nanos >= 0) {
        timer(slot).record(nanos, TimeUnit.NANOSECONDS);
      }
    }

    Timer timer(int slot) {
      Timer t = timers.get(slot);
      if (t == null) {
        t = newTimer(slot);
        timers.set(slot, t);
      }
      return t;
    }

    /** {@code gen_ai.server.request.duration} for one operation, outcome and streaming. */
    Timer request(ApiRoute route, Outcome outcome, boolean streaming) {
      AtomicReferenceArray<Timer> byOutcome =
          requests.computeIfAbsent(
              route.operation(), op -> new AtomicReferenceArray<>(OUTCOMES.length * 2));
      int slot = outcome.ordinal() * 2 + (streaming ? 1 : 0);
      Timer t = byOutcome.get(slot);
      if (t == null) {
        t =
            registerTimer(
                "gen_ai.server.request.duration",
                BucketLayout.Metric.REQUEST,
                "gen_ai.operation.name",
                route.operation(),
                "gen_ai.request.model",
                model,
                "llm.pool",
                pool,
                "llm.tenant",
                tenant,
                "outcome",
                outcome.label(),
                "llm.streaming",
                Boolean.toString(streaming));
        byOutcome.set(slot, t);
      }
      return t;
    }

    Counter tokens(int type) {
      Counter c = tokens.get(type);
      if (c == null) {
        c =
            Counter.builder("llm.tokens")
                .tags(
                    "gen_ai.token.type",
                    type == INPUT ? "input" : "output",
                    "gen_ai.request.model",
                    model,
                    "llm.pool",
                    pool,
                    "llm.tenant",
                    tenant)
                .description("Tokens by type")
                .register(registry);
        tokens.set(type, c);
      }
      return c;
    }

    // Registering twice returns the same meter, so a race between two threads is harmless.
    private Timer newTimer(int slot) {
      if (slot < PHASES.length) {
        return phaseTimer(PHASES[slot].label());
      }
      if (slot == GATEWAY) {
        return phaseTimer(Phases.GATEWAY.key());
      } else if (slot == UNATTRIBUTED) {
        return phaseTimer(Phases.UNATTRIBUTED.key());
      } else if (slot == ENGINE_QUEUE) {
        return phaseTimer(Phases.ENGINE_QUEUE.key());
      } else if (slot == PREFILL) {
        return phaseTimer(Phases.PREFILL.key());
      } else if (slot == DECODE) {
        return phaseTimer(Phases.DECODE.key());
      } else if (slot == TTFT) {
        return registerTimer(
            "gen_ai.server.time_to_first_token",
            BucketLayout.Metric.TTFT,
            "gen_ai.request.model",
            model,
            "llm.pool",
            pool,
            "llm.tenant",
            tenant);
      } else if (slot == TPOT) {
        return registerTimer(
            "gen_ai.server.time_per_output_token",
            BucketLayout.Metric.TPOT,
            "gen_ai.request.model",
            model,
            "llm.pool",
            pool,
            "llm.tenant",
            tenant);
      } else if (slot == ITL) {
        return registerTimer(
            "llm.inter_token_latency",
            BucketLayout.Metric.ITL,
            "gen_ai.request.model",
            model,
            "llm.pool",
            pool);
      }
      throw new IllegalArgumentException("no timer in slot " + slot);
    }

    private Timer phaseTimer(String phase) {
      Duration[] boundaries = layout.boundaries(BucketLayout.Metric.PHASE, phase);
      String[] tags = {"llm.phase", phase, "gen_ai.request.model", model, "llm.pool", pool};
      if (tenantPhases) {
        tags = java.util.Arrays.copyOf(tags, tags.length + 2);
        tags[tags.length - 2] = "llm.tenant";
        tags[tags.length - 1] = tenant;
      }
      return registerTimer("llm.phase.duration", boundaries, tags);
    }
  }

  private Timer registerTimer(String name, BucketLayout.Metric metric, String... tags) {
    return registerTimer(name, layout.boundaries(metric, null), tags);
  }

  private Timer registerTimer(String name, Duration[] boundaries, String... tags) {
    return Timer.builder(name)
        .tags(tags)
        .serviceLevelObjectives(boundaries)
        .minimumExpectedValue(Duration.ofNanos(1))
        .maximumExpectedValue(Duration.ofHours(1))
        .register(registry);
  }

  private Counter dropped(String signal) {
    return Counter.builder("llm.telemetry.dropped")
        .tag("signal", signal)
        .description("Telemetry the proxy could not deliver (slow subscribers, full queues)")
        .register(registry);
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
