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
import java.util.function.Predicate;
import org.HdrHistogram.Histogram;

/**
 * Judges the server-side phases of each budget live, from the proxy's rolling quantiles over the
 * budget's own window: {@code llm_budget_ratio{budget, llm_phase}} is the observed quantile divided
 * by the limit (above 1 is a breach; NaN while the window has no successful request), and {@code
 * /admin/stats} lists the same figures with the error rate. Client-only phases are left to the load
 * client.
 */
public final class BudgetTracker implements MeterBinder {
  /** The rolling series of failed requests (counted, for the error rate). */
  public static final String FAILED = LiveStats.FAILED_SERIES;

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

  /** The observed quantile over the budget's window divided by its limit; NaN without data. */
  public double ratio(Budget budget, BudgetPhase phase) {
    return observedMs(budget, phase) / budget.limitMs(phase);
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
      long failed = quantiles.merged(matches(b, FAILED), b.window()).getTotalCount();
      double errorRate = ok + failed == 0 ? Double.NaN : (double) failed / (ok + failed);
      JsonArray phases = new JsonArray();
      for (BudgetPhase p : b.phases()) {
        JsonObject row = new JsonObject().put("phase", p.key()).put("limit_ms", b.limitMs(p));
        if (p.serverSide()) {
          double observed = observedMs(b, p);
          boolean known = !Double.isNaN(observed);
          row.put("observed_ms", known ? observed : null)
              .put("ratio", known ? observed / b.limitMs(p) : null)
              .put("breached", known && observed > b.limitMs(p));
        } else {
          row.put("observed_ms", null).put("note", "judged by the load client");
        }
        phases.add(row);
      }
      out.add(
          new JsonObject()
              .put("name", b.name())
              .put("model", b.model())
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

  private static Predicate<RollingQuantiles.Key> matches(Budget b, String series) {
    return k -> k.phase().equals(series) && (b.anyModel() || b.model().equals(k.model()));
  }
}
