package io.phasemeter.load.report;

import io.phasemeter.load.join.Pair;
import io.phasemeter.load.schedule.StepInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** What every output shares, derived once from a {@link ReportInput}. */
final class ReportModel {

  /** One step with what happened in it. */
  record Step(StepInfo info, long finished, long ok, double durationSeconds, PhaseStats stats) {
    /** Requests started per second over the step; NaN when it has no length. */
    double achievedRate() {
      return durationSeconds > 0 ? info.sent() / durationSeconds : Double.NaN;
    }

    /** Successful requests per second over the step. */
    double okRate() {
      return durationSeconds > 0 ? ok / durationSeconds : Double.NaN;
    }
  }

  final ReportInput in;
  final PhaseStats stats;
  final List<Step> steps;
  final List<TimePoint> timeSeries;
  final List<SlowRequest> slowest;
  final FailureReasons failures;
  final long outputTokens;
  final double requestThroughput;
  final double outputTokenThroughput;

  /** Goodput over every request; null when the run had no objectives. */
  final GoodputCounts goodput;

  /** The token lengths asked for and received over the successful requests. */
  final Lengths lengths;

  /**
   * Good requests per interval of {@link #timeSeries} (the same intervals, by intended start);
   * empty without objectives.
   */
  final long[] goodOverTime;

  /** Per turn index of the requests of sessions; empty when none belonged to one. */
  final TurnStats turns;

  ReportModel(ReportInput in) {
    this.in = in;
    this.stats = in.phaseStats();
    Map<Integer, List<Pair>> byStep = new HashMap<>();
    long tokens = 0;
    for (Pair p : in.pairs()) {
      byStep.computeIfAbsent(p.client().step(), k -> new ArrayList<>()).add(p);
      if (p.client().ok() && p.client().usageCompletionTokens() > 0) {
        tokens += p.client().usageCompletionTokens();
      }
    }
    List<Step> list = new ArrayList<>();
    for (StepInfo s : in.steps()) {
      List<Pair> ps = byStep.getOrDefault(s.index(), List.of());
      long ok = ps.stream().filter(p -> p.client().ok()).count();
      double seconds = (s.endNanos() - s.startNanos()) / 1e9;
      list.add(new Step(s, ps.size(), ok, seconds, PhaseStats.of(ps)));
    }
    this.steps = List.copyOf(list);
    this.timeSeries = in.timeSeries();
    this.slowest = in.slowest();
    this.failures = FailureReasons.of(in.pairs());
    this.outputTokens = tokens;
    this.requestThroughput = in.ok() / in.durationSeconds();
    this.outputTokenThroughput = tokens / in.durationSeconds();
    this.goodput = in.goodput() == null ? null : GoodputCounts.of(in.goodput(), in.pairs());
    this.goodOverTime = goodOverTime(in, timeSeries);
    this.lengths = Lengths.of(in.pairs(), in.generates());
    this.turns = TurnStats.of(in.pairs());
  }

  private static long[] goodOverTime(ReportInput in, List<TimePoint> series) {
    if (in.goodput() == null || series.isEmpty()) {
      return new long[0];
    }
    long width = Math.round(series.get(0).widthSeconds() * 1e9);
    long[] good = new long[series.size()];
    for (Pair p : in.pairs()) {
      long offset = p.client().intendedNanos() - in.runStartNanos();
      if (offset < 0 || !in.goodput().judge(p).good()) {
        continue;
      }
      good[(int) Math.min(good.length - 1, offset / width)]++;
    }
    return good;
  }

  /** Share of successful requests that joined a proxy record; NaN when none succeeded. */
  double joinCoverage() {
    return stats.joinCoverage();
  }
}
