package io.phasemeter.proxy.telemetry;

import io.phasemeter.core.Phases;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Feeds the rolling-window quantiles behind {@code /admin/stats} and {@code llm_budget_ratio}.
 * Latency quantiles are over successful requests only (docs/design.md §2); series are named as
 * budgets name them: the phases, {@code gateway}, {@code unattributed}, {@code total}, {@code
 * ttft}, {@code tpot} and {@code itl}, and, when engine spans are matched, {@code engine_queue},
 * {@code prefill} and {@code decode}.
 *
 * <p>A series is kept per tenant only where a budget of one tenant reads it ({@code tenantSeries});
 * every other is kept for all tenants together ({@link RollingQuantiles.Key#ANY_TENANT}), so
 * tenants cost memory only for what is judged per tenant.
 */
public final class LiveStats implements RequestObserver, EngineSpans.Observer {
  /** The series failed requests are counted in (for the error rate); it is no phase. */
  public static final String FAILED_SERIES = "failed";

  private static final Phase[] PHASES = Phase.all();
  // Series slots after the phases (0 .. phases-1).
  // Named as budgets name them: "ttft" and "total" are the budget file's names for server_ttft and
  // server_root. "failed" is no phase: the series failed requests are counted in.
  private static final String[] EXTRA = {
    FAILED_SERIES,
    Phases.TOTAL.key(),
    Phases.TTFT.key(),
    Phases.TPOT.key(),
    Phases.GATEWAY.key(),
    Phases.UNATTRIBUTED.key(),
    Phases.ITL.key(),
    Phases.ENGINE_QUEUE.key(),
    Phases.PREFILL.key(),
    Phases.DECODE.key()
  };
  private static final int FAILED = PHASES.length;
  private static final int TOTAL = FAILED + 1;
  private static final int TTFT = FAILED + 2;
  private static final int TPOT = FAILED + 3;
  private static final int GATEWAY = FAILED + 4;
  private static final int UNATTRIBUTED = FAILED + 5;
  private static final int ITL = FAILED + 6;
  private static final int ENGINE_QUEUE = FAILED + 7;
  private static final int PREFILL = FAILED + 8;
  private static final int DECODE = FAILED + 9;

  private final RollingQuantiles quantiles;
  private final ByLabels<Series> byLabels = new ByLabels<>(Series::new);
  // Per slot: whether it is kept per tenant.
  private final boolean[] perTenant = new boolean[PHASES.length + EXTRA.length];
  private final boolean anyPerTenant;

  /** Live stats with every series kept for all tenants together. */
  public LiveStats(RollingQuantiles quantiles) {
    this(quantiles, java.util.Set.of());
  }

  /**
   * @param tenantSeries the series kept per tenant, named as budgets name them (and {@link
   *     #FAILED_SERIES})
   */
  public LiveStats(RollingQuantiles quantiles, java.util.Set<String> tenantSeries) {
    this.quantiles = quantiles;
    boolean any = false;
    for (int slot = 0; slot < perTenant.length; slot++) {
      perTenant[slot] = tenantSeries.contains(name(slot));
      any |= perTenant[slot];
    }
    this.anyPerTenant = any;
  }

  private static String name(int slot) {
    return slot < PHASES.length ? PHASES[slot].label() : EXTRA[slot - PHASES.length];
  }

  private Series series(String model, String pool, String tenant) {
    return byLabels.get(model, pool, anyPerTenant ? tenant : RollingQuantiles.Key.ANY_TENANT);
  }

  public RollingQuantiles quantiles() {
    return quantiles;
  }

  @Override
  public void onFinished(RequestContext ctx) {
    if (!ctx.modelTraffic()) {
      // A pass-through (tokenize, audio, a stored response) is not what a model's budgets judge.
      return;
    }
    Series s = series(ctx.modelLabel(), ctx.poolName(), ctx.tenant());
    if (ctx.outcome() != Outcome.SUCCESS) {
      // Counted for the error rate; failures never enter the latency quantiles.
      s.record(FAILED, ctx.rootNanos());
      return;
    }
    s.record(TOTAL, ctx.rootNanos());
    s.record(TTFT, ctx.serverTtftNanos());
    s.record(TPOT, ctx.tpotNanos());
    s.record(GATEWAY, ProxyMetrics.gatewayNanos(ctx));
    s.record(UNATTRIBUTED, Math.max(0, ctx.unattributedNanos()));
    for (int i = 0; i < PHASES.length; i++) {
      s.record(i, ctx.phaseNanos(PHASES[i]));
    }
  }

  /** The engine's split of a successful generation (only successful records wait for one). */
  @Override
  public void onEngine(EngineSpans.Request request, EngineTimings timings) {
    if (timings == null) {
      return;
    }
    Series s = series(request.model(), request.pool(), request.tenant());
    s.record(ENGINE_QUEUE, timings.queueNanos());
    s.record(PREFILL, timings.prefillNanos());
    s.record(DECODE, timings.decodeNanos());
  }

  @Override
  public void onInterTokenGap(RequestContext ctx, long gapNanos) {
    series(ctx.modelLabel(), ctx.poolName(), ctx.tenant()).record(ITL, gapNanos);
  }

  /**
   * The rolling series of one (model, pool, tenant), named as budgets name them, resolved on first
   * use and then recorded into without a lookup; a slot not kept per tenant resolves to the series
   * of every tenant, which all tenants of the (model, pool) share.
   */
  private final class Series {
    private final String model;
    private final String pool;
    private final String tenant;
    private final AtomicReferenceArray<RollingQuantiles.Series> slots =
        new AtomicReferenceArray<>(PHASES.length + EXTRA.length);

    Series(String model, String pool, String tenant) {
      this.model = model;
      this.pool = pool;
      this.tenant = tenant;
    }

    /** Records {@code nanos} when it is a measurement (≥ 0). */
    void record(int slot, long nanos) {
      if (nanos < 0) {
        return;
      }
      RollingQuantiles.Series s = slots.get(slot);
      if (s == null) {
        s =
            quantiles.series(
                new RollingQuantiles.Key(
                    model,
                    pool,
                    perTenant[slot] ? tenant : RollingQuantiles.Key.ANY_TENANT,
                    name(slot)));
        if (s == null) {
          return; // the bound on series is reached; not cached, so a later series may fit
        }
        slots.set(slot, s);
      }
      s.record(nanos);
    }
  }
}
