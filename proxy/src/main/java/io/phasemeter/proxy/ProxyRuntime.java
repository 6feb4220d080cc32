package io.phasemeter.proxy;

import io.micrometer.core.instrument.binder.MeterBinder;
import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.admin.AdminServer;
import io.phasemeter.proxy.budget.BudgetTracker;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.budget.ServerObjectives;
import io.phasemeter.proxy.budget.SloTracker;
import io.phasemeter.proxy.budget.TenantBudgets;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.gateway.KeyStore;
import io.phasemeter.proxy.gateway.Limiter;
import io.phasemeter.proxy.gateway.RateLimiter;
import io.phasemeter.proxy.gateway.SharedLimiter;
import io.phasemeter.proxy.gateway.TenantAllowlist;
import io.phasemeter.proxy.pipeline.BodyBudget;
import io.phasemeter.proxy.pipeline.InFlight;
import io.phasemeter.proxy.pipeline.PipelineRuntime;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SloJudge;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import io.phasemeter.proxy.telemetry.ExportPolicy;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.phasemeter.proxy.telemetry.RecordFeed;
import io.phasemeter.proxy.telemetry.RecordStore;
import io.phasemeter.proxy.telemetry.RequestRecord;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.phasemeter.proxy.telemetry.TraceExportMeters;
import io.phasemeter.proxy.tls.UpstreamTls;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Everything the proxy serves requests with, built once from the config: telemetry, metrics, the
 * record store and live stats, budgets, keys and rate limits, and each pool's upstreams, slots and
 * in-flight count. Each component registers its own meters as it is built, and joins one close
 * list; {@link #close()} closes them in reverse order of creation. {@link #start()} begins the
 * periodic work (quantile rotation, engine span expiry, key reloads) once the listeners are up.
 */
final class ProxyRuntime implements PipelineRuntime {
  // The reload lines keep the logger they have always had.
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(PhasemeterProxy.class);

  /** Rolling quantiles advance in slices of this length. */
  static final Duration STATS_SLICE = Duration.ofSeconds(10);

  /** Records buffered per feed subscriber before they are dropped for it. */
  static final int FEED_BUFFER = 4096;

  private final CloseList closeList = new CloseList();
  private final Vertx vertx;
  private final ProxyConfig config;
  private final NanoClock clock;
  private final ProxyMetrics metrics;
  private final OpenTelemetry openTelemetry;
  private final SpanDeferral spanDeferral;
  private final RollingQuantiles quantiles;
  private final LiveStats stats;
  private final EngineSpans engine;
  private final RecordStore records;
  private final BudgetTracker tracker;
  private final SloJudge sloJudge;
  private final SloTracker sloTracker;
  private final List<RequestObserver> observers;
  private final KeyStore keys;
  private final Limiter limiter;
  private final InFlight inFlight;
  private final List<UpstreamPool> upstreamPools = new ArrayList<>();
  private final Map<String, SlotPool> slotPools = new LinkedHashMap<>();
  private final BodyBudget bodyBudget;

  private ProxyRuntime(Builder b) {
    this.vertx = b.vertx;
    this.config = b.config;
    this.clock = b.clock;
    Map<String, String> providerKeys = providerKeys(config, b.environment);
    // Every pool's TLS files read and checked before anything starts: a bad one is exit 2.
    Map<String, UpstreamTls> upstreamTls = new HashMap<>();
    for (ProxyConfig.Pool p : config.pools()) {
      upstreamTls.put(p.name(), UpstreamTls.of(vertx, p, java.time.Instant.now()));
    }
    try {
      ProxyConfig.Tenants tenants = config.tenants();
      this.metrics =
          b.metrics != null
              ? b.metrics
              : ProxyMetrics.create(b.budgets.bucketLayout(), tenants.phaseHistograms());
      if (!metrics.layout().covers(b.budgets.bucketLayout())) {
        // The alert rules name an le per limit: a histogram without it would never match.
        throw new IllegalArgumentException(
            "the metrics lack the budgets' bucket boundaries: build them with"
                + " ProxyMetrics.create(budgets.bucketLayout())");
      }
      if (metrics.tenantPhases() != tenants.phaseHistograms()) {
        throw new IllegalArgumentException(
            "the metrics disagree with tenants.phase_histograms: build them with"
                + " ProxyMetrics.create(layout, config.tenants().phaseHistograms())");
      }
      closeList.add("metrics", metrics::close);
      ProxyConfig.Telemetry t = config.telemetry();
      ProxyTelemetry telemetry = b.telemetry;
      if (!t.enabled()) {
        // telemetry.enabled: false exists to measure what measuring costs: nothing per request.
        this.openTelemetry = OpenTelemetry.noop();
        this.spanDeferral = null;
      } else if (b.openTelemetry != null) {
        this.openTelemetry = b.openTelemetry;
        this.spanDeferral = b.spanDeferral;
      } else {
        // Without an SDK there would be no trace ids: records and the join need them.
        telemetry = ProxyTelemetry.create(t, System.getenv(), PhasemeterProxy.version(), b.clock);
        closeList.add("telemetry", telemetry::close);
        this.openTelemetry = telemetry.openTelemetry();
        this.spanDeferral = telemetry.spanDeferral();
      }
      RecordFeed<RequestRecord> feed =
          RecordFeed.ofRecords(
              FEED_BUFFER,
              t.records().feedWriteTimeout(),
              clock::nanoTime,
              metrics::recordDropped,
              metrics::feedSubscriberCut);
      this.quantiles =
          new RollingQuantiles(
              STATS_SLICE, slices(b.budgets), 4096, BudgetTracker.limits(b.budgets));
      this.stats = new LiveStats(quantiles, BudgetTracker.tenantSeries(b.budgets));
      this.engine =
          bind(new EngineSpans(t.engineSpans(), clock::nanoTime, List.of(metrics, stats)));
      this.records =
          new RecordStore(
              t.records().max(), t.records().ttl(), feed, ExportPolicy.of(t.sampling()), engine);
      // One owner for the exported share: the proxy's own SDK when it has one, else the records.
      bind(telemetry != null ? TraceExportMeters.of(telemetry) : TraceExportMeters.of(records));
      this.tracker = bind(new BudgetTracker(b.budgets, quantiles));
      ServerObjectives objectives = new ServerObjectives(b.budgets);
      // Judged only where requests are measured: telemetry.enabled: false measures nothing.
      this.sloJudge = t.enabled() ? objectives : null;
      this.sloTracker = bind(new SloTracker(objectives, b.budgets.budgets().size(), clock));
      List<RequestObserver> all = new ArrayList<>();
      if (t.enabled()) {
        all.add(metrics);
        all.add(records);
        all.add(stats);
        all.add(sloTracker);
      }
      all.addAll(b.observers);
      this.observers = Collections.unmodifiableList(all);
      String budgetsSource = config.budgets() == null ? "budgets" : config.budgets();
      this.keys =
          config.auth().enabled()
              ? bind(
                  KeyStore.create(
                      Path.of(config.auth().keysFile()),
                      clock,
                      config.auth().cacheTtl(),
                      config.auth().cacheMax(),
                      java.util.concurrent.ForkJoinPool.commonPool(),
                      new TenantAllowlist.Rules(
                          tenants.names(), TenantBudgets.needed(b.budgets, budgetsSource))))
              : null;
      TenantBudgets.check(
          b.budgets,
          budgetsSource,
          keys != null ? keys.tenants() : TenantAllowlist.of(tenants.names()),
          tenants.phaseHistograms());
      ProxyConfig.SharedLimits shared = config.auth().sharedLimits();
      if (config.auth().enabled() && shared.enabled()) {
        SharedLimiter sharedLimiter =
            bind(new SharedLimiter(vertx, clock, shared, new RateLimiter(clock)));
        closeList.add("shared limits", sharedLimiter::close);
        sharedLimiter.warmUp();
        this.limiter = sharedLimiter;
      } else {
        this.limiter = Limiter.local(new RateLimiter(clock));
      }
      this.inFlight =
          bind(new InFlight(config.pools().stream().map(ProxyConfig.Pool::name).toList()));
      for (ProxyConfig.Pool p : config.pools()) {
        UpstreamPool upstreams =
            bind(
                new UpstreamPool(
                    vertx, p, clock, providerKeys.get(p.name()), upstreamTls.get(p.name())));
        closeList.addAsync("upstream pool " + p.name(), upstreams::close);
        upstreams.startHealthChecks();
        if (t.perUpstreamMetrics()) {
          upstreams.bindUpstreamsTo(metrics.registry());
        }
        upstreamPools.add(upstreams);
        SlotPool slots =
            bind(
                new SlotPool(
                    p.name(),
                    upstreams.configuredSlots(),
                    p.queue().max(),
                    p.queue().timeout(),
                    p.queue().maxOvertakes(),
                    vertx));
        // The pool admits what its available upstreams can run: an upstream ejected or down takes
        // its slots with it at once, and the excess waits in `queue`, not inside another engine.
        upstreams.onCapacityChange(slots::capacity);
        slotPools.put(p.name(), slots);
      }
      this.bodyBudget =
          bind(
              new BodyBudget(
                  config.limits().maxConcurrentUploads(),
                  config.limits().bufferedBodyBytesBound()));
    } catch (RuntimeException e) {
      closeList.close();
      throw e;
    }
  }

  /** Starts building a runtime for {@code config} on {@code vertx}. */
  static Builder builder(Vertx vertx, ProxyConfig config) {
    return new Builder(vertx, config);
  }

  /**
   * Begins the periodic work: quantile rotation, cutting stalled feed subscribers, engine span
   * expiry and key reloads. Its close step (the first to run) cancels them, publishes the records
   * still waiting for their engine span (as missing) and ends the record feed, so that subscribers
   * get every record before the listeners close.
   */
  void start() {
    closeList.addAsync(
        "record feed",
        () -> {
          engine.flush();
          return records.feed().close().timeout(5, TimeUnit.SECONDS).otherwiseEmpty();
        });
    List<Long> timers = new ArrayList<>();
    closeList.add("timers", () -> timers.forEach(vertx::cancelTimer));
    timers.add(vertx.setPeriodic(STATS_SLICE.toMillis(), id -> quantiles.rotate()));
    timers.add(
        vertx.setPeriodic(
            Math.max(1, records.feed().sweepInterval().toMillis()),
            id -> records.feed().cutStalled()));
    if (engine.enabled()) {
      timers.add(vertx.setPeriodic(engine.expireIntervalMillis(), id -> engine.expire()));
    }
    if (keys != null) {
      AtomicReference<String> lastError = new AtomicReference<>();
      timers.add(
          vertx.setPeriodic(
              config.auth().reloadInterval().toMillis(),
              id ->
                  vertx
                      .executeBlocking(keys::reloadIfChanged, false)
                      .onSuccess(r -> logReload(r, config.auth().keysFile(), lastError))));
    }
  }

  /** Adds a step to the close list: it runs before everything added earlier. */
  void onClose(String name, Supplier<Future<?>> close) {
    closeList.addAsync(name, close);
  }

  /** Closes everything, last built first; every step runs even if one before it failed. */
  Future<Void> close() {
    return closeList.close();
  }

  /** What the admin listener reads: the registry, records, live stats, budgets, engine spans. */
  AdminServer.Sources adminSources(BooleanSupplier ready) {
    return new AdminServer.Sources(
        metrics.registry(),
        records,
        quantiles,
        tracker::status,
        sloTracker::status,
        ready,
        engine,
        config.telemetry().engineSpans(),
        this::upstreamConnections);
  }

  /**
   * How each upstream's connections are used ({@code connections.reuse}, {@code preconnect}), for
   * {@code /admin/stats}.
   */
  private io.vertx.core.json.JsonArray upstreamConnections() {
    io.vertx.core.json.JsonArray all = new io.vertx.core.json.JsonArray();
    for (UpstreamPool p : upstreamPools) {
      for (UpstreamPool.ReuseState r : p.reuseStates()) {
        all.add(
            new io.vertx.core.json.JsonObject()
                .put("pool", r.pool())
                .put("upstream", r.upstream())
                .put("reuse", r.reuse())
                .put("closes_after_responses", r.closesAfterResponses())
                .put("closed_after_response", r.closedAfterResponse())
                .put("single_use", r.singleUse())
                .put("spares", r.spares()));
      }
    }
    return all;
  }

  /** The close steps still to run, in the order {@link #close()} runs them. */
  List<String> closeSteps() {
    return closeList.names();
  }

  ProxyMetrics metrics() {
    return metrics;
  }

  RecordStore records() {
    return records;
  }

  LiveStats stats() {
    return stats;
  }

  EngineSpans engineSpans() {
    return engine;
  }

  @Override
  public Vertx vertx() {
    return vertx;
  }

  @Override
  public ProxyConfig config() {
    return config;
  }

  @Override
  public NanoClock clock() {
    return clock;
  }

  @Override
  public OpenTelemetry openTelemetry() {
    return openTelemetry;
  }

  @Override
  public SpanDeferral spanDeferral() {
    return spanDeferral;
  }

  @Override
  public List<RequestObserver> observers() {
    return observers;
  }

  @Override
  public KeyStore keys() {
    return keys;
  }

  @Override
  public Limiter limiter() {
    return limiter;
  }

  @Override
  public List<UpstreamPool> upstreamPools() {
    return Collections.unmodifiableList(upstreamPools);
  }

  @Override
  public Map<String, SlotPool> slotPools() {
    return Collections.unmodifiableMap(slotPools);
  }

  @Override
  public InFlight inFlight() {
    return inFlight;
  }

  @Override
  public BodyBudget bodyBudget() {
    return bodyBudget;
  }

  @Override
  public SloJudge sloJudge() {
    return sloJudge;
  }

  private <T extends MeterBinder> T bind(T component) {
    component.bindTo(metrics.registry());
    return component;
  }

  /** Slices enough for the longest budget window, and at least a minute. */
  private static int slices(Budgets budgets) {
    Duration longest = BudgetTracker.longestWindow(budgets);
    return (int)
        Math.max(6, (longest.toNanos() + STATS_SLICE.toNanos() - 1) / STATS_SLICE.toNanos());
  }

  /** The provider credential of each pool with an {@code api_key_env}, read from {@code env}. */
  private static Map<String, String> providerKeys(ProxyConfig config, Map<String, String> env) {
    Map<String, String> keys = new HashMap<>();
    for (ProxyConfig.Pool p : config.pools()) {
      if (p.apiKeyEnv() != null) {
        String key = env.get(p.apiKeyEnv());
        if (key == null || key.isBlank()) {
          throw new ConfigException(
              "pools["
                  + config.pools().indexOf(p)
                  + "].api_key_env: the environment variable "
                  + p.apiKeyEnv()
                  + " is not set (pool '"
                  + p.name()
                  + "' needs it for its upstream)");
        }
        keys.put(p.name(), key.trim());
      }
    }
    return keys;
  }

  /** Logs a reload that changed something; the same failure (a missing file) only once. */
  private static void logReload(
      KeyStore.ReloadResult r, String file, AtomicReference<String> last) {
    String error = r.error().orElse(null);
    if (r.status() != KeyStore.ReloadStatus.FAILED) {
      last.set(null);
    }
    if (r.status() == KeyStore.ReloadStatus.RELOADED) {
      LOG.info("keys file {} reloaded: {} keys", file, r.keys());
    } else if (r.status() == KeyStore.ReloadStatus.FAILED
        && !Objects.equals(last.getAndSet(error), error)) {
      LOG.warn(
          "keys file {} not reloaded, the previous {} keys stay: {}",
          file,
          r.keys(),
          r.error().orElse("unknown error"));
    }
  }

  /** The runtime's collaborators, as {@link PhasemeterProxy.Builder} collects them. */
  static final class Builder {
    private final Vertx vertx;
    private final ProxyConfig config;
    private OpenTelemetry openTelemetry;
    private SpanDeferral spanDeferral;
    private ProxyTelemetry telemetry;
    private NanoClock clock = NanoClock.system();
    private ProxyMetrics metrics;
    private Budgets budgets = new Budgets(List.of());
    private final List<RequestObserver> observers = new ArrayList<>();
    private Map<String, String> environment = System.getenv();

    private Builder(Vertx vertx, ProxyConfig config) {
      this.vertx = Objects.requireNonNull(vertx);
      this.config = Objects.requireNonNull(config);
    }

    Builder openTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry);
      this.spanDeferral = null;
      this.telemetry = null;
      return this;
    }

    Builder spanDeferral(SpanDeferral deferral) {
      this.spanDeferral = Objects.requireNonNull(deferral);
      return this;
    }

    Builder telemetry(ProxyTelemetry telemetry) {
      this.telemetry = Objects.requireNonNull(telemetry);
      this.openTelemetry = telemetry.openTelemetry();
      this.spanDeferral = telemetry.spanDeferral();
      return this;
    }

    Builder clock(NanoClock clock) {
      this.clock = Objects.requireNonNull(clock);
      return this;
    }

    Builder metrics(ProxyMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics);
      return this;
    }

    Builder budgets(Budgets budgets) {
      this.budgets = Objects.requireNonNull(budgets);
      return this;
    }

    Builder environment(Map<String, String> environment) {
      this.environment = Map.copyOf(environment);
      return this;
    }

    Builder observer(RequestObserver observer) {
      observers.add(Objects.requireNonNull(observer));
      return this;
    }

    /**
     * Builds every component; a failure (a missing provider key, a bad keys file, a bad {@code
     * OTEL_*} variable) closes what was built and is thrown.
     */
    ProxyRuntime build() {
      return new ProxyRuntime(this);
    }
  }
}
