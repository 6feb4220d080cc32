package io.phasemeter.load.search;

import io.phasemeter.load.campaign.Stats;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * The capacity from the confirmation blocks. Per block, the load where the probe's margin ({@link
 * ProbeJudge}: at or above 0 when it holds) crosses zero, interpolated linearly between the block's
 * highest passing load and the lowest failing load above it; the capacity is the mean over blocks,
 * with the Student-t 95 % interval of that mean ({@link Stats}). A block whose loads all pass is
 * censored at its highest load (the capacity is at least that), one whose loads all fail at its
 * lowest (at most that): both are counted at that load and said so.
 */
public final class Confirmation {
  private Confirmation() {}

  /**
   * One block's crossing.
   *
   * @param block 1, 2, …
   * @param load where the margin crosses zero (or the censored end)
   * @param censored null, {@code "high"} (every load held) or {@code "low"} (none held)
   * @param between the two loads interpolated between (one when censored)
   */
  public record Block(int block, double load, String censored, List<Double> between) {}

  /**
   * The capacity.
   *
   * @param interval mean and 95 % interval over the blocks' crossings
   * @param passedEveryBlock the highest confirmation load that passed in every block, or NaN
   * @param counted the indexes of the valid probes of the blocks counted
   */
  public record Result(
      List<Block> blocks, Stats.Interval interval, double passedEveryBlock, List<Integer> counted) {
    /** How many blocks were censored. */
    public long censored() {
      return blocks.stream().filter(b -> b.censored() != null).count();
    }
  }

  /**
   * The loads to confirm: the last pass, the first failure, and one bracket width below the pass
   * and above the failure (up to {@code maxLoad}), so that a block in which the pass fails, or the
   * failure passes, still has a crossing: a bracket that one noisy probe put too low or too high is
   * not carried into the answer. Without a failure (the capacity is at least the pass), the pass
   * and one resolution below it.
   */
  public static List<Double> rates(
      Double pass, Double fail, boolean closed, double resolution, double maxLoad) {
    double width =
        fail != null ? fail - pass : closed ? 1 : Math.max(pass * resolution, Double.MIN_NORMAL);
    List<Double> out = new ArrayList<>();
    double below = pass - width;
    if (closed ? below >= 1 : below > 0) {
      out.add(closed ? below : round(below, pass));
    }
    out.add(pass);
    if (fail != null) {
      out.add(fail);
      if (fail + width <= maxLoad) {
        out.add(closed ? fail + width : round(fail + width, Double.MAX_VALUE));
      }
    }
    return List.copyOf(out);
  }

  /** Rounds to 3 significant digits when that keeps it below {@code than}. */
  private static double round(double v, double than) {
    double r = java.math.BigDecimal.valueOf(v).round(new java.math.MathContext(3)).doubleValue();
    return r > 0 && r < than ? r : v;
  }

  /** The capacity from the valid confirmation probes of {@code repeats} blocks. */
  public static Result estimate(List<Probe> confirm, List<Double> rates, int repeats) {
    List<Block> blocks = new ArrayList<>();
    List<Integer> counted = new ArrayList<>();
    Map<Double, Integer> passes = new TreeMap<>();
    for (int b = 1; b <= repeats; b++) {
      TreeMap<Double, Probe> byLoad = new TreeMap<>();
      for (Probe p : confirm) {
        if (p.block() == b && p.valid()) {
          byLoad.put(p.load(), p); // a repeat after an invalid one replaces nothing valid
        }
      }
      if (byLoad.isEmpty() || !complete(confirm, b, rates)) {
        continue;
      }
      byLoad.values().forEach(p -> counted.add(p.index()));
      byLoad.forEach((load, p) -> passes.merge(load, p.passed() ? 1 : 0, Integer::sum));
      blocks.add(crossing(b, byLoad));
    }
    double every = Double.NaN;
    for (double r : rates) {
      if (passes.getOrDefault(r, 0) == repeats) {
        every = Double.isNaN(every) ? r : Math.max(every, r);
      }
    }
    Stats.Interval interval = Stats.of(blocks.stream().map(Block::load).toList());
    return new Result(List.copyOf(blocks), interval, every, List.copyOf(counted));
  }

  /**
   * Whether block {@code b} ran to its end: a probe (valid, or invalid twice) at every confirmation
   * load. A block cut short by {@code --max-duration} is left out: its few loads would put a
   * censored end above the first failure or below the pass.
   */
  static boolean complete(List<Probe> confirm, int b, List<Double> rates) {
    for (double r : rates) {
      if (confirm.stream().noneMatch(p -> p.block() == b && p.load() == r)) {
        return false;
      }
    }
    return true;
  }

  /** One block's crossing from its valid probes, by load. */
  static Block crossing(int block, TreeMap<Double, Probe> byLoad) {
    Double high = null;
    for (Map.Entry<Double, Probe> e : byLoad.entrySet()) {
      if (e.getValue().passed()) {
        high = e.getKey();
      }
    }
    if (high == null) {
      double low = byLoad.firstKey();
      return new Block(block, low, "low", List.of(low));
    }
    Map.Entry<Double, Probe> above = byLoad.higherEntry(high);
    if (above == null) {
      return new Block(block, high, "high", List.of(high));
    }
    double mPass = byLoad.get(high).margin();
    double mFail = above.getValue().margin();
    double f;
    if (Double.isFinite(mPass) && Double.isFinite(mFail) && mPass - mFail > 0) {
      f = Math.max(0, mPass) / (mPass - mFail);
    } else {
      f = 0.5; // no margin to interpolate on: the middle
    }
    double load = high + f * (above.getKey() - high);
    return new Block(block, load, null, List.of(high, above.getKey()));
  }

  /** The method in one sentence, for search.json and the report. */
  static String method(Result r) {
    return String.format(
        Locale.ROOT,
        "mean over %d confirmation blocks of the load where the probe margin crosses zero,"
            + " interpolated linearly between the block's highest passing load and the next load"
            + " (margin: the smallest of (1 - quantile) - share above the limit per latency"
            + " budget and attainment - min_attainment; a probe that failed on errors, drops or"
            + " timeouts adds their excess); %d block(s) censored at an end of the probed loads;"
            + " 95 %% Student-t interval over the blocks",
        r.blocks().size(),
        r.censored());
  }
}
