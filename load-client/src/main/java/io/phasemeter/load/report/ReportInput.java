package io.phasemeter.load.report;

import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.join.JoinCounts;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.schedule.Sessions;
import io.phasemeter.load.schedule.StepInfo;
import io.phasemeter.load.workload.Api;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Everything a finished run hands to {@link ReportWriter}.
 *
 * @param pairs every finished request, joined with its proxy record or not
 * @param steps the load steps (one when not stepping)
 * @param runStartNanos when the run began (client clock)
 * @param runEndNanos when it ended (client clock)
 * @param conditions free-form facts about the run (versions, URLs, workload…), written as given
 * @param sent requests started
 * @param ok requests that succeeded
 * @param errors requests that failed (any {@code ErrorClass} but {@code NONE}, invalid included)
 * @param dropped iterations that could not start
 * @param invalid complete responses judged invalid
 * @param achievedRate requests per second the run achieved
 * @param budgets every budget judged, latency and gates
 * @param phaseStats the run's cumulative statistics (the only source of ITL)
 * @param connections what the run's connections did
 * @param api the API the run spoke; null when not said (every figure is then applicable)
 * @param feed the record feeds' reconnects and missed records, the records fetched at the end and
 *     each replica's part; null without a feed
 * @param goodput the run's goodput objectives; null when it had none
 * @param sessions what a {@code --sessions} run's sessions did; null for any other run
 */
public record ReportInput(
    List<Pair> pairs,
    List<StepInfo> steps,
    long runStartNanos,
    long runEndNanos,
    Map<String, Object> conditions,
    long sent,
    long ok,
    long errors,
    long dropped,
    long invalid,
    double achievedRate,
    List<BudgetResult> budgets,
    PhaseStats phaseStats,
    Connections connections,
    Api api,
    JoinCounts feed,
    Goodput goodput,
    Sessions.Counts sessions) {

  /** How many of the slowest requests a report reconciles. */
  public static final int SLOWEST = 10;

  public ReportInput {
    pairs = List.copyOf(pairs);
    steps = List.copyOf(steps);
    conditions =
        conditions == null
            ? Map.of()
            : Collections.unmodifiableMap(new LinkedHashMap<>(conditions)); // nulls allowed
    budgets = List.copyOf(budgets);
    if (phaseStats == null) {
      phaseStats = PhaseStats.of(pairs);
    }
    connections = connections == null ? Connections.UNKNOWN : connections;
  }

  /** A run without sessions ({@code --sessions}). */
  public ReportInput(
      List<Pair> pairs,
      List<StepInfo> steps,
      long runStartNanos,
      long runEndNanos,
      Map<String, Object> conditions,
      long sent,
      long ok,
      long errors,
      long dropped,
      long invalid,
      double achievedRate,
      List<BudgetResult> budgets,
      PhaseStats phaseStats,
      Connections connections,
      Api api,
      JoinCounts feed,
      Goodput goodput) {
    this(
        pairs,
        steps,
        runStartNanos,
        runEndNanos,
        conditions,
        sent,
        ok,
        errors,
        dropped,
        invalid,
        achievedRate,
        budgets,
        phaseStats,
        connections,
        api,
        feed,
        goodput,
        null);
  }

  /** A run without goodput objectives. */
  public ReportInput(
      List<Pair> pairs,
      List<StepInfo> steps,
      long runStartNanos,
      long runEndNanos,
      Map<String, Object> conditions,
      long sent,
      long ok,
      long errors,
      long dropped,
      long invalid,
      double achievedRate,
      List<BudgetResult> budgets,
      PhaseStats phaseStats,
      Connections connections,
      Api api,
      JoinCounts feed) {
    this(
        pairs,
        steps,
        runStartNanos,
        runEndNanos,
        conditions,
        sent,
        ok,
        errors,
        dropped,
        invalid,
        achievedRate,
        budgets,
        phaseStats,
        connections,
        api,
        feed,
        null);
  }

  /** A run without a record feed. */
  public ReportInput(
      List<Pair> pairs,
      List<StepInfo> steps,
      long runStartNanos,
      long runEndNanos,
      Map<String, Object> conditions,
      long sent,
      long ok,
      long errors,
      long dropped,
      long invalid,
      double achievedRate,
      List<BudgetResult> budgets,
      PhaseStats phaseStats,
      Connections connections,
      Api api) {
    this(
        pairs,
        steps,
        runStartNanos,
        runEndNanos,
        conditions,
        sent,
        ok,
        errors,
        dropped,
        invalid,
        achievedRate,
        budgets,
        phaseStats,
        connections,
        api,
        null);
  }

  /** A run that did not say its API. */
  public ReportInput(
      List<Pair> pairs,
      List<StepInfo> steps,
      long runStartNanos,
      long runEndNanos,
      Map<String, Object> conditions,
      long sent,
      long ok,
      long errors,
      long dropped,
      long invalid,
      double achievedRate,
      List<BudgetResult> budgets,
      PhaseStats phaseStats,
      Connections connections) {
    this(
        pairs,
        steps,
        runStartNanos,
        runEndNanos,
        conditions,
        sent,
        ok,
        errors,
        dropped,
        invalid,
        achievedRate,
        budgets,
        phaseStats,
        connections,
        null);
  }

  /** A run whose connections were not counted. */
  public ReportInput(
      List<Pair> pairs,
      List<StepInfo> steps,
      long runStartNanos,
      long runEndNanos,
      Map<String, Object> conditions,
      long sent,
      long ok,
      long errors,
      long dropped,
      long invalid,
      double achievedRate,
      List<BudgetResult> budgets,
      PhaseStats phaseStats) {
    this(
        pairs,
        steps,
        runStartNanos,
        runEndNanos,
        conditions,
        sent,
        ok,
        errors,
        dropped,
        invalid,
        achievedRate,
        budgets,
        phaseStats,
        null,
        null);
  }

  /**
   * The phases that do not exist for the run's API (embeddings: TTFT, TPOT, ITL), in report order:
   * reports write them as not applicable, never as zero.
   */
  public List<String> notApplicable() {
    return api == null ? List.of() : api.notApplicable();
  }

  /** Whether {@code phase} exists for the run's API. */
  public boolean applicable(String phase) {
    return !notApplicable().contains(phase);
  }

  /** Whether the run's requests generate tokens (all but embeddings). */
  public boolean generates() {
    return api == null || api.generates();
  }

  /** The run's length in seconds (at least one nanosecond). */
  public double durationSeconds() {
    return Math.max(1, runEndNanos - runStartNanos) / 1e9;
  }

  /** Per-interval means of the phases, by intended start, for the over-time plot. */
  public List<TimePoint> timeSeries() {
    return TimePoint.series(pairs, runStartNanos, runEndNanos);
  }

  /** The {@value #SLOWEST} slowest successful requests, reconciled phase by phase. */
  public List<SlowRequest> slowest() {
    return SlowRequest.slowest(pairs, SLOWEST);
  }
}
