package io.phasemeter.load.search;

import io.phasemeter.load.campaign.Schedule;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The search itself, free of runs and clocks: which load to probe next, from the verdicts so far.
 *
 * <ol>
 *   <li>From the start load, double until a probe fails (or the maximum is reached and holds: the
 *       capacity is then "at least" the maximum); if the start fails, halve until a probe passes,
 *       down to the floor.
 *   <li>Bisect between the last pass and the first failure until they are within the resolution
 *       ({@code (fail − pass) / fail}; closed model: until they differ by 1).
 *   <li>Confirm: the last pass, the first failure and the loads one bracket width below the pass
 *       and above the failure, in {@code repeats} blocks of a fresh seeded random order each
 *       ({@link Schedule}); {@link Confirmation} turns them into the capacity and its interval.
 * </ol>
 *
 * An invalid probe is repeated once; invalid again, it counts as neither pass nor fail: in the
 * doubling it ends the search for a failure (the capacity is then at least the last pass), in the
 * bisection it ends the bisection, in the confirmation that block lacks the load. Every probe,
 * valid or not, is kept in order.
 */
public final class CapacitySearch {

  /** Runs one probe. */
  @FunctionalInterface
  public interface Prober {
    /**
     * Runs a probe at {@code load}, or returns null when the time left does not allow one more.
     *
     * @param block the confirmation block, 0 outside the confirmation
     */
    Probe run(double load, Probe.Stage stage, int block);
  }

  /**
   * What the search is asked.
   *
   * @param closed concurrency (integers) instead of a rate
   * @param start the first load probed
   * @param maxLoad the largest load probed ({@code --max-rate}); infinite for none
   * @param floor the smallest load the halving probes ({@code --min-capacity}, or the start ÷ 64; 1
   *     in the closed model)
   * @param resolution the bisection stops when {@code (fail − pass) / fail} is at or below it
   * @param repeats confirmation blocks
   * @param seed the blocks' orders
   */
  public record Settings(
      boolean closed,
      double start,
      double maxLoad,
      double floor,
      double resolution,
      int repeats,
      long seed) {
    public Settings {
      if (!(start > 0) || Double.isInfinite(start)) {
        throw new IllegalArgumentException("the start load must be positive");
      }
      if (!(maxLoad >= start)) {
        throw new IllegalArgumentException(
            String.format(
                Locale.ROOT,
                "--max-rate (%s) must be at least the start (%s)",
                Format.load(maxLoad),
                Format.load(start)));
      }
      if (!(resolution > 0 && resolution < 1)) {
        throw new IllegalArgumentException("--resolution must be above 0 and below 100%");
      }
      if (!(floor > 0 && floor <= start)) {
        throw new IllegalArgumentException(
            "the floor of the halving must be above 0 and at most the start");
      }
      if (repeats < 1) {
        throw new IllegalArgumentException("--repeats must be at least 1");
      }
    }
  }

  /** How a search ended. */
  public enum Status {
    /** A bracket was found, bisected and confirmed. */
    FOUND,
    /** Nothing failed up to the maximum (or up to a load that could not be measured). */
    AT_LEAST,
    /** Nothing passed down to the floor. */
    NOTHING_HOLDS,
    /** No probe was valid. */
    NO_VALID_PROBE,
    /** A probe said the search cannot go on (bad input, nothing succeeding at the start). */
    FATAL,
    /** The time allowed ran out before the search ended. */
    OUT_OF_TIME
  }

  /**
   * Where a search ended.
   *
   * @param pass the highest load that passed before the confirmation, or null
   * @param fail the lowest load above it that failed, or null
   * @param confirmRates the loads the confirmation probed (empty when it did not run)
   * @param confirmation the capacity from the confirmation, or null when it did not run
   * @param notes why the search stopped where it did, when it did not just finish
   */
  public record Outcome(
      Status status,
      List<Probe> probes,
      Double pass,
      Double fail,
      List<Double> confirmRates,
      Confirmation.Result confirmation,
      List<String> notes) {
    public Outcome {
      probes = List.copyOf(probes);
      confirmRates = List.copyOf(confirmRates);
      notes = List.copyOf(notes);
    }

    /** The probe that stopped the search (FATAL), or null. */
    public Probe fatalProbe() {
      return probes.stream().filter(Probe::fatal).findFirst().orElse(null);
    }
  }

  private final Settings s;
  private final Prober prober;
  private final List<Probe> probes = new ArrayList<>();
  private final List<String> notes = new ArrayList<>();
  private Double pass;
  private Double fail;
  private boolean rebracketed;
  private int confirmFrom;

  public CapacitySearch(Settings settings, Prober prober) {
    this.s = settings;
    this.prober = prober;
  }

  /** Runs the whole search. */
  public Outcome run() {
    Status bracket = bracket(s.start());
    if (bracket != null) {
      return outcome(bracket, List.of(), null);
    }
    Status bisected = bisect();
    if (bisected != null) {
      return outcome(bisected, List.of(), null);
    }
    List<Double> rates = Confirmation.rates(pass, fail, s.closed(), s.resolution(), s.maxLoad());
    Status confirmed = confirm(rates);
    Confirmation.Result result = estimate(rates);
    if (confirmed == null && result != null && rebracket(result, rates)) {
      // The blocks say one noisy probe put the bracket in the wrong place: once more around the
      // new bracket, and only the new blocks count.
      Status again =
          fail == null && pass < s.maxLoad() ? bracket(Math.min(s.maxLoad(), pass * 2)) : null;
      if (again == null) {
        again = bisect();
      }
      if (again == null) {
        confirmFrom = probes.size();
        rates = Confirmation.rates(pass, fail, s.closed(), s.resolution(), s.maxLoad());
        confirmed = confirm(rates);
        result = estimate(rates);
      } else {
        confirmed = again;
      }
    }
    if (confirmed == null && allLow(result)) {
      return fromBelow(rates.get(0));
    }
    Status status = confirmed != null ? confirmed : fail == null ? Status.AT_LEAST : Status.FOUND;
    return outcome(status, rates, result);
  }

  /** Whether the confirmation's every counted block failed at every load. */
  private static boolean allLow(Confirmation.Result r) {
    return r != null
        && !r.blocks().isEmpty()
        && r.blocks().stream().allMatch(b -> "low".equals(b.censored()));
  }

  /**
   * Every block failed at every load down to {@code bottom}: that load never held, so it is not the
   * capacity. The halving goes on below it (to the floor), then the bisection and a confirmation of
   * their own, as often as that happens; nothing holding down to the floor ends NOTHING_HOLDS.
   */
  private Outcome fromBelow(double bottom) {
    notes.add(
        "every confirmation block failed at every load, down to "
            + Format.load(bottom, s.closed())
            + ": the search went on halving below it (those blocks are listed, not counted)");
    pass = null;
    fail = bottom;
    if (bottom <= s.floor()) {
      notes.add("no load held down to " + Format.load(bottom, s.closed()) + ", the floor");
      return outcome(Status.NOTHING_HOLDS, List.of(), null);
    }
    Status st = bracket(Math.max(s.floor(), s.closed() ? Math.floor(bottom / 2) : bottom / 2));
    if (st == null) {
      st = bisect();
    }
    if (st != null) {
      return outcome(st, List.of(), null);
    }
    confirmFrom = probes.size();
    List<Double> rates = Confirmation.rates(pass, fail, s.closed(), s.resolution(), s.maxLoad());
    Status confirmed = confirm(rates);
    Confirmation.Result result = estimate(rates);
    if (confirmed == null && allLow(result)) {
      return fromBelow(rates.get(0));
    }
    return outcome(confirmed != null ? confirmed : Status.FOUND, rates, result);
  }

  /** The confirmation's estimate from the probes of its blocks, or null without any. */
  private Confirmation.Result estimate(List<Double> rates) {
    List<Probe> confirm =
        probes.subList(confirmFrom, probes.size()).stream()
            .filter(p -> p.stage() == Probe.Stage.CONFIRM)
            .toList();
    return confirm.isEmpty() ? null : Confirmation.estimate(confirm, rates, s.repeats());
  }

  /**
   * When every block held at every load up to the highest confirmed (censored high) and a probe
   * failed above it, or failed at every load (censored low) and a probe passed below, the bracket
   * moves there; once per search, said in the notes.
   */
  private boolean rebracket(Confirmation.Result r, List<Double> rates) {
    if (rebracketed || r.blocks().isEmpty()) {
      return false;
    }
    double top = rates.get(rates.size() - 1);
    double bottom = rates.get(0);
    if (r.blocks().stream().allMatch(b -> "high".equals(b.censored()))) {
      Double above =
          probes.stream()
              .filter(p -> p.failed() && p.load() > top)
              .map(Probe::load)
              .min(Double::compare)
              .orElse(null);
      if (above == null && top >= s.maxLoad()) {
        return false;
      }
      // Without a failure above, the doubling goes on from the top.
      pass = top;
      fail = above;
    } else if (r.blocks().stream().allMatch(b -> "low".equals(b.censored()))) {
      Double below =
          probes.stream()
              .filter(p -> p.passed() && p.load() < bottom)
              .map(Probe::load)
              .max(Double::compare)
              .orElse(null);
      if (below == null) {
        return false;
      }
      pass = below;
      fail = bottom;
    } else {
      return false;
    }
    rebracketed = true;
    notes.add(
        "every confirmation block "
            + (fail != null && fail == bottom ? "failed at every load" : "held at every load")
            + ": the search went on from "
            + Format.load(pass)
            + (fail == null ? " upwards" : " – " + Format.load(fail, s.closed()))
            + " and confirmed again (the first blocks are listed, not counted)");
    return true;
  }

  /** Doubles or halves to a bracket; null when there is one (or a pass with nothing above). */
  private Status bracket(double from) {
    double load = from;
    Probe.Stage stage = pass == null && fail != null ? Probe.Stage.HALVE : Probe.Stage.DOUBLE;
    while (true) {
      Probe p = attempt(load, stage, 0);
      if (p == null) {
        return Status.OUT_OF_TIME;
      }
      if (p.fatal()) {
        return Status.FATAL;
      }
      if (!p.valid()) {
        if (pass != null) {
          notes.add(
              "the search for a failure stopped at "
                  + Format.load(load, s.closed())
                  + ": the probe was invalid twice ("
                  + String.join("; ", p.reasons())
                  + "); the capacity is at least the last pass");
          return null;
        }
        if (fail == null) {
          notes.add(
              "the first load probed ("
                  + Format.load(load, s.closed())
                  + ") could not be measured twice: "
                  + String.join("; ", p.reasons()));
          return probes.stream().anyMatch(Probe::valid)
              ? Status.NOTHING_HOLDS
              : Status.NO_VALID_PROBE;
        }
        // Halving: a lower load may still be measurable.
      } else if (p.passed()) {
        pass = load;
        if (fail != null || load >= s.maxLoad()) {
          return null;
        }
      } else {
        fail = load;
        if (pass != null) {
          return null;
        }
        stage = Probe.Stage.HALVE;
      }
      if (stage == Probe.Stage.DOUBLE) {
        load = Math.min(s.maxLoad(), load * 2);
      } else {
        if (load <= s.floor()) {
          notes.add(
              "no load held down to "
                  + Format.load(load, s.closed())
                  + (s.closed() ? "" : ", the floor (--min-capacity, or the start ÷ 64)"));
          return probes.stream().anyMatch(Probe::valid)
              ? Status.NOTHING_HOLDS
              : Status.NO_VALID_PROBE;
        }
        if (notLoadDriven(p)) {
          notes.add(
              "no load held down to "
                  + Format.load(load, s.closed())
                  + ", and the failure is not the load's: "
                  + LoadDriven.NOT_LOAD_DRIVEN);
          return Status.NOTHING_HOLDS;
        }
        double next = Math.max(s.floor(), s.closed() ? Math.floor(load / 2) : load / 2);
        load = next;
      }
    }
  }

  /**
   * Whether a failure while halving did not ease when the load was quartered ({@link LoadDriven}):
   * a budget nothing meets, not a load too high.
   */
  private boolean notLoadDriven(Probe p) {
    if (!p.failed()) {
      return false;
    }
    return probes.stream()
        .filter(q -> q.failed() && q.load() >= 4 * p.load() * (1 - 1e-9))
        .min(java.util.Comparator.comparingDouble(Probe::load))
        .map(up -> !LoadDriven.eased(p, up))
        .orElse(false);
  }

  /** Bisects the bracket; null when it is within the resolution or a probe stopped it. */
  private Status bisect() {
    while (fail != null && !narrow(pass, fail)) {
      double mid = mid(pass, fail);
      Probe p = attempt(mid, Probe.Stage.BISECT, 0);
      if (p == null) {
        return Status.OUT_OF_TIME;
      }
      if (p.fatal()) {
        return Status.FATAL;
      }
      if (!p.valid()) {
        notes.add(
            "the bisection stopped at "
                + Format.load(mid, s.closed())
                + ": the probe was invalid twice ("
                + String.join("; ", p.reasons())
                + "); the bracket is wider than --resolution");
        return null;
      }
      if (p.passed()) {
        pass = mid;
      } else {
        fail = mid;
      }
    }
    return null;
  }

  /** Whether the bracket is within the resolution. */
  boolean narrow(double pass, double fail) {
    return s.closed() ? fail - pass <= 1 : (fail - pass) / fail <= s.resolution();
  }

  /**
   * The middle of the bracket: an integer for concurrency; a rate rounded to three significant
   * digits (readable directory names), kept strictly inside the bracket.
   */
  double mid(double pass, double fail) {
    double m = (pass + fail) / 2;
    if (s.closed()) {
      return Math.floor(m);
    }
    double rounded =
        java.math.BigDecimal.valueOf(m).round(new java.math.MathContext(3)).doubleValue();
    return rounded > pass && rounded < fail ? rounded : m;
  }

  /** The confirmation blocks, each load once per block in the block's own random order. */
  private Status confirm(List<Double> rates) {
    List<String> ids = rates.stream().map(Format::load).toList();
    Schedule order = Schedule.of(ids, s.repeats(), s.seed());
    for (int b = 0; b < order.blocks().size(); b++) {
      for (String id : order.blocks().get(b)) {
        double load = rates.get(ids.indexOf(id));
        Probe p = attempt(load, Probe.Stage.CONFIRM, b + 1);
        if (p == null) {
          return Status.OUT_OF_TIME;
        }
        if (p.fatal()) {
          return Status.FATAL;
        }
      }
    }
    return null;
  }

  /** One probe, repeated once when invalid; null when out of time. */
  private Probe attempt(double load, Probe.Stage stage, int block) {
    Probe p = prober.run(load, stage, block);
    if (p == null) {
      return null;
    }
    probes.add(p);
    if (p.valid() || p.fatal()) {
      return p;
    }
    Probe again = prober.run(load, stage, block);
    if (again != null) {
      probes.add(again);
    }
    return again;
  }

  private Outcome outcome(Status status, List<Double> rates, Confirmation.Result result) {
    if (status == Status.OUT_OF_TIME) {
      notes.add("--max-duration reached: the search stopped before it ended");
    }
    if (status != Status.FATAL && probes.stream().noneMatch(Probe::valid)) {
      status = Status.NO_VALID_PROBE;
    }
    return new Outcome(status, probes, pass, fail, rates, result, notes);
  }
}
