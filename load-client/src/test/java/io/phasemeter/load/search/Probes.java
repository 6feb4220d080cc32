package io.phasemeter.load.search;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** Probes made by hand, for the search's unit tests. */
final class Probes {
  private Probes() {}

  static Probe of(int index, double load, Probe.Stage stage, int block, double margin) {
    return of(index, load, stage, block, margin, Map.of(), List.of());
  }

  static Probe of(
      int index,
      double load,
      Probe.Stage stage,
      int block,
      double margin,
      Map<String, Double> p95,
      List<Probe.Breach> breaches) {
    Probe.Verdict v = margin >= 0 ? Probe.Verdict.PASS : Probe.Verdict.FAIL;
    return new Probe(
        index,
        load,
        stage,
        block,
        v,
        v == Probe.Verdict.PASS ? List.of() : List.of("over"),
        margin,
        p95,
        Double.NaN,
        load,
        load * 10,
        Double.NaN,
        Map.of(),
        breaches,
        Path.of("probes", index + ""),
        v == Probe.Verdict.PASS ? 0 : 3,
        false,
        List.of());
  }

  static Probe invalid(int index, double load, Probe.Stage stage, int block) {
    return new Probe(
        index,
        load,
        stage,
        block,
        Probe.Verdict.INVALID,
        List.of("the client ran late"),
        Double.NaN,
        Map.of(),
        Double.NaN,
        Double.NaN,
        Double.NaN,
        Double.NaN,
        Map.of(),
        List.of(),
        Path.of("probes", index + ""),
        0,
        false,
        List.of());
  }
}
