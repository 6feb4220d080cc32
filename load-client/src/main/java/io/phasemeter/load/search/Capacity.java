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
 */
public record Capacity(
    double rate,
    double ci95Low,
    double ci95High,
    double outputTokensPerS,
    double goodput,
    double measuredAt,
    boolean atLeast,
    String method) {

  /** The capacity of an outcome. */
  static Capacity of(CapacitySearch.Outcome o) {
    Confirmation.Result c = o.confirmation();
    boolean atLeast = o.fail() == null && o.pass() != null;
    if (c == null || c.blocks().isEmpty()) {
      if (o.pass() == null) {
        return new Capacity(
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            false,
            "none: no load held");
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
          "the last load that passed, unconfirmed (the search stopped before its confirmation)");
    }
    double rate = c.interval().mean();
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
    return new Capacity(
        rate,
        c.interval().low(),
        c.interval().high(),
        mean(o.probes(), at, Probe::outputTokensPerS),
        mean(o.probes(), at, Probe::requestGoodput),
        at,
        atLeast || allHigh,
        Confirmation.method(c));
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
