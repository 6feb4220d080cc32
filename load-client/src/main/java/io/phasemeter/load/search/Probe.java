package io.phasemeter.load.search;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * One probe of a capacity search: one measured run at one offered load, judged.
 *
 * @param index 1, 2, … in the order the probes ran (a repeated invalid probe has its own index)
 * @param load the offered rate (req/s, open model) or concurrency (closed model)
 * @param stage why the search ran it
 * @param block the confirmation block (1, 2, …), 0 outside the confirmation
 * @param verdict pass, fail or invalid
 * @param reasons why it failed or is invalid (empty for a pass); notes a pass carries are in {@code
 *     notes}
 * @param margin how far the probe is from its limits, the smallest of the criteria's margins
 *     ({@link ProbeJudge}): at or above 0 when it passes, below when it fails; NaN when invalid or
 *     when no criterion gives a figure
 * @param p95Ms each phase's p95 in ms from the run's summary.json (absent where it has none)
 * @param attainment the share of requests sent that met every objective, NaN without objectives
 * @param requestThroughput successful requests per second
 * @param outputTokensPerS output tokens per second (NaN for an API that generates none)
 * @param requestGoodput good requests per second, NaN without objectives
 * @param missed how many requests missed each objective (empty without objectives)
 * @param breaches the latency budgets it breached, largest excess first
 * @param dir the run's own report
 * @param exitCode the run's exit code ({@code phasemeter load run}'s)
 * @param fatal whether the search must stop here: bad input (exit 2), or nothing succeeded at the
 *     very first probe (a wrong --model or --url, not a capacity of 0)
 * @param notes what a reader should know besides the verdict
 */
public record Probe(
    int index,
    double load,
    Stage stage,
    int block,
    Verdict verdict,
    List<String> reasons,
    double margin,
    Map<String, Double> p95Ms,
    double attainment,
    double requestThroughput,
    double outputTokensPerS,
    double requestGoodput,
    Map<String, Long> missed,
    List<Breach> breaches,
    Path dir,
    int exitCode,
    boolean fatal,
    List<String> notes) {

  public Probe {
    reasons = List.copyOf(reasons);
    p95Ms = Map.copyOf(p95Ms);
    missed = Map.copyOf(missed);
    breaches = List.copyOf(breaches);
    notes = List.copyOf(notes);
  }

  /** Why the search ran a probe. */
  public enum Stage {
    /** Doubling from the start until a failure. */
    DOUBLE,
    /** Halving from a failing start until a pass. */
    HALVE,
    /** Bisection between the last pass and the first failure. */
    BISECT,
    /** The randomized blocks that confirm the answer. */
    CONFIRM;

    /** The name in search.json and the progress lines. */
    public String key() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** What a probe says about the deployment. */
  public enum Verdict {
    /** Every budget held and the attainment reached its minimum. */
    PASS,
    /** The deployment did not hold. */
    FAIL,
    /** The measurement cannot be trusted. */
    INVALID;

    public String key() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /**
   * A latency budget the probe breached.
   *
   * @param phase the phase as the budgets file names it ({@code queue}, {@code ttft}, …)
   * @param quantile the budget's quantile
   * @param overLimitShare the share of the phase's values above the limit (NaN when only the
   *     quantile was compared)
   * @param excess {@code overLimitShare − (1 − quantile)}: how much more than allowed was above
   */
  public record Breach(
      String budget,
      String phase,
      double limitMs,
      double quantile,
      double observedMs,
      double overLimitShare,
      double excess) {}

  public boolean valid() {
    return verdict != Verdict.INVALID;
  }

  public boolean passed() {
    return verdict == Verdict.PASS;
  }

  public boolean failed() {
    return verdict == Verdict.FAIL;
  }

  /** The phase's p95 in ms, NaN where the run had none. */
  public double p95(String phase) {
    Double v = p95Ms.get(phase);
    return v == null ? Double.NaN : v;
  }
}
