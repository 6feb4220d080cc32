package io.phasemeter.load.search;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.phasemeter.load.LoadOptions;
import io.phasemeter.load.TestLoadOptions;
import io.phasemeter.load.budget.ClientBudgets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** search.json's exit code for each ending, which code wins, and the fields it must carry. */
class SearchResultTest {
  @TempDir Path dir;

  private SearchRunner.Options options(double minCapacity) {
    LoadOptions base =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--rate",
            "1",
            "--duration",
            "1s",
            "--out",
            dir.toString());
    return new SearchRunner.Options(
        base,
        new CapacitySearch.Settings(false, 1, Double.POSITIVE_INFINITY, 1.0 / 64, 0.05, 3, 7),
        Duration.ofSeconds(30),
        Duration.ofSeconds(5),
        Duration.ofSeconds(2),
        0.95,
        minCapacity,
        Duration.ofMinutes(30),
        ClientBudgets.none());
  }

  private Probe at(int i, double load, double margin) {
    Probe p = Probes.of(i, load, Probe.Stage.DOUBLE, 0, margin);
    return new Probe(
        p.index(),
        p.load(),
        p.stage(),
        p.block(),
        p.verdict(),
        p.reasons(),
        p.margin(),
        p.p95Ms(),
        p.attainment(),
        p.requestThroughput(),
        p.outputTokensPerS(),
        p.requestGoodput(),
        p.missed(),
        p.breaches(),
        dir.resolve("probes").resolve(i + ""),
        p.exitCode(),
        p.fatal(),
        p.notes());
  }

  private SearchResult result(
      CapacitySearch.Status status, List<Probe> probes, Double pass, Double fail, double min) {
    CapacitySearch.Outcome o =
        new CapacitySearch.Outcome(status, probes, pass, fail, List.of(), null, new ArrayList<>());
    return SearchResult.of(options(min), o, Instant.EPOCH, 1, false);
  }

  @Test
  void eachEndingHasItsExitCode() {
    List<Probe> bracket = List.of(at(1, 8, 0.1), at(2, 16, -0.1));
    assertThat(result(CapacitySearch.Status.FOUND, bracket, 8.0, 16.0, 0).exitCode()).isZero();
    assertThat(result(CapacitySearch.Status.AT_LEAST, List.of(at(1, 8, 0.1)), 8.0, null, 0))
        .extracting(SearchResult::exitCode)
        .isEqualTo(0);
    assertThat(
            result(CapacitySearch.Status.NOTHING_HOLDS, List.of(at(1, 8, -0.1)), null, 8.0, 0)
                .exitCode())
        .isEqualTo(3);
    assertThat(result(CapacitySearch.Status.NO_VALID_PROBE, List.of(), null, null, 0).exitCode())
        .isEqualTo(4);
    assertThat(result(CapacitySearch.Status.OUT_OF_TIME, bracket, 8.0, 16.0, 0).exitCode())
        .isEqualTo(5);
  }

  @Test
  void aCapacityBelowMinCapacityExits3EvenOutOfTime() {
    List<Probe> bracket = List.of(at(1, 8, 0.1), at(2, 16, -0.1));
    SearchResult found = result(CapacitySearch.Status.FOUND, bracket, 8.0, 16.0, 10);
    assertThat(found.exitCode()).isEqualTo(3);
    assertThat(found.exitReason()).contains("--min-capacity");
    // Out of time, but a load at or below --min-capacity already failed: 3 wins over 5.
    SearchResult late = result(CapacitySearch.Status.OUT_OF_TIME, bracket, 8.0, 16.0, 20);
    assertThat(late.exitCode()).isEqualTo(3);
    // Out of time with nothing known below --min-capacity: 5.
    assertThat(result(CapacitySearch.Status.OUT_OF_TIME, bracket, 8.0, 16.0, 12).exitCode())
        .isEqualTo(5);
  }

  @Test
  void badInputAtTheFirstProbeExits2() {
    Probe bad =
        new Probe(
            1,
            1,
            Probe.Stage.DOUBLE,
            0,
            Probe.Verdict.INVALID,
            List.of("--model: unknown"),
            Double.NaN,
            java.util.Map.of(),
            Double.NaN,
            Double.NaN,
            Double.NaN,
            Double.NaN,
            java.util.Map.of(),
            List.of(),
            dir.resolve("probes/1"),
            2,
            true,
            List.of());
    assertThat(result(CapacitySearch.Status.FATAL, List.of(bad), null, null, 0).exitCode())
        .isEqualTo(2);
  }

  @Test
  void searchJsonCarriesTheFieldsTheIssueAsksFor() {
    List<Probe> bracket = List.of(at(1, 8, 0.1), at(2, 16, -0.1));
    JsonNode j = SearchResult.json(result(CapacitySearch.Status.FOUND, bracket, 8.0, 16.0, 0));
    for (String f :
        List.of(
            "rate",
            "ci95_low",
            "ci95_high",
            "output_tokens_per_s",
            "goodput",
            "crossing_mean",
            "censored_blocks",
            "at_least",
            "method")) {
      assertThat(j.path("capacity").has(f)).as(f).isTrue();
    }
    assertThat(j.path("limiting_phase").has("phase")).isTrue();
    assertThat(j.path("limiting_phase").has("owner")).isTrue();
    JsonNode p = j.path("probes").path(0);
    for (String f : List.of("rate", "verdict", "p95_ms", "attainment", "reasons")) {
      assertThat(p.has(f)).as(f).isTrue();
    }
    assertThat(j.path("exit_code").asInt()).isZero();
    assertThat(j.path("status").asText()).isEqualTo("found");
    // No --prompt-salt: each probe drew its own, in its own conditions.
    assertThat(j.path("conditions").path("search").path("prompt_salt").asText())
        .isEqualTo("per probe");
  }
}
