package io.phasemeter.load.search;

import io.phasemeter.core.Phases;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The phase that gives first, decided from the join at the first failing probe above the capacity
 * (the failing probe of the lowest load above it):
 *
 * <ul>
 *   <li>where it breached latency budgets, the phase whose budget it breached with the largest
 *       excess of the share of values above the limit over the allowed {@code 1 − quantile}; a sum
 *       (client_total, client_ttft, total, ttft) names its part whose p95 grew most since the last
 *       passing probe below it, as the BREACH line names a sum's part;
 *   <li>where it failed otherwise (objectives, errors, drops, timeouts), the objective missed most
 *       often and the server's or the join's phase whose p95 grew most, in ms, since the last
 *       passing probe: network_envelope, gateway, receive, queue, generation, write and
 *       unattributed; where the engine reports its own split, generation's leaves (engine_queue,
 *       prefill, decode) are compared instead of generation, which holds them.
 * </ul>
 *
 * In a time-to-first-token sum (a client_ttft or ttft budget, or client_ttft the objective missed
 * most), generation counts only up to the first token: bounded by the TTFT minus the other parts,
 * the rule the run's BREACH line uses ({@link Phases#partMs}).
 *
 * <p>Ties are the others within {@value #TIE} (relative) of the named one's figure. Without the
 * join ({@code --admin}) no server phase is known: the phase is named only when a budget on a phase
 * the client sees itself gave way.
 *
 * @param phase the phase named, or null when none can be
 * @param owner who to page ({@link Phases#owner()}), or null
 * @param reason one sentence
 * @param ties the phases within {@value #TIE} of the named one
 * @param basis {@code budget}, {@code objectives}, {@code errors} or null
 * @param budgetPhase the budgeted phase (a sum whose part is named), or null
 * @param objective the objective missed most often, or null
 * @param passProbe the passing probe compared with, or null
 * @param failProbe the failing probe, or null
 */
public record LimitingPhase(
    String phase,
    String owner,
    String reason,
    List<Tie> ties,
    String basis,
    String budgetPhase,
    String objective,
    Integer passProbe,
    Integer failProbe) {

  /** Relative distance under which another phase is listed as a tie. */
  static final double TIE = 0.10;

  /** The parts of a request's time the proxy and the join decompose it into, in report order. */
  static final List<String> DECOMPOSITION =
      List.of(
          "network_envelope",
          "gateway",
          "receive",
          "queue",
          "generation",
          "write",
          "unattributed",
          "engine_queue");

  public LimitingPhase {
    ties = List.copyOf(ties);
  }

  /** A close second. */
  public record Tie(String phase, String owner, double figure) {}

  /** No phase named, for {@code why}. */
  static LimitingPhase none(String why, Probe pass, Probe fail) {
    return new LimitingPhase(
        null,
        null,
        why,
        List.of(),
        null,
        null,
        null,
        pass == null ? null : pass.index(),
        fail == null ? null : fail.index());
  }

  /**
   * Decides from {@code probes}.
   *
   * @param capacity the capacity found (probes above it are looked at); NaN when no load held, so
   *     that every probe lies above it
   * @param joined whether the runs joined with the proxy ({@code --admin})
   */
  static LimitingPhase decide(List<Probe> probes, double capacity, boolean joined, boolean closed) {
    double below = Double.isNaN(capacity) ? Double.NEGATIVE_INFINITY : capacity;
    Probe fail =
        probes.stream()
            .filter(p -> p.failed() && p.load() > below)
            .min(Comparator.comparingDouble(Probe::load).thenComparingInt(Probe::index))
            .orElse(null);
    if (fail == null) {
      return none(
          "no probe failed above the capacity, so no phase gave way within the loads probed",
          null,
          null);
    }
    Probe pass =
        probes.stream()
            .filter(p -> p.passed() && p.load() < fail.load())
            .max(Comparator.comparingDouble(Probe::load).thenComparingInt(Probe::index))
            .orElse(null);
    if (!fail.breaches().isEmpty()) {
      return fromBudgets(fail, pass, joined, closed);
    }
    return fromGrowth(fail, pass, joined, closed);
  }

  private static LimitingPhase fromBudgets(Probe fail, Probe pass, boolean joined, boolean closed) {
    List<Probe.Breach> breaches = fail.breaches();
    Probe.Breach top = breaches.get(0);
    List<String> names = new ArrayList<>();
    List<Tie> ties = new ArrayList<>();
    for (Probe.Breach b : breaches) {
      if (b == top || close(b.excess(), top.excess())) {
        String named = partOrSelf(b.phase(), pass, fail, joined);
        if (b != top && !names.contains(named)) {
          ties.add(new Tie(named, owner(named), b.excess()));
        }
        names.add(named);
      }
    }
    String phase = names.get(0);
    String canonical = canonical(top.phase());
    String budget =
        String.format(
            Locale.ROOT,
            "(p%s ≤ %s) was breached by %s of requests (%s allowed)",
            Format.quantile(top.quantile()),
            Format.ms(top.limitMs()),
            Format.pct(top.overLimitShare()),
            Format.pct(1 - top.quantile()));
    String reason;
    if (isSum(canonical)) {
      reason =
          canonical
              + "'s budget "
              + budget
              + " at "
              + Format.load(fail.load(), closed)
              + (phase.equals(canonical)
                  ? "; its parts are unknown without the join (--admin)"
                  : "; of its parts, " + growth(phase, pass, fail, closed));
    } else {
      reason = growth(phase, pass, fail, closed) + "; its budget " + budget;
    }
    return new LimitingPhase(
        phase,
        owner(phase),
        reason,
        ties,
        "budget",
        top.phase(),
        null,
        pass == null ? null : pass.index(),
        fail.index());
  }

  private static LimitingPhase fromGrowth(Probe fail, Probe pass, boolean joined, boolean closed) {
    String objective = null;
    List<String> objectiveTies = new ArrayList<>();
    long most = fail.missed().values().stream().mapToLong(Long::longValue).max().orElse(0);
    if (most > 0) {
      for (Map.Entry<String, Long> e : fail.missed().entrySet()) {
        if (e.getValue() == most) {
          if (objective == null) {
            objective = e.getKey();
          } else {
            objectiveTies.add(e.getKey());
          }
        }
      }
    }
    String basis = objective != null ? "objectives" : "errors";
    String failed =
        objective != null
            ? String.format(
                Locale.ROOT,
                "attainment fell to %s at %s (%s missed most often, by %d requests%s)",
                Format.pct(fail.attainment()),
                Format.load(fail.load(), closed),
                objective,
                most,
                objectiveTies.isEmpty() ? "" : "; as often: " + String.join(", ", objectiveTies))
            : "the probe at "
                + Format.load(fail.load(), closed)
                + " failed: "
                + String.join("; ", fail.reasons());
    if (!joined) {
      return new LimitingPhase(
          null,
          null,
          failed
              + "; no phase can be named: without --admin there is no join, so the server's"
              + " phases are unknown",
          List.of(),
          basis,
          null,
          objective,
          pass == null ? null : pass.index(),
          fail.index());
    }
    Phases sum = objective == null ? null : Phases.fromKey(objective).orElse(null);
    List<Map.Entry<String, Double>> grown =
        grownMost(leaves(DECOMPOSITION, fail, sum), pass, fail, sum);
    if (grown.isEmpty()) {
      return new LimitingPhase(
          null,
          null,
          failed + "; no server phase was measured at the failing probe",
          List.of(),
          basis,
          null,
          objective,
          pass == null ? null : pass.index(),
          fail.index());
    }
    String phase = grown.get(0).getKey();
    List<Tie> ties =
        grown.stream()
            .skip(1)
            .filter(e -> close(e.getValue(), grown.get(0).getValue()))
            .map(e -> new Tie(e.getKey(), owner(e.getKey()), e.getValue()))
            .toList();
    return new LimitingPhase(
        phase,
        owner(phase),
        failed + "; of the server's phases, " + growth(phase, pass, fail, closed),
        ties,
        basis,
        null,
        objective,
        pass == null ? null : pass.index(),
        fail.index());
  }

  /** A sum's part that grew most, or the phase itself (not a sum, or no join). */
  private static String partOrSelf(String phase, Probe pass, Probe fail, boolean joined) {
    String canonical = canonical(phase);
    if (!isSum(canonical) || !joined) {
      return canonical;
    }
    Phases sum = Phases.fromKey(canonical).orElseThrow();
    List<String> parts = leaves(sum.parts().stream().map(Phases::key).toList(), fail, sum);
    List<Map.Entry<String, Double>> grown = grownMost(parts, pass, fail, sum);
    return grown.isEmpty() ? canonical : grown.get(0).getKey();
  }

  /** The phases of {@code names} the failing probe measured, by p95 growth in ms, largest first. */
  static List<Map.Entry<String, Double>> grownMost(List<String> names, Probe pass, Probe fail) {
    return grownMost(names, pass, fail, null);
  }

  /**
   * As {@link #grownMost(List, Probe, Probe)}, each phase taken as a part of {@code sum} (null: as
   * itself): in a time-to-first-token sum, generation is bounded by the TTFT minus the other parts
   * ({@link Phases#partMs}, the rule the BREACH line names a sum's part by).
   */
  static List<Map.Entry<String, Double>> grownMost(
      List<String> names, Probe pass, Probe fail, Phases sum) {
    return names.stream()
        .filter(n -> Double.isFinite(fail.p95(n)))
        .map(
            n -> {
              double after = asPart(fail, n, sum);
              double before = pass == null ? Double.NaN : asPart(pass, n, sum);
              double growth = after - (Double.isFinite(before) ? before : 0);
              return Map.entry(n, growth);
            })
        .sorted(Map.Entry.<String, Double>comparingByValue().reversed())
        .collect(Collectors.toList());
  }

  /** A phase's p95 in a probe, as a part of {@code sum} (null: its own p95). */
  private static double asPart(Probe p, String name, Phases sum) {
    Phases part = Phases.fromKey(name).orElse(null);
    if (sum == null || part == null || !sum.parts().contains(part)) {
      return p.p95(name);
    }
    double bounded = sum.partMs(part, ph -> p.p95(ph.key()));
    return Double.isNaN(bounded) ? p.p95(name) : bounded; // the sum itself not measured
  }

  /**
   * The phases to compare: {@code names}, with generation replaced by the engine's own split where
   * the failing probe measured it (engine_queue and prefill, and decode unless {@code sum} ends at
   * the first token): engine_queue lies inside generation, so generation's growth would always
   * cover it and the engine's scheduler queue could never be named.
   */
  static List<String> leaves(List<String> names, Probe fail, Phases sum) {
    if (!names.contains("generation") || !Double.isFinite(fail.p95("engine_queue"))) {
      return names;
    }
    List<String> out = new ArrayList<>();
    for (String n : names) {
      if (n.equals("generation")) {
        out.add("engine_queue");
        out.add("prefill");
        if (sum == null || !sum.toFirstToken()) {
          out.add("decode");
        }
      } else if (!out.contains(n)) {
        out.add(n);
      }
    }
    return out;
  }

  /** "queue p95 grew from 40 ms to 1.9 s between 18 and 24 req/s". */
  private static String growth(String phase, Probe pass, Probe fail, boolean closed) {
    double after = fail.p95(phase);
    if (pass == null || !Double.isFinite(pass.p95(phase))) {
      return String.format(
          Locale.ROOT,
          "%s p95 was %s at %s (no passing probe below to compare with)",
          phase,
          Format.ms(after),
          Format.load(fail.load(), closed));
    }
    return String.format(
        Locale.ROOT,
        "%s p95 grew from %s to %s between %s%s and %s",
        phase,
        Format.ms(pass.p95(phase)),
        Format.ms(after),
        closed ? "concurrency " : "",
        Format.load(pass.load()),
        closed ? Format.load(fail.load()) : Format.load(fail.load(), false));
  }

  private static boolean close(double a, double top) {
    return Math.abs(top - a) <= TIE * Math.abs(top);
  }

  private static boolean isSum(String phase) {
    return Phases.fromKey(phase).map(p -> !p.parts().isEmpty()).orElse(false);
  }

  private static String canonical(String phase) {
    return Phases.fromKey(phase).map(p -> p.canonical().key()).orElse(phase);
  }

  static String owner(String phase) {
    return Phases.fromKey(phase).map(Phases::owner).orElse(null);
  }
}
