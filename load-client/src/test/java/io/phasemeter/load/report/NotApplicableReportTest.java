package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.ns;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import io.phasemeter.load.schedule.StepInfo;
import io.phasemeter.load.workload.Api;
import java.io.ByteArrayInputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An embeddings run: TTFT, TPOT and ITL do not exist for it, so every output says "not applicable"
 * (or null, or nothing) where a streamed run shows figures, never zero; a budget on them is neither
 * held nor breached.
 */
class NotApplicableReportTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path out;

  /** An embedding request as the runner measures it: no first token, no TPOT, no gaps. */
  private static ClientResult embedding(long seq, double startMs, double totalMs) {
    return new ClientResult(
        seq,
        Fixtures.traceId(seq),
        "1k",
        0,
        ns(startMs),
        ns(startMs + 0.1),
        ns(0.3),
        ns(totalMs * 0.9),
        -1,
        ns(totalMs),
        -1,
        0,
        200,
        ErrorClass.NONE,
        null,
        1024,
        0,
        1024,
        -1,
        null);
  }

  /**
   * The proxy's record of it. A proxy ought to write server_ttft_ms null for embeddings; this one
   * writes a value, which no output may show.
   */
  private static ServerRecord record(long seq, double rootMs) {
    ServerRecord r = Fixtures.server(seq, rootMs, 0.1, 1.0);
    return new ServerRecord(
        r.traceId(),
        r.model(),
        r.pool(),
        false,
        200,
        "success",
        rootMs,
        1.0,
        r.phasesMs(),
        r.unattributedMs(),
        null,
        1024L,
        null,
        true,
        null,
        false,
        "/v1/embeddings",
        "embeddings");
  }

  private ReportInput run(List<BudgetResult> budgets) {
    return run(budgets, 0, Api.EMBEDDINGS);
  }

  /** 40 embeddings requests numbered from {@code first}, as a run of {@code api} reports them. */
  private ReportInput run(List<BudgetResult> budgets, long first, Api api) {
    List<Pair> pairs = new ArrayList<>();
    PhaseStats stats = PhaseStats.create();
    for (long seq = first; seq < first + 40; seq++) {
      Pair p = new Pair(embedding(seq, seq * 100, 20 + seq % 7), record(seq, 18 + seq % 7));
      pairs.add(p);
      stats.add(p);
    }
    long start = 1_000_000_000L;
    return new ReportInput(
        pairs,
        List.of(new StepInfo(0, 10, 0, start, start + ns(4000), 40, 0)),
        start,
        start + ns(4000),
        Map.of("model", "m", "api", "embeddings"),
        40,
        40,
        0,
        0,
        0,
        10,
        budgets,
        stats,
        null,
        api);
  }

  private static ClientBudgets budgets(Path dir) throws Exception {
    Path file = dir.resolve("budgets.yaml");
    Files.writeString(
        file,
        "budgets:\n"
            + "  - name: embed\n"
            + "    quantile: 0.95\n"
            + "    window: 1m\n"
            + "    limits_ms: {ttft: 1, client_ttft: 1, tpot: 1, itl: 1, client_total: 1,"
            + " ttft_envelope: 1}\n"
            + "    max_error_rate: 0.01\n"
            + "    min_join_coverage: 0.5\n");
    return ClientBudgets.load(file);
  }

  @Test
  void budgetsOnTokenFiguresAreNotApplicableOthersAreJudged() throws Exception {
    ReportInput in = run(List.of());
    List<BudgetResult> results = budgets(out).judgeLatency("m", in.phaseStats(), Api.EMBEDDINGS);
    assertThat(results).hasSize(6);
    for (BudgetResult r : results) {
      if (r.phase().equals("client_total")) {
        assertThat(r.applicable()).isTrue();
        assertThat(r.breached()).as("every request took 20 ms or more").isTrue();
      } else {
        assertThat(r.applicable()).as(r.phase()).isFalse();
        assertThat(r.breached()).isFalse();
        assertThat(r.notApplicable()).startsWith("embeddings generate no tokens");
        assertThat(r.observedMs()).isNaN();
      }
    }
    // The same budgets on a run that generates tokens are all judged.
    assertThat(budgets(out).judgeLatency("m", in.phaseStats(), Api.RESPONSES))
        .allMatch(BudgetResult::applicable);
    // Gates are never replaced.
    List<BudgetResult> gates = budgets(out).judgeGates("m", 0, 1, true);
    assertThat(ClientBudgets.notApplicable(gates, Api.EMBEDDINGS)).isEqualTo(gates);
  }

  @Test
  void summaryCsvAndHtmlSayNotApplicableNeverZero() throws Exception {
    ReportInput probe = run(List.of());
    List<BudgetResult> judged =
        new ArrayList<>(budgets(out).judgeLatency("m", probe.phaseStats(), Api.EMBEDDINGS));
    ReportInput in = run(judged);
    ReportWriter.write(out, in);

    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertThat(s.get("api").asText()).isEqualTo("embeddings");
    for (String name : Api.EMBEDDINGS.notApplicable()) {
      assertThat(s.get("phases").get(name).isNull()).as(name).isTrue();
    }
    assertThat(s.get("phases").get("client_total").get("count").asLong()).isEqualTo(40);
    assertThat(s.get("phases").get("server_root").get("count").asLong()).isEqualTo(40);
    assertThat(s.get("not_applicable").get("phases").toString())
        .isEqualTo("[\"client_ttft\",\"ttft_envelope\",\"server_ttft\",\"tpot\",\"itl\"]");
    assertThat(s.get("output_token_throughput").isNull()).isTrue();
    assertThat(s.get("total_output_tokens").isNull()).isTrue();
    assertThat(s.get("negative_envelopes").get("ttft_envelope").isNull()).isTrue();
    for (JsonNode b : s.get("budgets")) {
      if (b.get("phase").asText().equals("client_total")) {
        assertThat(b.get("breached").asBoolean()).isTrue();
      } else {
        assertThat(b.get("breached").isNull()).as(b.toString()).isTrue();
        assertThat(b.get("not_applicable").asText()).startsWith("embeddings generate no tokens");
        assertThat(b.has("count")).isFalse();
      }
    }
    for (JsonNode step : s.get("steps")) {
      for (String name : Api.EMBEDDINGS.notApplicable()) {
        assertThat(step.get("phases").has(name)).isFalse();
      }
    }

    List<String> lines = Files.readAllLines(out.resolve("pairs.csv"));
    List<String> header = Arrays.asList(lines.get(0).split(","));
    for (String row : lines.subList(1, lines.size())) {
      List<String> f = RunMerge.splitCsv(row);
      for (String column :
          List.of("client_ttft_ms", "tpot_ms", "server_ttft_ms", "ttft_envelope_ms")) {
        assertThat(f.get(header.indexOf(column))).as(column).isEmpty();
      }
      assertThat(f.get(header.indexOf("client_total_ms"))).isNotEmpty();
    }

    String html = Files.readString(out.resolve("report.html"));
    DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(html.getBytes(StandardCharsets.UTF_8)));
    assertThat(html).contains("not applicable to embeddings");
    assertThat(html).contains("output tokens: not applicable");
    // Only client_total was judged (and breached: its limit is 1 ms).
    assertThat(html).contains("1 of 1 budgets breached (5 not applicable to embeddings)");
    assertThat(html).contains("not applicable (embeddings generate no tokens");
    assertThat(html).doesNotContain("client ttft p95").doesNotContain("tpot p95");
  }

  @Test
  void theLiveTableNamesTheFiguresThatDoNotApply() {
    ReportInput in = run(List.of());
    StringWriter w = new StringWriter();
    LiveTable.print(
        new PrintWriter(w, true),
        "header",
        in.phaseStats(),
        in.phaseStats(),
        List.of(),
        b -> null,
        Api.EMBEDDINGS);
    String table = w.toString();
    assertThat(table)
        .contains(
            "  client_ttft, ttft_envelope, server_ttft, tpot, itl: not applicable (embeddings"
                + " generate no tokens");
    assertThat(table).contains("  client_total ");
    // The record's server_ttft is not shown as a row: it does not exist for embeddings.
    assertThat(table.lines().filter(l -> l.startsWith("  server_ttft "))).isEmpty();

    StringWriter plain = new StringWriter();
    LiveTable.print(
        new PrintWriter(plain, true),
        "header",
        in.phaseStats(),
        in.phaseStats(),
        List.of(),
        b -> null,
        Api.COMPLETIONS);
    assertThat(plain.toString()).doesNotContain("not applicable");
  }

  @Test
  void aMergeOfEmbeddingsRunsKeepsThemNotApplicableAndRefusesAnotherApi() throws Exception {
    ClientBudgets budgets = budgets(out);
    Path a = out.resolve("a");
    Path b = out.resolve("b");
    Path c = out.resolve("c");
    ReportWriter.write(a, run(List.of(), 0, Api.EMBEDDINGS));
    ReportWriter.write(b, run(List.of(), 1000, Api.EMBEDDINGS));
    ReportWriter.write(c, run(List.of(), 2000, Api.COMPLETIONS));

    RunMerge.Result r = RunMerge.merge(List.of(a, b), out.resolve("ab"), budgets);
    assertThat(r.budgets()).hasSize(6);
    assertThat(r.budgets().stream().filter(BudgetResult::applicable).map(BudgetResult::phase))
        .containsExactly("client_total");
    assertThat(r.basis()).containsOnly(RunMerge.NOT_APPLICABLE, RunMerge.EXACT_PAIRS);
    JsonNode merged = JSON.readTree(out.resolve("ab").resolve("summary.json").toFile());
    assertThat(merged.get("api").asText()).isEqualTo("embeddings");
    assertThat(merged.get("phases").get("client_ttft").isNull()).isTrue();
    assertThat(merged.get("phases").get("client_total").get("count").asLong()).isEqualTo(80);

    RunMerge.MergeException e =
        org.assertj.core.api.Assertions.catchThrowableOfType(
            RunMerge.MergeException.class,
            () -> RunMerge.merge(List.of(a, c), out.resolve("ac"), budgets));
    assertThat(e.exitCode()).isEqualTo(2);
    assertThat(e.getMessage()).contains("ran api completions, the first input embeddings");
  }
}
