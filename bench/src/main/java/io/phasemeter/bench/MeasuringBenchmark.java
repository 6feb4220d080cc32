package io.phasemeter.bench;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.budget.ServerObjectives;
import io.phasemeter.proxy.budget.SloTracker;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import io.phasemeter.proxy.telemetry.ExportPolicy;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.PresetIdGenerator;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.phasemeter.proxy.telemetry.RecordFeed;
import io.phasemeter.proxy.telemetry.RecordStore;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What measuring costs one request, without the network's noise: {@code measured} runs a
 * non-streamed chat request's phases through the proxy's own OpenTelemetry SDK (default proxy.yaml:
 * every span recorded, no exporter, so the phase spans stay deferred and are dropped), its metrics
 * with exemplars, the record store ({@code records.max} 100,000) and the live stats, as {@code
 * bench/proxy.yaml} does; {@code unmeasured} runs the same phases as {@code telemetry.enabled:
 * false} does (a no-op tracer, no observers). The difference, in ns and in {@code
 * gc.alloc.rate.norm} bytes, is the measuring.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class MeasuringBenchmark {
  private ProxyTelemetry telemetry;
  private ProxyMetrics metrics;
  private RequestCycle measured;
  private RequestCycle measuredJudged;
  private RequestCycle unmeasured;
  private RequestCycle spansOnly;
  private RequestCycle spansLive;
  private RequestCycle spansExported;
  private RequestCycle metricsOnly;
  private RequestCycle recordsOnly;
  private RequestCycle statsOnly;

  @Setup
  public void setUp() {
    ProxyConfig.Telemetry t = ConfigLoader.defaults().telemetry();
    telemetry = ProxyTelemetry.create(t, Map.of(), "bench", NanoClock.system());
    metrics = ProxyMetrics.create();
    telemetry.bindTo(metrics.registry());
    RecordStore records =
        new RecordStore(
            t.records().max(),
            t.records().ttl(),
            RecordFeed.ofRecords(
                4096,
                t.records().feedWriteTimeout(),
                System::nanoTime,
                metrics::recordDropped,
                metrics::feedSubscriberCut),
            ExportPolicy.of(t.sampling()));
    LiveStats stats = new LiveStats(new RollingQuantiles(Duration.ofSeconds(10), 6, 4096));
    Tracer tracer = telemetry.openTelemetry().getTracer("phasemeter");
    SpanDeferral deferred = telemetry.spanDeferral();
    SpanDeferral exportEverything = PresetIdGenerator.deferral((failed, nanos, traceId) -> true);
    measured = new RequestCycle(tracer, deferred, metrics, records, stats);
    // Server-side goodput (issue 37): a budget whose objectives the request meets, as most do.
    Budgets budgets =
        Budgets.parse(
            "budgets:\n  - {name: chat, quantile: 0.95, window: 10m, max_error_rate: 0.01,"
                + " min_join_coverage: 0, slo_ms: {server_root: 6000, queue: 250, gateway: 60}}\n",
            "bench");
    ServerObjectives objectives = new ServerObjectives(budgets);
    SloTracker slo = new SloTracker(objectives, budgets.budgets().size(), NanoClock.system());
    slo.bindTo(metrics.registry());
    measuredJudged = new RequestCycle(tracer, deferred, objectives, metrics, records, stats, slo);
    spansOnly = new RequestCycle(tracer, deferred);
    spansLive = new RequestCycle(tracer);
    spansExported = new RequestCycle(tracer, exportEverything);
    metricsOnly = new RequestCycle(tracer, deferred, metrics);
    recordsOnly = new RequestCycle(tracer, deferred, records);
    statsOnly = new RequestCycle(tracer, deferred, stats);
    unmeasured = new RequestCycle(OpenTelemetry.noop().getTracer("phasemeter"));
  }

  @TearDown
  public void tearDown() {
    metrics.close();
    telemetry.close();
  }

  /** Full measurement: spans, metrics with exemplars, the record, live stats. */
  @Benchmark
  public RequestContext measured() {
    return measured.run();
  }

  /**
   * Full measurement and server-side goodput: each request judged against a budget's objectives
   * (met), counted in {@code llm_slo_requests_total} and the attainment window, its verdict on the
   * record and the root span. Its figure minus {@code measured}'s is the judgement's cost.
   */
  @Benchmark
  public RequestContext measuredJudged() {
    return measuredJudged.run();
  }

  /** {@code telemetry.enabled: false}: the same phases, nothing measured. */
  @Benchmark
  public RequestContext unmeasured() {
    return unmeasured.run();
  }

  // The parts, each alone with the spans (a request has no trace id without them): what each
  // costs is its figure minus spansOnly's.

  /**
   * The spans alone, as the proxy keeps them with its own SDK and nothing exported: the root an SDK
   * span, the phases deferred and dropped when the root ends.
   */
  @Benchmark
  public RequestContext spansOnly() {
    return spansOnly.run();
  }

  /**
   * The spans alone, every phase an SDK span from the start (an embedder's SDK; before 2026-11-30).
   */
  @Benchmark
  public RequestContext spansLive() {
    return spansLive.run();
  }

  /**
   * The spans alone, deferred and then built as SDK spans because the request is exported (what an
   * exported request costs; not the exporter, nor the export decision holding the children until
   * the root ends, since there is no exporter here).
   */
  @Benchmark
  public RequestContext spansExported() {
    return spansExported.run();
  }

  /** Spans and the Micrometer histograms with exemplars. */
  @Benchmark
  public RequestContext metricsOnly() {
    return metricsOnly.run();
  }

  /** Spans and the record store (records.max 100,000). */
  @Benchmark
  public RequestContext recordsOnly() {
    return recordsOnly.run();
  }

  /** Spans and the rolling quantiles of /admin/stats. */
  @Benchmark
  public RequestContext statsOnly() {
    return statsOnly.run();
  }
}
