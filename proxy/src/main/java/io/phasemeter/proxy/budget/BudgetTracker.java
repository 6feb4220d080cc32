package io.phasemeter.proxy.budget;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.Phases;
import io.phasemeter.proxy.telemetry.LiveStats;
import io.phasemeter.proxy.telemetry.RollingQuantiles;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;
import java.util.function.Predicate;
import org.HdrHistogram.Histogram;

/**
 * Judges the server-side phases of each budget live, over the budget's own window: {@code
 * llm_budget_ratio{budget, llm_phase}} is the observed quantile divided by the limit (above 1 is a
 * breach; NaN while the window has no successful request), and {@code /admin/stats} lists the same
 * figures with the error rate. Client-only phases are left to the load client.
 *
 * <p>A budget with a {@code tenant} reads that tenant's series only ({@link #tenantSeries}: {@link
 * LiveStats} keeps them per tenant).
 *
 * <p>Whether a phase is breached is decided by {@link Budget#breached} from exact counts of the
 * values above the limit (the rolling series count them to the nanosecond), the same arithmetic as
 * the alert rule over the bucket whose boundary is the limit. The ratio's size comes from the
 * HdrHistogram quantile (1 % resolution); its side of 1 from that verdict, so the two never
 * disagree when the quantile lies within the histogram's resolution of the limit.
 */
public final class BudgetTracker implements MeterBinder {
  private final Budgets budgets;
  private final RollingQuantiles quantiles;

  public BudgetTracker(Budgets budgets, RollingQuantiles quantiles) {
    this.budgets = budgets;
    this.quantiles = quantiles;
  }

  /** The longest window any budget needs. */
  public static Duration longestWindow(Budgets budgets) {
    Duration max = Duration.ofMinutes(1);
    for (Budget b : budgets.budgets()) {
      if (b.window().compareTo(max) > 0) {
        max = b.window();
      }
    }
    return max;
  }

  /** Registers one {@code llm_budget_ratio} gauge per budget and server-side phase. */
  @Override
  public void bindTo(MeterRegistry registry) {
    for (Budget b : budgets.budgets()) {
      for (BudgetPhase p : b.phases()) {
        if (!p.serverSide()) {
          continue;
        }
        Gauge.builder("llm.budget.ratio", () -> ratio(b, p))
            .tags("budget", b.name(), "llm_phase", p.key())
            .description("Live observed quantile divided by the budget's limit (> 1 is a breach)")
            .strongReference(true)
            .register(registry);
      }
    }
  }

  /**
   * The limits each rolling series must count values above, for {@link
   * RollingQuantiles#RollingQuantiles(Duration, int, int, Map)}: every server-side limit, by the
   * series its phase reads.
   */
  public static Map<String, long[]> limits(Budgets budgets) {
    Map<String, TreeSet<Long>> bySeries = new LinkedHashMap<>();
    for (Budget b : budgets.budgets()) {
      for (BudgetPhase p : b.phases()) {
        if (p.serverSide()) {
          bySeries.computeIfAbsent(series(p), k -> new TreeSet<>()).add(b.limitNanos(p));
        }
      }
    }
    Map<String, long[]> out = new LinkedHashMap<>();
    bySeries.forEach((k, v) -> out.put(k, v.stream().mapToLong(Long::longValue).toArray()));
    return out;
  }

  /**
   * The rolling series {@link LiveStats} must keep per tenant: those a budget of one tenant reads
   * (its limited server-side phases, and the successful and failed requests of its error rate).
   */
  public static java.util.Set<String> tenantSeries(Budgets budgets) {
    java.util.Set<String> out = new TreeSet<>();
    for (Budget b : budgets.budgets()) {
      if (b.anyTenant()) {
        continue;
      }
      out.add(Phases.TOTAL.key());
      out.add(LiveStats.FAILED_SERIES);
      for (BudgetPhase p : b.phases()) {
        if (p.serverSide()) {
          out.add(series(p));
        }
      }
    }
    return out;
  }

  /**
   * The observed quantile over the budget's window divided by its limit; NaN without data. Above 1
   * exactly when {@link #breached} says so: where the histogram's 1 % resolution puts the quantile
   * on the other side of the limit than the exact count does, the ratio is 1 (held) or the next
   * double above 1 (breached).
   */
  public double ratio(Budget budget, BudgetPhase phase) {
    double ratio = observedMs(budget, phase) / budget.limitMs(phase);
    if (Double.isNaN(ratio)) {
      return ratio;
    }
    boolean breached = breached(budget, phase);
    if (breached && ratio <= 1) {
      return Math.nextUp(1.0);
    }
    return !breached && ratio > 1 ? 1.0 : ratio;
  }

  /**
   * Whether more than {@code 1 − quantile} of the phase's values over the budget's window were
   * above its limit ({@link Budget#breached}); false without data.
   */
  public boolean breached(Budget budget, BudgetPhase phase) {
    long[] c = counts(budget, phase);
    return budget.breached(c[0] - c[1], c[0]);
  }

  /** {@code {total, above the limit}} over the budget's window, counted exactly. */
  long[] counts(Budget budget, BudgetPhase phase) {
    return quantiles.countAbove(
        matches(budget, series(phase)), budget.window(), budget.limitNanos(phase));
  }

  /** The observed quantile in milliseconds over the budget's window; NaN without data. */
  public double observedMs(Budget budget, BudgetPhase phase) {
    Histogram h = quantiles.merged(matches(budget, series(phase)), budget.window());
    return RollingQuantiles.quantileMs(h, budget.quantile());
  }

  /** Every budget's status, for {@code /admin/stats}. */
  public JsonArray status() {
    JsonArray out = new JsonArray();
    for (Budget b : budgets.budgets()) {
      long ok = quantiles.merged(matches(b, Phases.TOTAL.key()), b.window()).getTotalCount();
      long failed =
          quantiles.merged(matches(b, LiveStats.FAILED_SERIES), b.window()).getTotalCount();
      double errorRate = ok + failed == 0 ? Double.NaN : (double) failed / (ok + failed);
      JsonArray phases = new JsonArray();
      for (BudgetPhase p : b.phases()) {
        JsonObject row = new JsonObject().put("phase", p.key()).put("limit_ms", b.limitMs(p));
        if (p.serverSide()) {
          double observed = observedMs(b, p);
          boolean known = !Double.isNaN(observed);
          long[] c = counts(b, p);
          row.put("observed_ms", known ? observed : null)
              .put("ratio", known ? ratio(b, p) : null)
              .put("over_limit_share", c[0] == 0 ? null : (double) c[1] / c[0])
              .put("breached", b.breached(c[0] - c[1], c[0]));
        } else {
          row.put("observed_ms", null).put("note", "judged by the load client");
        }
        phases.add(row);
      }
      out.add(
          new JsonObject()
              .put("name", b.name())
              .put("model", b.model())
              .put("tenant", b.tenant())
              .put("quantile", b.quantile())
              .put("window_s", b.window().toSeconds())
              .put("requests", ok + failed)
              .put("error_rate", Double.isNaN(errorRate) ? null : errorRate)
              .put("max_error_rate", b.maxErrorRate())
              .put("error_rate_breached", !Double.isNaN(errorRate) && errorRate > b.maxErrorRate())
              .put("phases", phases));
    }
    return out;
  }

  /** The rolling series a budget phase reads. */
  static String series(BudgetPhase phase) {
    return switch (phase) {
      case TTFT, SERVER_TTFT -> Phases.TTFT.key();
      case TOTAL, SERVER_ROOT -> Phases.TOTAL.key();
      default -> phase.key();
    };
  }

  /**
   * The series of {@code b}'s requests: a budget of every tenant reads every series of the phase
   * (kept per tenant or not), a budget of one tenant only that tenant's.
   */
  private static Predicate<RollingQuantiles.Key> matches(Budget b, String series) {
    return k ->
        k.phase().equals(series)
            && (b.anyModel() || b.model().equals(k.model()))
            && (b.anyTenant() || b.tenant().equals(k.tenant()));
  }
}
