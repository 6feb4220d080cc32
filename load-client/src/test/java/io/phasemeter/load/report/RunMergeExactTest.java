package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.budget.LatencyLimit;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter load merge} judges latency budgets on exact counts as a run does: from the
 * instances' summary.json counts, else from the merged pairs.csv, and only for a phase that just
 * the histograms hold on the merged quantile, which the merged summary says. Two instances, 50
 * requests each, against "p95 of queue ≤ 250 ms": 4 of the 100 above, so the budget holds, while
 * the merged histogram's p95 reads 250.61 ms (its bucket holds 249.56–250.61 ms).
 */
class RunMergeExactTest {
  @TempDir Path tmp;

  /** 5 at 100 ms, 43 at {@code bulkMs}, 2 at 300 ms. */
  private static List<Double> queueValues(double bulkMs) {
    List<Double> out = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      out.add(i < 5 ? 100.0 : i < 48 ? bulkMs : 300.0);
    }
    return out;
  }

  private Path run(String name, String tracePrefix, List<Double> queueMs, boolean withCounts)
      throws Exception {
    Path dir = Files.createDirectories(tmp.resolve(name));
    try (PrintStream ps =
        new PrintStream(Files.newOutputStream(dir.resolve("phases.hlog")), false, "UTF-8")) {
      HistogramLogWriter w = new HistogramLogWriter(ps);
      w.outputLogFormatVersion();
      w.outputLegend();
      Histogram queue = new Histogram(2);
      Histogram itl = new Histogram(2);
      for (double ms : queueMs) {
        queue.recordValue(Math.round(ms * 1000));
        // Inter-token gaps: only the histogram holds them (pairs.csv has no column).
        itl.recordValue(Math.round(ms * 1000));
      }
      queue.setTag("queue");
      itl.setTag("itl");
      w.outputIntervalHistogram(queue);
      w.outputIntervalHistogram(itl);
    }
    int queueColumn = PairsCsv.HEADER.indexOf("queue_ms");
    List<String> lines = new ArrayList<>();
    lines.add(String.join(",", PairsCsv.HEADER));
    for (int i = 0; i < queueMs.size(); i++) {
      List<String> f = new ArrayList<>();
      for (int c = 0; c < PairsCsv.HEADER.size(); c++) {
        f.add("");
      }
      f.set(0, String.valueOf(i));
      f.set(1, String.format("%s%024x", tracePrefix, i));
      f.set(4, "200");
      f.set(5, "NONE");
      f.set(7, "true");
      f.set(queueColumn, String.format(Locale.ROOT, "%.3f", queueMs.get(i)));
      lines.add(String.join(",", f));
    }
    Files.write(dir.resolve("pairs.csv"), lines);
    long limit = 250_000_000L;
    long atOrBelow = queueMs.stream().filter(ms -> Math.round(ms * 1e6) <= limit).count();
    String budgets =
        withCounts
            ? ",\"budgets\":[{\"name\":\"b\",\"phase\":\"queue\",\"limit_ms\":250.0,"
                + "\"observed_ms\":250.6,\"breached\":false,\"at_or_below\":"
                + atOrBelow
                + ",\"count\":"
                + queueMs.size()
                + "}]"
            : "";
    int n = queueMs.size();
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
            + "},\"achieved_rate\":1"
            + budgets
            + ",\"conditions\":{\"model\":\"sim-llama\"}}");
    return dir;
  }

  private ClientBudgets budgets() throws Exception {
    Path f = tmp.resolve("b.yaml");
    Files.writeString(
        f,
        "budgets:\n  - name: b\n    model: \"*\"\n    quantile: 0.95\n    window: 1m\n"
            + "    limits_ms: {queue: 250, itl: 250}\n");
    return ClientBudgets.load(f);
  }

  private void check(boolean withCounts, String basis) throws Exception {
    Path a = run("a", "aaaaaaaa", queueValues(249.9), withCounts);
    Path b = run("b", "bbbbbbbb", queueValues(250.0), withCounts);
    RunMerge.Result r = RunMerge.merge(List.of(a, b), tmp.resolve("merged"), budgets());

    BudgetResult queue = r.budgets().get(0);
    assertThat(queue.phase()).isEqualTo("queue");
    assertThat(r.basis().get(0)).isEqualTo(basis);
    assertThat(queue.counts()).isEqualTo(new BudgetResult.Counts(96, 100));
    // The merged quantile reads above the limit; the exact verdict holds, as the proxy's would.
    assertThat(queue.observedMs()).isGreaterThan(250);
    assertThat(queue.breached()).isFalse();
    assertThat(queue.breached()).isEqualTo(LatencyLimit.breached(0.95, 96, 100));

    // itl: only histograms hold it, so the quantile decides, and the summary says so.
    BudgetResult itl = r.budgets().get(1);
    assertThat(r.basis().get(1)).isEqualTo(RunMerge.QUANTILE);
    assertThat(itl.counts()).isNull();
    assertThat(itl.breached()).isTrue();
    assertThat(r.quantileFallback()).isTrue();

    JsonNode s = new ObjectMapper().readTree(tmp.resolve("merged/summary.json").toFile());
    assertThat(s.at("/budgets/0/basis").asText()).isEqualTo(basis);
    assertThat(s.at("/budgets/0/at_or_below").asLong()).isEqualTo(96);
    assertThat(s.at("/budgets/0/count").asLong()).isEqualTo(100);
    assertThat(s.at("/budgets/0/over_limit_share").asDouble()).isEqualTo(0.04);
    assertThat(s.at("/budgets/0/breached").asBoolean()).isFalse();
    assertThat(s.at("/budgets/1/basis").asText()).isEqualTo("quantile");
    assertThat(s.at("/budgets/1/over_limit_share").isMissingNode()).isTrue();
    assertThat(s.at("/budgets_note").asText()).contains("quantile").contains("not by exact");
  }

  @Test
  void theInstancesExactCountsAreSummed() throws Exception {
    check(true, RunMerge.EXACT_SUMMARIES);
  }

  @Test
  void withoutThemPairsCsvIsCounted() throws Exception {
    check(false, RunMerge.EXACT_PAIRS);
  }
}
