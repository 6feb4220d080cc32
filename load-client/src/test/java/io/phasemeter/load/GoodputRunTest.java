package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Goodput end to end: {@code load run --slo} (and a budget's {@code slo_ms}) against the simulator,
 * behind the proxy where a joined objective is judged, with the truth known per request: the
 * simulator decodes 10 ms per token with an instant prefill, so a request's client_total is its
 * output length × 10 ms, whatever the machine; its fault injection fails a share of requests.
 */
class GoodputRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private Simulator sim;
  private PhasemeterProxy proxy;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  private void startSim(double errorRate) throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(64)
                    .withDecodeStepMs(10)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000)
                    .withErrorRate(errorRate)
                    .withSeed(7))
            .await(10, TimeUnit.SECONDS);
  }

  private void startProxy() throws Exception {
    proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams:"
                        + " [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: 64\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    if (servers != null) {
      servers.close().await(10, TimeUnit.SECONDS);
    }
  }

  private int run(String... args) {
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(args));
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  private List<List<String>> rows() throws Exception {
    List<List<String>> rows = new ArrayList<>();
    for (String line : Files.readAllLines(dir.resolve("pairs.csv"))) {
      rows.add(RunMerge.splitCsv(line));
    }
    return rows;
  }

  @Test
  void onlyTheLongRequestsMissE2elAndFailuresAreNeverGood() throws Exception {
    startSim(0.2);
    startProxy();
    // 2 output tokens: ~10 ms end to end; 120: ~1.19 s. e2el 600 ms splits them, with a wide
    // margin either side; ttft, tpot (10 ms) and queue hold for every request that succeeded.
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--rate",
            "15",
            "--arrival",
            "constant",
            "--duration",
            "2s",
            "--mix",
            "16:2=0.5,16:120=0.5",
            "--slo",
            "ttft:1000,tpot=50ms,e2el=600ms,queue=1s",
            "--max-error-rate",
            "100%",
            "--report-interval",
            "1s",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();

    List<List<String>> rows = rows();
    List<String> h = rows.get(0);
    int cls = h.indexOf("class");
    int bucket = h.indexOf("bucket");
    int joined = h.indexOf("joined");
    int good = h.indexOf("good");
    int missed = h.indexOf("slo_missed");
    // Appended after the columns before them; the proxy's tenant and verdict after those.
    int last = h.indexOf("server_slo_missed") + 1;
    assertThat(h.subList(last - 5, last))
        .containsExactly("good", "slo_missed", "tenant", "server_slo", "server_slo_missed");
    long shortOk = 0;
    long longOk = 0;
    long failed = 0;
    long notJoinedShort = 0;
    long notJoinedLong = 0;
    for (List<String> r : rows.subList(1, rows.size())) {
      boolean ok = r.get(cls).equals("NONE");
      boolean isLong = r.get(bucket).endsWith("120");
      if (!ok) {
        failed++;
        assertThat(r.get(good)).isEqualTo("false");
        assertThat(r.get(missed)).isEqualTo("error");
      } else if (!r.get(joined).equals("true")) {
        // Unjudged on queue; a long one misses client_total first (e2el comes before queue).
        assertThat(r.get(good)).isEqualTo("false");
        assertThat(r.get(missed)).isEqualTo(isLong ? "client_total" : "queue");
        if (isLong) {
          notJoinedLong++;
        } else {
          notJoinedShort++;
        }
      } else if (isLong) {
        longOk++;
        assertThat(r.get(good)).as(r.toString()).isEqualTo("false");
        assertThat(r.get(missed)).isEqualTo("client_total");
      } else {
        shortOk++;
        assertThat(r.get(good)).as(r.toString()).isEqualTo("true");
        assertThat(r.get(missed)).isEmpty();
      }
    }
    long notJoined = notJoinedShort + notJoinedLong;
    assertThat(failed).as("the fault injection failed some").isPositive();
    assertThat(shortOk).isPositive();
    assertThat(longOk).isPositive();

    JsonNode s = summary();
    JsonNode g = s.path("goodput");
    long sent = s.path("requests").path("sent").asLong();
    long ok = s.path("requests").path("ok").asLong();
    assertThat(sent).isEqualTo(rows.size() - 1);
    assertThat(g.path("objectives_ms").toString())
        .isEqualTo(
            "{\"client_ttft\":1000.0,\"tpot\":50.0,\"client_total\":600.0,\"queue\":1000.0}");
    assertThat(g.path("source").asText()).isEqualTo("--slo");
    assertThat(g.path("sent").asLong()).isEqualTo(sent);
    assertThat(g.path("good").asLong()).isEqualTo(shortOk);
    assertThat(g.path("failed").asLong()).isEqualTo(failed).isEqualTo(sent - ok);
    assertThat(g.path("attainment").asDouble()).isEqualTo((double) shortOk / sent);
    assertThat(g.path("request_goodput").asDouble())
        .isCloseTo(shortOk / s.path("duration_s").asDouble(), within(1e-9));
    // Same time base as output_token_throughput: the short requests' 2 tokens each.
    assertThat(g.path("output_token_goodput").asDouble())
        .isCloseTo(2.0 * shortOk / s.path("duration_s").asDouble(), within(1e-9));
    assertThat(g.path("missed").toString())
        .isEqualTo(
            "{\"client_ttft\":0,\"tpot\":0,\"client_total\":"
                + (longOk + notJoinedLong)
                + ",\"queue\":0}");
    assertThat(g.path("first_missed").toString())
        .isEqualTo(
            "{\"client_ttft\":0,\"tpot\":0,\"client_total\":"
                + (longOk + notJoinedLong)
                + ",\"queue\":"
                + notJoinedShort
                + ",\"error\":"
                + failed
                + "}");
    assertThat(g.path("unjudged").toString()).isEqualTo("{\"queue\":" + notJoined + "}");
    // Judged on every objective, or failed: all but the requests not joined.
    assertThat(g.path("judged").asLong()).isEqualTo(sent - notJoined);
    assertThat(s.path("conditions").path("slo").asText())
        .isEqualTo("client_ttft=1s,tpot=50ms,client_total=600ms,queue=1s");
    assertThat(s.path("conditions").path("slo_source").asText()).isEqualTo("--slo");
    assertThat(out.toString())
        .contains("goodput (--slo): attainment ")
        .contains(String.format(java.util.Locale.ROOT, "(%d good of %d sent)", shortOk, sent));
    String html = Files.readString(dir.resolve("report.html"));
    assertThat(html).contains("id=\"goodput\"").contains("Attainment per interval");
  }

  @Test
  void aBudgetsSloMsJudgesAndOneTokenMeetsTpot() throws Exception {
    startSim(0);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n"
            + "  - name: chat\n"
            + "    model: \"*\"\n"
            + "    quantile: 0.95\n"
            + "    window: 1m\n"
            + "    limits_ms: {client_total: 60000}\n"
            + "    slo_ms: {tpot: 0.001, client_total: 60000}\n");
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--rate",
            "20",
            "--duration",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "1",
            "--budgets",
            budgets.toString(),
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode g = summary().path("goodput");
    // One output token: no gap to average, TPOT 0 (vLLM's convention), so 1 µs holds.
    assertThat(g.path("source").asText()).isEqualTo("budgets: chat");
    assertThat(g.path("good").asLong()).isEqualTo(g.path("sent").asLong()).isPositive();
    assertThat(g.path("attainment").asDouble()).isEqualTo(1.0);
    assertThat(g.has("unjudged")).isTrue();
    assertThat(g.path("unjudged").size()).isZero();
  }

  @Test
  void sloOnTheCommandLineWinsOverTheBudgetsFile() throws Exception {
    startSim(0);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: chat\n    limits_ms: {client_total: 60000}\n"
            + "    slo_ms: {client_ttft: 60000}\n");
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--rate",
            "10",
            "--duration",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "2",
            "--budgets",
            budgets.toString(),
            "--slo",
            "e2el=1ms",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.path("goodput").path("source").asText()).isEqualTo("--slo");
    assertThat(s.path("goodput").path("objectives_ms").toString())
        .isEqualTo("{\"client_total\":1.0}");
    // 2 tokens take 10 ms: none meets 1 ms; attainment is reported, the exit code stays 0.
    assertThat(s.path("goodput").path("good").asLong()).isZero();
    assertThat(s.path("goodput").path("attainment").asDouble()).isZero();
  }

  @Test
  void withoutObjectivesGoodputIsNullAndTheColumnsEmpty() throws Exception {
    startSim(0);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--rate",
            "10",
            "--duration",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "2",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.has("goodput")).isTrue();
    assertThat(s.path("goodput").isNull()).isTrue();
    List<List<String>> rows = rows();
    int good = rows.get(0).indexOf("good");
    assertThat(rows.get(0).get(good + 1)).isEqualTo("slo_missed");
    assertThat(rows.subList(1, rows.size()))
        .isNotEmpty()
        .allSatisfy(r -> assertThat(r.subList(good, good + 2)).containsExactly("", ""));
    assertThat(out.toString()).doesNotContain("goodput");
  }

  private int simRun(Path out, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + sim.port(),
                "--model",
                "sim-llama",
                "--rate",
                "10",
                "--duration",
                "500ms",
                "--mix",
                "16:2=0.5,16:60=0.5",
                "--out",
                out.toString()));
    args.addAll(List.of(more));
    return run(args.toArray(String[]::new));
  }

  @Test
  void mergeSumsGoodputOfRunsWithTheSameObjectivesAndRefusesDifferentOnes() throws Exception {
    startSim(0);
    Path a = dir.resolve("a");
    Path b = dir.resolve("b");
    Path c = dir.resolve("c");
    assertThat(simRun(a, "--slo", "e2el=300ms", "--seed", "1")).as(out + "\n" + err).isZero();
    assertThat(simRun(b, "--slo", "e2el=300", "--seed", "2")).as(out + "\n" + err).isZero();
    assertThat(simRun(c, "--slo", "e2el=400ms", "--seed", "3")).as(out + "\n" + err).isZero();
    JsonNode ga = JSON.readTree(a.resolve("summary.json").toFile()).path("goodput");
    JsonNode gb = JSON.readTree(b.resolve("summary.json").toFile()).path("goodput");

    Path merged = dir.resolve("ab");
    assertThat(run("merge", a.toString(), b.toString(), "--out", merged.toString()))
        .as(out + "\n" + err)
        .isZero();
    JsonNode g = JSON.readTree(merged.resolve("summary.json").toFile()).path("goodput");
    long sent = ga.path("sent").asLong() + gb.path("sent").asLong();
    long good = ga.path("good").asLong() + gb.path("good").asLong();
    assertThat(g.path("sent").asLong()).isEqualTo(sent);
    assertThat(g.path("good").asLong()).isEqualTo(good).isPositive();
    assertThat(g.path("attainment").asDouble()).isEqualTo((double) good / sent);
    assertThat(g.path("missed").path("client_total").asLong())
        .isEqualTo(
            ga.path("missed").path("client_total").asLong()
                + gb.path("missed").path("client_total").asLong())
        .isPositive();
    // The merged pairs.csv's good column says the same.
    List<String> lines = Files.readAllLines(merged.resolve("pairs.csv"));
    int goodColumn = RunMerge.splitCsv(lines.get(0)).indexOf("good");
    assertThat(
            lines.subList(1, lines.size()).stream()
                .filter(l -> RunMerge.splitCsv(l).get(goodColumn).equals("true"))
                .count())
        .isEqualTo(good);

    Path mixed = dir.resolve("ac");
    assertThat(run("merge", a.toString(), c.toString(), "--out", mixed.toString()))
        .as(out + "\n" + err)
        .isZero();
    JsonNode m = JSON.readTree(mixed.resolve("summary.json").toFile());
    assertThat(m.path("goodput").isNull()).isTrue();
    assertThat(m.path("goodput_note").asText()).startsWith("not merged: the runs' goodput");
  }

  @Test
  void objectivesThatCouldNeverBeJudgedAreRefusedAtStart() {
    String url = "http://127.0.0.1:9"; // never reached: refused before the run
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--api",
                "embeddings",
                "--slo",
                "ttft=500ms",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "phasemeter load: --slo: client_ttft: not applicable to --api embeddings (embeddings"
                + " generate no tokens: there is no first token, TPOT or ITL); set the objective"
                + " on client_total (e2el)");
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--no-stream",
                "--slo",
                "tpot=50",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "phasemeter load: --slo: tpot: the responses are not streamed (--no-stream): the"
                + " first token arrives with the last byte and there is no TPOT");
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--slo",
                "e2el=10s,queue=250ms",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "phasemeter load: --slo: queue: a figure of the proxy's record, joined per request:"
                + " it needs --admin");
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--slo",
                "ttfx=1s",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("phasemeter load: --slo: ttfx: unknown objective (known: ttft, tpot, e2el,");
    // vLLM's form, several arguments: the second one is read (and refused without --admin).
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--slo",
                "e2el:10000",
                "queue:250",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString()).contains("phasemeter load: --slo: queue: a figure of the proxy's");
    // And one quoted argument.
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--api",
                "embeddings",
                "--slo",
                "e2el:10000 ttft:500",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("phasemeter load: --slo: client_ttft: not applicable to --api embeddings");
    // Only the sampled requests would be joined: the others would all count as not good.
    assertThat(
            run(
                "run",
                "--url",
                url,
                "--admin",
                url,
                "--join-sampled-only",
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--slo",
                "e2el=10s,queue=250ms",
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "phasemeter load: --slo: queue: a figure of the proxy's record, joined per request:"
                + " with --join-sampled-only only the sampled requests are joined");
  }

  /** A budgets file shared by runs of every kind: objectives on client_ttft and queue. */
  private Path sharedBudgets() throws Exception {
    Path budgets = dir.resolve("shared-budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: chat\n    limits_ms: {client_total: 60000}\n"
            + "    slo_ms: {client_ttft: 500, queue: 250}\n");
    return budgets;
  }

  @Test
  void aBudgetsFilesObjectivesAnEmbeddingsRunCannotJudgeAreDroppedAndGoodputIsNull()
      throws Exception {
    startSim(0);
    Path budgets = sharedBudgets();
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--api",
            "embeddings",
            "--rate",
            "10",
            "--duration",
            "500ms",
            "--input-tokens",
            "16",
            "--budgets",
            budgets.toString(),
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.path("goodput").isNull()).isTrue();
    assertThat(s.path("goodput_note").asText())
        .isEqualTo(
            "not judged: no objective of budgets: chat can be judged in this run"
                + " (conditions.slo_skipped says why)");
    JsonNode skipped = s.path("conditions").path("slo_skipped");
    assertThat(skipped.fieldNames()).toIterable().containsExactly("client_ttft", "queue");
    assertThat(skipped.path("client_ttft").asText())
        .startsWith("not applicable to --api embeddings");
    assertThat(skipped.path("queue").asText()).contains("it needs --admin");
    assertThat(s.path("conditions").path("slo").isNull()).isTrue();
    assertThat(s.path("conditions").path("slo_source").asText()).isEqualTo("budgets: chat");
    assertThat(out.toString())
        .contains(
            "note: slo_ms of budget 'chat': not judged in this run; client_ttft: not applicable"
                + " to --api embeddings")
        .contains("(no objective left: goodput is null)");
  }

  @Test
  void aBudgetsFilesQueueObjectiveIsDroppedWithoutAdminAndTheRestJudged() throws Exception {
    startSim(0);
    Path budgets = sharedBudgets();
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--rate",
            "10",
            "--duration",
            "500ms",
            "--input-tokens",
            "16",
            "--output-tokens",
            "2",
            "--budgets",
            budgets.toString(),
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    JsonNode g = s.path("goodput");
    assertThat(g.path("objectives_ms").toString()).isEqualTo("{\"client_ttft\":500.0}");
    assertThat(g.path("source").asText()).isEqualTo("budgets: chat");
    assertThat(g.path("good").asLong()).isEqualTo(g.path("sent").asLong()).isPositive();
    assertThat(g.path("judged").asLong()).isEqualTo(g.path("sent").asLong());
    assertThat(s.has("goodput_note")).isFalse();
    assertThat(s.path("conditions").path("slo").asText()).isEqualTo("client_ttft=500ms");
    assertThat(s.path("conditions").path("slo_skipped").fieldNames())
        .toIterable()
        .containsExactly("queue");
    assertThat(out.toString())
        .contains("note: slo_ms of budget 'chat': not judged in this run; queue: a figure of the")
        .doesNotContain("goodput is null");
  }

  @Test
  void aBudgetsFileWithTtftInSloMsIsRefused() throws Exception {
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: chat\n    limits_ms: {queue: 250}\n    slo_ms: {ttft: 500}\n");
    assertThat(
            run(
                "run",
                "--url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--budgets",
                budgets.toString(),
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains(
            budgets
                + ": budgets[0] (chat).slo_ms.ttft: ambiguous: in limits_ms 'ttft' means the"
                + " server's figure; write client_ttft (the client's) or server_ttft (the"
                + " proxy's)");
  }
}
