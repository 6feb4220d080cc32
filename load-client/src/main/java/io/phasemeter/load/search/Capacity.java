package io.phasemeter.load.search;

import java.util.List;
import java.util.OptionalDouble;

/**
 * The capacity a search found.
 *
 * @param rate the capacity (req/s, or concurrency in the closed model); NaN when none was found
 * @param ci95Low the 95 % interval's low end, NaN without one
 * @param ci95High its high end
 * @param outputTokensPerS output tokens per second measured at {@code measuredAt}
 * @param goodput good requests per second measured at {@code measuredAt}, NaN without objectives
 * @param measuredAt the confirmation load whose probes give the two figures above: the highest at
 *     or below the capacity
 * @param atLeast whether the capacity is only a lower bound (nothing failed above it)
 * @param method how {@code rate} was computed
 * @param crossingMean the mean over the confirmation blocks of where the margin crosses zero, which
 *     the interval is about; in the open model it is {@code rate}, in the closed model {@code rate}
 *     is the whole concurrency at or below it (a concurrency can be set; 6.33 cannot); NaN without
 *     a confirmation
 * @param censoredBlocks how many counted blocks were censored at an end of the loads probed (their
 *     value is a bound, not a crossing); the interval is left out when every block was
 */
public record Capacity(
    double rate,
    double ci95Low,
    double ci95High,
    double outputTokensPerS,
    double goodput,
    double measuredAt,
    boolean atLeast,
    String method,
    double crossingMean,
    long censoredBlocks) {

  /** The capacity of an open-model outcome. */
  static Capacity of(CapacitySearch.Outcome o) {
    return of(o, false);
  }

  /** The capacity of an outcome; {@code closed}: concurrency, reported whole. */
  static Capacity of(CapacitySearch.Outcome o, boolean closed) {
    Confirmation.Result c = o.confirmation();
    boolean atLeast = o.fail() == null && o.pass() != null;
    boolean allLow = c != null && c.blocks().stream().allMatch(b -> "low".equals(b.censored()));
    if (c == null || c.blocks().isEmpty() || allLow) {
      // A load every block failed at is no capacity: what passed last, unconfirmed, or none.
      if (o.pass() == null || o.status() == CapacitySearch.Status.NOTHING_HOLDS) {
        return new Capacity(
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            false,
            "none: no load held",
            Double.NaN,
            0);
      }
      double at = o.pass();
      return new Capacity(
          at,
          Double.NaN,
          Double.NaN,
          mean(o.probes(), at, Probe::outputTokensPerS),
          mean(o.probes(), at, Probe::requestGoodput),
          at,
          atLeast,
          allLow
              ? "the last load that passed, unconfirmed (every confirmation block failed at every"
                  + " load, and the search stopped before confirming below)"
              : "the last load that passed, unconfirmed (the search stopped before its"
                  + " confirmation)",
          Double.NaN,
          0);
    }
    double crossing = c.interval().mean();
    double rate = closed ? Math.floor(crossing) : crossing;
    double at = Double.NaN;
    for (double r : o.confirmRates()) {
      if (r <= rate && (Double.isNaN(at) || r > at)) {
        at = r;
      }
    }
    if (Double.isNaN(at)) {
      at = o.confirmRates().get(0);
    }
    boolean allHigh = c.blocks().stream().allMatch(b -> "high".equals(b.censored()));
    // Censoring is a bound, not a measurement: no interval when every block was censored.
    boolean allCensored = c.censored() == c.blocks().size();
    String method = Confirmation.method(c);
    if (closed) {
      method +=
          "; the capacity is the whole concurrency at or below that mean (crossing_mean), the"
              + " interval is the mean's";
    }
    return new Capacity(
        rate,
        allCensored ? Double.NaN : c.interval().low(),
        allCensored ? Double.NaN : c.interval().high(),
        counted(o.probes(), c, at, Probe::outputTokensPerS),
        counted(o.probes(), c, at, Probe::requestGoodput),
        at,
        atLeast || allHigh,
        method,
        crossing,
        c.censored());
  }

  /**
   * The mean of {@code f} over the counted confirmation blocks' passing probes at {@code load};
   * over every valid probe there when none.
   */
  private static double counted(
      List<Probe> probes,
      Confirmation.Result c,
      double load,
      java.util.function.ToDoubleFunction<Probe> f) {
    OptionalDouble m =
        probes.stream()
            .filter(p -> p.passed() && p.load() == load && c.counted().contains(p.index()))
            .mapToDouble(f)
            .filter(Double::isFinite)
            .average();
    return m.isPresent() ? m.getAsDouble() : mean(probes, load, f);
  }

  private static double mean(
      List<Probe> probes, double load, java.util.function.ToDoubleFunction<Probe> f) {
    OptionalDouble m =
        probes.stream()
            .filter(p -> p.valid() && p.load() == load)
            .mapToDouble(f)
            .filter(Double::isFinite)
            .average();
    return m.orElse(Double.NaN);
  }
}
