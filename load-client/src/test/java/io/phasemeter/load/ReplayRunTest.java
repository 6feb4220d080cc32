package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run --replay} end to end: a synthetic Mooncake trace (200 rows over 6 s of trace
 * time, shared prefixes) replayed at speed 2 through the proxy to the simulator, against the truth
 * the trace file holds: each row's intended start is its timestamp ÷ 2 after the clock, to the
 * microsecond pairs.csv keeps; each request asks for and gets its row's exact lengths; every one is
 * joined; a session's later turn waits for its previous answer. And the synthetic workload with
 * shared prefixes against the same servers.
 */
class ReplayRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final MooncakeTraces.Shape SHAPE =
      new MooncakeTraces.Shape(200, 6000, 4, 1, 0, 8, 36);

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
                    .withSlots(64)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000))
            .await(10, TimeUnit.SECONDS);
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

  @AfterAll
  static void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private static int run(Path out, StringWriter stdout, StringWriter stderr, String... extra)
      throws Exception {
    return run(MooncakeTraces.write(dir.resolve("trace.jsonl"), SHAPE), out, stdout, stderr, extra);
  }

  private static int run(
      Path trace, Path out, StringWriter stdout, StringWriter stderr, String... extra)
      throws Exception {
    List<String> args =
        new ArrayList<>(
            List.of(
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
                "--join-grace",
                "500ms",
                "--report-interval",
                "1s",
                "--out",
                out.toString()));
    args.addAll(List.of(extra));
    return LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
        .execute(RunArgs.quiet(args));
  }

  private static List<List<String>> rows(Path out) throws Exception {
    List<List<String>> rows = new ArrayList<>();
    for (String line : Files.readAllLines(out.resolve("pairs.csv"))) {
      rows.add(RunMerge.splitCsv(line));
    }
    return rows;
  }

  @Test
  void eachRowLeavesAtItsTraceTimeWithItsExactLengthsAndIsJoined() throws Exception {
    Path out = dir.resolve("whole");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code = run(out, stdout, stderr);
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    assertThat(stdout.toString())
        .contains("open model, trace replay at speed 2")
        .contains("(mooncake, 200 rows, prefixes shared), exact lengths, streamed");

    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    JsonNode req = s.get("requests");
    assertThat(req.get("sent").asLong()).isEqualTo(200);
    assertThat(req.get("ok").asLong()).isEqualTo(200);
    assertThat(req.get("invalid").asLong()).as("usage differs from the lengths asked").isZero();
    assertThat(req.get("dropped").asLong()).isZero();
    assertThat(s.get("join_coverage").asDouble()).isEqualTo(1.0);
    // Schedule lag is reported for every request, as for --rate.
    assertThat(s.get("phases").get("schedule_lag").get("count").asLong()).isEqualTo(200);
    JsonNode c = s.get("conditions");
    assertThat(c.get("replay_format").asText()).isEqualTo("mooncake");
    assertThat(c.get("replay_rows").asLong()).isEqualTo(200);
    assertThat(c.get("replay_rows_sent_max").asLong()).isEqualTo(200);
    assertThat(c.get("replay_speed").asDouble()).isEqualTo(2.0);
    assertThat(c.get("replay_span_s").asDouble()).isEqualTo(6.0);
    assertThat(c.get("replay_prefixes").asText()).isEqualTo("shared");
    assertThat(c.get("replay_sessions").asLong()).isZero();
    assertThat(c.get("replay_hash_ids").asLong()).isEqualTo(4 + 200);
    assertThat(c.get("replay_sha256").asText())
        .isEqualTo(
            java.util.HexFormat.of()
                .formatHex(
                    java.security.MessageDigest.getInstance("SHA-256")
                        .digest(Files.readAllBytes(dir.resolve("trace.jsonl")))));
    assertThat(c.get("arrival").asText()).startsWith("open model, trace replay at speed 2");
    // The step lasts the trace's span ÷ 2 and 1 ms.
    assertThat(s.get("steps").get(0).get("duration_s").asDouble()).isEqualTo(3.001);

    List<MooncakeTraces.Row> trace = MooncakeTraces.rows(SHAPE);
    List<List<String>> rows = rows(out);
    List<String> h = rows.get(0);
    assertThat(h.get(h.indexOf("server_slo_missed") + 1)).isEqualTo("intended_ms");
    int seq = h.indexOf("seq");
    int intended = h.indexOf("intended_ms");
    int joined = h.indexOf("joined");
    int bucket = h.indexOf("bucket");
    assertThat(rows).hasSize(201);
    for (List<String> r : rows.subList(1, rows.size())) {
      MooncakeTraces.Row row = trace.get(Integer.parseInt(r.get(seq)) - 1);
      assertThat(r.get(intended))
          .as("seq " + r.get(seq))
          .isEqualTo(String.format(Locale.ROOT, "%.3f", row.timestampMs() / 2.0));
      assertThat(r.get(joined)).isEqualTo("true");
      assertThat(r.get(bucket)).isIn("trace-1k", "trace-512");
    }
  }

  @Test
  void aSessionsLaterTurnWaitsForThePreviousAnswerAndIsIntendedWhenItEnded() throws Exception {
    // At speed 2. a2 is due at 50 ms, long before a1 can end (150 tokens of 2 ms each); b2 has
    // no timestamp (AIPerf's multi-turn form): 200 ms ÷ 2 after b1's last byte.
    Path trace =
        Files.writeString(
            dir.resolve("sessions.jsonl"),
            String.join(
                "\n",
                "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 150,"
                    + " \"session_id\": \"ann@example.com\"}",
                "{\"timestamp\": 20, \"input_length\": 100, \"output_length\": 4, \"session_id\":"
                    + " \"bob@example.com\"}",
                "{\"timestamp\": 40, \"input_length\": 100, \"output_length\": 4}",
                "{\"timestamp\": 100, \"input_length\": 800, \"output_length\": 4,"
                    + " \"session_id\": \"ann@example.com\"}",
                "{\"session_id\": \"bob@example.com\", \"delay\": 200, \"input_length\": 200,"
                    + " \"output_length\": 4}"));
    Path out = dir.resolve("sessions");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code = run(trace, out, stdout, stderr);
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    assertThat(stdout.toString())
        .contains("; a session's later turns after its previous answer")
        .contains(
            "sessions: 2 started, 2 completed, 0 cut by a failed turn, 0 at their token limit, 0"
                + " stopped by the duration's end; 0 turns not sent");
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertThat(s.get("requests").get("sent").asLong()).isEqualTo(5);
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(5);
    assertThat(s.get("requests").get("invalid").asLong()).isZero();
    assertThat(s.get("sessions").get("completed").asLong()).isEqualTo(2);
    assertThat(s.get("conditions").get("replay_sessions").asLong()).isEqualTo(2);

    List<List<String>> rows = rows(out);
    List<String> h = rows.get(0);
    int seq = h.indexOf("seq");
    int intended = h.indexOf("intended_ms");
    int total = h.indexOf("client_total_ms");
    int session = h.indexOf("session");
    int turn = h.indexOf("turn");
    java.util.Map<Integer, List<String>> byRow = new java.util.HashMap<>();
    for (List<String> r : rows.subList(1, rows.size())) {
      byRow.put(Integer.parseInt(r.get(seq)) - 1, r);
    }
    assertThat(byRow).hasSize(5);
    // Paced rows at their times ÷ 2.
    assertThat(byRow.get(0).get(intended)).isEqualTo("0.000");
    assertThat(byRow.get(1).get(intended)).isEqualTo("10.000");
    assertThat(byRow.get(2).get(intended)).isEqualTo("20.000");
    // a2: intended at a1's last byte (pairs.csv keeps microseconds), not at its 50 ms.
    double a1End =
        Double.parseDouble(byRow.get(0).get(intended))
            + Double.parseDouble(byRow.get(0).get(total));
    double a2 = Double.parseDouble(byRow.get(3).get(intended));
    assertThat(a2).isGreaterThan(50.0).isCloseTo(a1End, within(0.0015));
    // b2: 100 ms after b1's last byte.
    double b1End =
        Double.parseDouble(byRow.get(1).get(intended))
            + Double.parseDouble(byRow.get(1).get(total));
    assertThat(Double.parseDouble(byRow.get(4).get(intended)))
        .isCloseTo(b1End + 100, within(0.0015));
    // The session column: a salted hash per session, never the trace's id (a user's, here).
    String ann = byRow.get(0).get(session);
    assertThat(ann).matches("[0-9a-f]{16}");
    assertThat(byRow.get(3).get(session)).isEqualTo(ann);
    assertThat(byRow.get(4).get(session)).matches("[0-9a-f]{16}").isNotEqualTo(ann);
    assertThat(byRow.get(2).get(session)).isEmpty();
    assertThat(byRow.get(3).get(turn)).isEqualTo("2");
    assertThat(Files.readString(out.resolve("pairs.csv"))).doesNotContain("example.com");
    assertThat(Files.readString(out.resolve("summary.json"))).doesNotContain("example.com");
  }

  @Test
  void sharedPrefixesOfTheSyntheticWorkloadKeepItsExactLengthsAndAreRecorded() throws Exception {
    Path out = dir.resolve("prefixes");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
            .execute(
                RunArgs.quiet(
                    "run",
                    "--url",
                    "http://127.0.0.1:" + proxy.port(),
                    "--model",
                    "sim-llama",
                    "--rate",
                    "40",
                    "--arrival",
                    "constant",
                    "--duration",
                    "500ms",
                    "--mix",
                    "600:2=0.5,700:3=0.5",
                    "--prefix-tokens",
                    "512",
                    "--prefixes",
                    "3",
                    "--out",
                    out.toString()));
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(20);
    assertThat(s.get("requests").get("invalid").asLong()).isZero();
    JsonNode c = s.get("conditions");
    assertThat(c.get("prefix_tokens").asInt()).isEqualTo(512);
    assertThat(c.get("prefixes").asInt()).isEqualTo(3);
    assertThat(c.get("workload").asText())
        .isEqualTo("mix 600:2=0.5,700:3=0.5, 3 shared prefixes of 512 tokens, streamed");
  }

  @Test
  void aDurationCutsTheReplayAndTheConditionsSaySo() throws Exception {
    Path out = dir.resolve("cut");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code = run(out, stdout, stderr, "--duration", "1s", "--replay-limit", "150");
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    long due =
        MooncakeTraces.rows(SHAPE).stream()
            .limit(150)
            .filter(r -> r.timestampMs() / 2.0 < 1000)
            .count();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertThat(s.get("requests").get("sent").asLong()).isEqualTo(due);
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(due);
    JsonNode c = s.get("conditions");
    assertThat(c.get("replay_rows").asLong()).isEqualTo(200);
    assertThat(c.get("replay_limit").asLong()).isEqualTo(150);
    assertThat(c.get("replay_rows_sent_max").asLong()).isEqualTo(due);
    assertThat(s.get("steps").get(0).get("duration_s").asDouble()).isEqualTo(1.0);
  }
}
