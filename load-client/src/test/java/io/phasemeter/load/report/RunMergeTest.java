package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.LoadMain;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code phasemeter load merge}: several instances' outputs become one run whose quantiles come
 * from added histograms. The synthetic case is checkable by hand; the realistic one merges two full
 * outputs written by {@link ReportWriter} and compares with the quantiles of all requests taken
 * together in memory.
 */
class RunMergeTest {
  @TempDir Path tmp;

  /** A run directory holding {@code n} successful requests whose queue phase took {@code ms}. */
  private Path syntheticRun(String name, String tracePrefix, int n, long ms) throws Exception {
    Path dir = Files.createDirectories(tmp.resolve(name));
    try (PrintStream ps =
        new PrintStream(Files.newOutputStream(dir.resolve("phases.hlog")), false, "UTF-8")) {
      HistogramLogWriter w = new HistogramLogWriter(ps);
      w.outputLogFormatVersion();
      w.outputLegend();
      // Two intervals (two load steps) of the same phase, as a stepped run writes them.
      for (int step = 0; step < 2; step++) {
        Histogram h = new Histogram(2);
        h.recordValueWithCount(ms * 1000, n / 2);
        h.setTag("queue");
        h.setStartTimeStamp(step * 10_000L);
        h.setEndTimeStamp((step + 1) * 10_000L);
        w.outputIntervalHistogram(h);
      }
    }
    List<String> lines = new ArrayList<>();
    lines.add(String.join(",", PairsCsv.HEADER));
    for (int i = 0; i < n; i++) {
      String row = i + "," + String.format("%s%024x", tracePrefix, i) + ",0,1k,200,NONE,,true";
      lines.add(row + ",".repeat(PairsCsv.HEADER.size() - 8));
    }
    Files.write(dir.resolve("pairs.csv"), lines);
    Files.writeString(
        dir.resolve("summary.json"),
        "{\"requests\":{\"sent\":"
            + n
            + ",\"ok\":"
            + n
            + ",\"errors\":0,\"dropped\":0,\"invalid\":0},"
            + "\"join\":{\"ok\":"
            + n
            + ",\"joined_ok\":"
            + n
            + ",\"finished\":"
            + n
            + ",\"joined\":"
            + n
            + "},\"achieved_rate\":"
            + n / 20.0
            + ",\"conditions\":{\"model\":\"sim-llama\"}}");
    return dir;
  }

  @Test
  void mergedQuantilesComeFromAddedHistogramsNeverFromAveragedPercentiles() throws Exception {
    // Instance A: 900 requests queued 10 ms. Instance B: 100 requests queued 1000 ms.
    // All 1000 together: 10 % took 1000 ms, so p50 = 10 ms and p95 = 1000 ms (by hand).
    // Averaging the instances' p95s would say (10 + 1000) / 2 = 505 ms: a value no request had.
    Path a = syntheticRun("a", "aaaaaaaa", 900, 10);
    Path b = syntheticRun("b", "bbbbbbbb", 100, 1000);
    RunMerge.Result r = RunMerge.merge(List.of(a, b), tmp.resolve("merged"), null);
    PhaseStats s = r.stats();
    assertThat(s.count("queue")).isEqualTo(1000);
    assertThat(s.quantileMs("queue", 0.50)).isCloseTo(10, within(0.1));
    assertThat(s.quantileMs("queue", 0.95)).isCloseTo(1000, within(10.0));
    assertThat(s.quantileMs("queue", 0.89)).isCloseTo(10, within(0.1));
    assertThat(s.quantileMs("queue", 0.91)).isCloseTo(1000, within(10.0));
    double averagedP95 = (10 + 1000) / 2.0;
    assertThat(Math.abs(s.quantileMs("queue", 0.95) - averagedP95)).isGreaterThan(400);

    JsonNode summary = new ObjectMapper().readTree(tmp.resolve("merged/summary.json").toFile());
    assertThat(summary.at("/requests/sent").asLong()).isEqualTo(1000);
    assertThat(summary.at("/join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(summary.at("/achieved_rate").asDouble()).isEqualTo(50.0);
    assertThat(summary.at("/phases/queue/p95_ms").asDouble()).isCloseTo(1000, within(10.0));
    assertThat(summary.at("/unique_trace_ids").asLong()).isEqualTo(1000);
    List<String> pairs = Files.readAllLines(tmp.resolve("merged/pairs.csv"));
    assertThat(pairs).hasSize(1001);
    assertThat(pairs.get(0)).endsWith(",instance");
    assertThat(pairs.get(1000)).endsWith("," + b);

    // The merged log is itself mergeable: reading it back gives the same quantiles.
    PhaseStats reread = PhaseStats.create();
    RunMerge.readLog(tmp.resolve("merged/phases.hlog"), reread);
    assertThat(reread.quantileMs("queue", 0.95)).isEqualTo(s.quantileMs("queue", 0.95));
  }

  @Test
  void failureReasonsAreCountedAgainOverTheMergedPairs() throws Exception {
    Path a = syntheticRun("a", "aaaaaaaa", 4, 10);
    Path b = syntheticRun("b", "bbbbbbbb", 4, 10);
    int blanks = PairsCsv.HEADER.size() - 8;
    Files.writeString(
        a.resolve("pairs.csv"),
        "9,aaaaaaaa00000000000000000000ff09,0,1k,500,HTTP_5XX,\"HTTP 500: slot 1, \"\"x\"\"\",false"
            + ",".repeat(blanks)
            + "\n",
        java.nio.file.StandardOpenOption.APPEND);
    Files.writeString(
        b.resolve("pairs.csv"),
        "9,bbbbbbbb00000000000000000000ff09,0,1k,500,HTTP_5XX,\"HTTP 500: slot 1, \"\"x\"\"\",false"
            + ",".repeat(blanks)
            + "\n10,bbbbbbbb00000000000000000000ff10,0,1k,200,STREAM_ERROR,"
            + "the stream ended without [DONE],false"
            + ",".repeat(blanks)
            + "\n",
        java.nio.file.StandardOpenOption.APPEND);
    RunMerge.merge(List.of(a, b), tmp.resolve("merged"), null);
    JsonNode f =
        new ObjectMapper().readTree(tmp.resolve("merged/summary.json").toFile()).get("failures");
    assertThat(f.get("failed").asLong()).isEqualTo(3);
    assertThat(f.at("/reasons/0/class").asText()).isEqualTo("HTTP_5XX");
    assertThat(f.at("/reasons/0/reason").asText()).isEqualTo("HTTP 500: slot 1, \"x\"");
    assertThat(f.at("/reasons/0/count").asLong()).isEqualTo(2);
    assertThat(f.at("/reasons/0/first_trace_id").asText())
        .isEqualTo("aaaaaaaa00000000000000000000ff09");
    assertThat(f.at("/reasons/1/reason").asText()).isEqualTo("the stream ended without [DONE]");
    assertThat(f.at("/other/count").asLong()).isZero();
  }

  @Test
  void twoRealRunOutputsMergeToTheQuantilesOfAllTheirRequestsTogether() throws Exception {
    ReportInput one = Scenario.build(1);
    ReportInput two = Scenario.build(2);
    Path a = tmp.resolve("one");
    Path b = tmp.resolve("two");
    ReportWriter.write(a, one);
    ReportWriter.write(b, two);
    // Scenario numbers trace ids from 1 in both: give the second run its own generator id in the
    // high half, as a second instance draws one.
    List<String> rows = Files.readAllLines(b.resolve("pairs.csv"));
    List<String> renamed = new ArrayList<>(List.of(rows.get(0)));
    for (String row : rows.subList(1, rows.size())) {
      List<String> f = RunMerge.splitCsv(row);
      renamed.add(row.replace(f.get(1), "ffffffff" + f.get(1).substring(8)));
    }
    Files.write(b.resolve("pairs.csv"), renamed);

    RunMerge.Result r = RunMerge.merge(List.of(a, b), tmp.resolve("merged"), null);
    PhaseStats truth = one.phaseStats().copy();
    truth.merge(two.phaseStats());
    for (String phase : List.of("client_total", "queue", "generation", "network_envelope")) {
      for (double q : new double[] {0.5, 0.95, 0.99}) {
        double expected = truth.quantileMs(phase, q);
        // Each log keeps microseconds at two significant digits: 1 % of the value.
        assertThat(r.stats().quantileMs(phase, q))
            .as("%s p%s", phase, q * 100)
            .isCloseTo(expected, within(Math.abs(expected) * 0.02 + 0.01));
      }
      assertThat(r.stats().count(phase)).isEqualTo(truth.count(phase));
    }
    // Two negative envelopes per run stay negative and counted after the merge.
    assertThat(r.stats().negativeCount("network_envelope")).isEqualTo(4);
    assertThat(r.stats().joinCoverage()).isEqualTo(truth.joinCoverage());
    assertThat(r.requests().get("sent")).isEqualTo(one.sent() + two.sent());
    assertThat(r.pairs()).isEqualTo(one.pairs().size() + two.pairs().size());
  }

  @Test
  void aTraceIdInTwoInputsFailsTheMergeAndWritesNothing() throws Exception {
    Path a = syntheticRun("a", "aaaaaaaa", 10, 10);
    Path b = syntheticRun("b", "aaaaaaaa", 10, 10);
    RunMerge.MergeException e =
        catchThrowableOfType(
            RunMerge.MergeException.class,
            () -> RunMerge.merge(List.of(a, b), tmp.resolve("merged"), null));
    assertThat(e.exitCode()).isEqualTo(4);
    assertThat(e.getMessage()).contains("aaaaaaaa" + "0".repeat(24)).contains(a.toString());
    assertThat(tmp.resolve("merged")).doesNotExist();
  }

  private record Cli(int code, String out, String err) {}

  private Cli cli(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    CommandLine cl = new CommandLine(new LoadMain());
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    int code = cl.execute(args);
    return new Cli(code, out.toString(), err.toString());
  }

  @Test
  void theCommandLineExitCodes() throws Exception {
    Path a = syntheticRun("a", "aaaaaaaa", 900, 10);
    Path b = syntheticRun("b", "bbbbbbbb", 100, 1000);
    Path budgets = tmp.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: chat\n    model: \"*\"\n    quantile: 0.95\n    window: 10m\n"
            + "    limits_ms: {queue: 250}\n",
        StandardCharsets.UTF_8);

    Cli ok = cli("merge", a.toString(), b.toString(), "--out", tmp.resolve("m1").toString());
    assertThat(ok.code()).as(ok.err()).isZero();
    assertThat(ok.out()).contains("merged 2 runs: 1000 requests").contains("queue");

    Cli breached =
        cli(
            "merge",
            a.toString(),
            b.toString(),
            "--budgets",
            budgets.toString(),
            "--out",
            tmp.resolve("m2").toString());
    assertThat(breached.code()).isEqualTo(3);
    assertThat(breached.out()).contains("BREACH chat: queue");

    Cli collision = cli("merge", a.toString(), a.toString(), "--out", tmp.resolve("m3").toString());
    assertThat(collision.code()).isEqualTo(4);
    assertThat(collision.err()).contains("appears in");

    assertThat(cli("merge", a.toString()).code()).isEqualTo(2);
    Cli missing = cli("merge", a.toString(), tmp.resolve("nope").toString(), "--out", "x");
    assertThat(missing.code()).isEqualTo(2);
    assertThat(missing.err()).contains("holds no summary.json");
  }
}
