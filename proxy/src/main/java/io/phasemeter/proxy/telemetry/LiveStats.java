package io.phasemeter.proxy.telemetry;

import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;

/**
 * Feeds the rolling-window quantiles behind {@code /admin/stats} and {@code llm_budget_ratio}.
 * Latency quantiles are over successful requests only (DESIGN.md §2); series are named as budgets
 * name them: the phases, {@code gateway}, {@code unattributed}, {@code total}, {@code ttft}, {@code
 * tpot} and {@code itl}, and, when engine spans are matched, {@code engine_queue}, {@code prefill}
 * and {@code decode}.
 */
public final class LiveStats implements RequestObserver, EngineSpans.Observer {
  private final RollingQuantiles quantiles;

  public LiveStats(RollingQuantiles quantiles) {
    this.quantiles = quantiles;
  }

  public RollingQuantiles quantiles() {
    return quantiles;
  }

  @Override
  public void onFinished(RequestContext ctx) {
    String model = ctx.modelLabel();
    String pool = ctx.poolName() == null ? ProxyMetrics.NO_POOL : ctx.poolName();
    if (ctx.outcome() != Outcome.SUCCESS) {
      // Counted for the error rate; failures never enter the latency quantiles.
      quantiles.record(model, pool, "failed", ctx.rootNanos());
      return;
    }
    quantiles.record(model, pool, "total", ctx.rootNanos());
    if (ctx.serverTtftNanos() >= 0) {
      quantiles.record(model, pool, "ttft", ctx.serverTtftNanos());
    }
    if (ctx.tpotNanos() >= 0) {
      quantiles.record(model, pool, "tpot", ctx.tpotNanos());
    }
    long gateway = ProxyMetrics.gatewayNanos(ctx);
    if (gateway >= 0) {
      quantiles.record(model, pool, "gateway", gateway);
    }
    quantiles.record(model, pool, "unattributed", Math.max(0, ctx.unattributedNanos()));
    for (Phase p : Phase.values()) {
      long n = ctx.phaseNanos(p);
      if (n >= 0) {
        quantiles.record(model, pool, p.label(), n);
      }
    }
  }

  /** The engine's split of a successful generation (only successful records wait for one). */
  @Override
  public void onEngine(EngineSpans.Request request, EngineTimings timings) {
    if (timings == null) {
      return;
    }
    String pool = request.pool() == null ? ProxyMetrics.NO_POOL : request.pool();
    record(request.model(), pool, "engine_queue", timings.queueNanos());
    record(request.model(), pool, "prefill", timings.prefillNanos());
    record(request.model(), pool, "decode", timings.decodeNanos());
  }

  private void record(String model, String pool, String phase, long nanos) {
    if (nanos >= 0) {
      quantiles.record(model, pool, phase, nanos);
    }
  }

  @Override
  public void onInterTokenGap(RequestContext ctx, long gapNanos) {
    quantiles.record(ctx.modelLabel(), ctx.poolName(), "itl", gapNanos);
  }
}
