package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.load.workload.replay.MooncakeTraces;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36's acceptance: a 1,000-request Mooncake-format trace (4 shared prefixes of two 512-token
 * blocks, then a partial block of each row's own) replayed at speed 2 through the proxy to the
 * simulator with its prefix cache on, and the same trace with its prefixes made distinct ({@code
 * --replay-prefixes distinct}) as the control. Injected truth: the simulator prefills 20,000 tokens
 * a second, so a row whose 1,024-token prefix is cached skips 51.2 ms of prefill. Both replays
 * leave every row at its trace time ÷ 2 with its exact lengths and are joined in full; the
 * simulator's own counter says which replay hit its cache (the distinct one not once), and the
 * sharing rows' time to first token is lower than the control's by the skipped prefill.
 */
class ReplayPrefixCacheTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** 1,000 rows over 10 s of trace time; 4 prefixes of 2 blocks; outputs of 1 to 4 tokens. */
  private static final MooncakeTraces.Shape SHAPE =
      new MooncakeTraces.Shape(1000, 10_000, 4, 2, 0, 4, 3636);

  private static final double PREFILL_TOKENS_PER_S = 20_000;
  private static final Pattern HITS =
      Pattern.compile("(?m)^vllm:prefix_cache_hits_total\\{[^}]*} ([0-9.eE+]+)$");

  private static Vertx servers;
  private static Simulator sim;
  private static PhasemeterProxy proxy;

  @TempDir static Path dir;

  @BeforeAll
  static void start() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(128)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(PREFILL_TOKENS_PER_S))
            .await(10, TimeUnit.SECONDS);
    proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams:"
                        + " [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: 128\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  /** One replay of the trace; its pairs.csv rows (header first). */
  private static List<List<String>> replay(Path trace, String prefixes) throws Exception {
    Path out = dir.resolve(prefixes);
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
            .execute(
                RunArgs.quiet(
                    "run",
                    "--url",
                    "http://127.0.0.1:" + proxy.port(),
                    "--admin",
                    "http://127.0.0.1:" + proxy.adminPort(),
                    "--model",
                    "sim-llama",
                    "--replay",
                    trace.toString(),
                    "--replay-speed",
                    "2",
                    "--replay-prefixes",
                    prefixes,
                    "--join-grace",
                    "500ms",
                    "--report-interval",
                    "10s",
                    "--out",
                    out.toString()));
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    JsonNode req = s.get("requests");
    assertThat(req.get("sent").asLong()).isEqualTo(1000);
    assertThat(req.get("ok").asLong()).isEqualTo(1000);
    assertThat(req.get("invalid").asLong()).as("usage differs from the lengths asked").isZero();
    assertThat(req.get("dropped").asLong()).isZero();
    assertThat(s.get("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(s.get("phases").get("schedule_lag").get("count").asLong()).isEqualTo(1000);
    assertThat(s.get("conditions").get("replay_prefixes").asText()).isEqualTo(prefixes);
    List<List<String>> rows = new ArrayList<>();
    for (String line : Files.readAllLines(out.resolve("pairs.csv"))) {
      rows.add(RunMerge.splitCsv(line));
    }
    assertThat(rows).hasSize(1001);
    // Every row left at its trace time ÷ 2 after the clock started, to the microsecond.
    List<MooncakeTraces.Row> trace1 = MooncakeTraces.rows(SHAPE);
    List<String> h = rows.get(0);
    int seq = h.indexOf("seq");
    int intended = h.indexOf("intended_ms");
    int joined = h.indexOf("joined");
    for (List<String> r : rows.subList(1, rows.size())) {
      MooncakeTraces.Row row = trace1.get(Integer.parseInt(r.get(seq)) - 1);
      assertThat(r.get(intended))
          .as("seq " + r.get(seq))
          .isEqualTo(String.format(Locale.ROOT, "%.3f", row.timestampMs() / 2.0));
      assertThat(r.get(joined)).isEqualTo("true");
    }
    return rows;
  }

  /** The simulator's {@code vllm:prefix_cache_hits_total}, in tokens. */
  private static long hits() throws Exception {
    HttpResponse<String> r =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + sim.port() + "/metrics"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
    Matcher m = HITS.matcher(r.body());
    assertThat(m.find()).as(r.body()).isTrue();
    return (long) Double.parseDouble(m.group(1));
  }

  /** The median of a pairs.csv column over the rows from the 101st request on. */
  private static double median(List<List<String>> rows, String column) {
    int c = rows.get(0).indexOf(column);
    int seq = rows.get(0).indexOf("seq");
    double[] v =
        rows.subList(1, rows.size()).stream()
            .filter(r -> Integer.parseInt(r.get(seq)) > 100)
            .mapToDouble(r -> Double.parseDouble(r.get(c)))
            .sorted()
            .toArray();
    return v[v.length / 2];
  }

  @Test
  void theSharingRowsGetTheirFirstTokenSoonerThanTheDistinctControl() throws Exception {
    Path trace = MooncakeTraces.write(dir.resolve("mooncake.jsonl"), SHAPE);

    long before = hits();
    List<List<String>> distinct = replay(trace, "distinct");
    long distinctHits = hits() - before;
    List<List<String>> shared = replay(trace, "shared");
    long sharedHits = hits() - before - distinctHits;

    // Distinct prefixes share no 16-token block with anything the simulator has seen.
    assertThat(distinctHits).isZero();
    // Shared: at most every row's two prefix blocks, and most of them (a row whose prefix's first
    // prefill had not ended yet misses, as on a real engine).
    long most = 1000L * 1024;
    assertThat(sharedHits).isLessThanOrEqualTo(most).isGreaterThan(most / 2);

    // The prefill a hit skips: 1,024 tokens at 20,000 tokens/s, 51.2 ms. The medians differ by
    // about that; half of it is the bound, far above the noise of a median of 900 requests.
    double skippedMs = 1024 / PREFILL_TOKENS_PER_S * 1000;
    for (String column : List.of("client_ttft_ms", "server_ttft_ms")) {
      double d = median(distinct, column);
      double s = median(shared, column);
      System.out.printf(
          Locale.ROOT,
          "ReplayPrefixCacheTest: %s median distinct %.2f ms, shared %.2f ms; hits %d tokens%n",
          column,
          d,
          s,
          sharedHits);
      assertThat(d - s)
          .as(column + ": distinct " + d + " ms, shared " + s + " ms")
          .isGreaterThan(skippedMs / 2);
    }
  }
}
