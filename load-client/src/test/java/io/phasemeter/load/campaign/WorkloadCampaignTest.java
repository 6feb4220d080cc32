package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.LoadMain;
import io.phasemeter.load.workload.replay.MooncakeTraces;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * One short campaign of a replay, a dataset and sessions against the simulator (in this JVM),
 * through {@code load campaign}'s command line: the plan's files resolved against its directory,
 * every run valid, each run's conditions carrying the files' SHA-256, the points and ids as the
 * plan makes them; {@code load merge} and {@code load compare} take its output.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class WorkloadCampaignTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir static Path dir;

  private Vertx servers;
  private Simulator sim;
  private final StringWriter console = new StringWriter();
  private int exit;
  private Path out;
  private String traceSha;
  private String datasetSha;

  @BeforeAll
  void runCampaign() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(8)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    Path plans = Files.createDirectories(dir.resolve("plans"));
    // 30 rows over 1 s, replayed at speed 2: 0.5 s, longer than the plan's duration.
    Path trace =
        MooncakeTraces.write(
            plans.resolve("trace.jsonl"), new MooncakeTraces.Shape(30, 1000, 2, 1, 1, 8, 3));
    Path questions =
        Files.write(
            plans.resolve("questions.jsonl"),
            IntStream.range(0, 20)
                .mapToObj(
                    i ->
                        "{\"prompt\": \"question "
                            + i
                            + " about the weather\", \"output_tokens\": "
                            + (4 + i % 5)
                            + "}")
                .toList());
    traceSha = sha256(trace);
    datasetSha = sha256(questions);
    Path plan = plans.resolve("plan.yaml");
    Files.writeString(
        plan,
        "model: sim-llama\nrepeats: 3\nseed: 7\nduration: 400ms\nwarmup_duration: 200ms\n"
            + "concurrency: [2]\n"
            + "profiles:\n"
            + "  - {replay: trace.jsonl, speed: 2}\n"
            + "  - {dataset: jsonl:questions.jsonl}\n"
            + "  - {sessions: {turns: 2, profile: 64:4}}\n");
    out = dir.resolve("out");
    exit =
        cli(
            "campaign",
            "--plan",
            plan.toString(),
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--out",
            out.toString());
    System.out.println(console); // the progress lines, kept in the surefire output
  }

  @AfterAll
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private int cli(String... args) {
    CommandLine cl = new CommandLine(new LoadMain());
    cl.setOut(new PrintWriter(console, true));
    cl.setErr(new PrintWriter(console, true));
    return cl.execute(args);
  }

  private static String sha256(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
  }

  private JsonNode campaign() throws Exception {
    return JSON.readTree(out.resolve("campaign.json").toFile());
  }

  private JsonNode summary(JsonNode run) throws Exception {
    return JSON.readTree(out.resolve(run.path("dir").asText()).resolve("summary.json").toFile());
  }

  @Test
  void everyRunIsValidAndThePointsAreAsThePlanMakesThem() throws Exception {
    assertThat(exit).as(console.toString()).isZero();
    JsonNode c = campaign();
    assertThat(c.path("invalid_runs")).isEmpty();
    List<String> ids = new ArrayList<>();
    c.path("points").forEach(p -> ids.add(p.path("id").asText()));
    assertThat(ids).containsExactly("replay-trace-x2", "dataset-questions/c2", "sessions-2t/c2");
    JsonNode replay = c.path("points").get(0);
    assertThat(replay.path("kind").asText()).isEqualTo("replay");
    assertThat(replay.path("concurrency").isNull()).isTrue();
    assertThat(replay.path("sha256").asText()).isEqualTo(traceSha);
    assertThat(replay.path("valid_runs").asInt()).isEqualTo(3);
    JsonNode dataset = c.path("points").get(1);
    assertThat(dataset.path("kind").asText()).isEqualTo("dataset");
    assertThat(dataset.path("sha256").asText()).isEqualTo(datasetSha);
    assertThat(c.path("points").get(2).path("kind").asText()).isEqualTo("sessions");
    assertThat(c.path("points").get(2).path("concurrency").asInt()).isEqualTo(2);
    assertThat(c.path("runs")).hasSize(3 * 4);
    Set<Long> seeds = new HashSet<>();
    c.path("runs").forEach(r -> seeds.add(r.path("seed").asLong()));
    assertThat(seeds).hasSize(12);
    assertThat(console.toString())
        .contains("phasemeter campaign: replay-trace-x2: one point, on the trace's own schedule")
        .contains("phasemeter campaign: dataset-questions: 20 usable entries of ")
        .contains("phasemeter campaign: 9 of 9 measured runs valid");
    assertThat(Files.readString(out.resolve("report.html")))
        .contains("(a replay: the length of its trace)")
        .contains("sessions-2t: metric vs sessions at once")
        .contains("dataset-questions: metric vs concurrency")
        .doesNotContain("about the weather");
  }

  @Test
  void eachRunsConditionsCarryTheFileItSentAndItsHash() throws Exception {
    for (JsonNode run : campaign().path("runs")) {
      JsonNode s = summary(run);
      JsonNode cond = s.path("conditions");
      String point = run.path("point").asText();
      boolean warmup = run.path("warmup").asBoolean();
      assertThat(cond.path("seed").asLong()).isEqualTo(run.path("seed").asLong());
      if (point.startsWith("replay-")) {
        assertThat(cond.path("replay_sha256").asText()).isEqualTo(traceSha);
        assertThat(cond.path("replay_speed").asDouble()).isEqualTo(2.0);
        assertThat(cond.path("replay_rows").asLong()).isEqualTo(30);
        if (warmup) {
          // The warm-up replays the trace's first warmup_duration.
          assertThat(cond.path("replay_rows_sent_max").asLong()).isLessThan(30);
        } else {
          // Each repeat replays the whole trace: the plan's 400 ms does not cut its 500 ms.
          assertThat(cond.path("replay_rows_sent_max").asLong()).isEqualTo(30);
          assertThat(s.path("requests").path("sent").asLong()).isEqualTo(30);
          assertThat(s.path("requests").path("ok").asLong()).isEqualTo(30);
        }
      } else if (point.startsWith("dataset-")) {
        assertThat(cond.path("dataset_sha256").asText()).isEqualTo(datasetSha);
        assertThat(cond.path("dataset_entries").asLong()).isEqualTo(20);
        assertThat(cond.path("arrival").asText()).isEqualTo("closed model, concurrency 2");
      } else {
        assertThat(cond.path("sessions").asInt()).isEqualTo(2);
        assertThat(cond.path("turns").asInt()).isEqualTo(2);
        assertThat(s.path("sessions").path("started").asLong()).isGreaterThanOrEqualTo(2);
        assertThat(s.path("turns").get(1).path("turn").asInt()).isEqualTo(2);
      }
    }
  }

  @Test
  void mergeAndCompareTakeTheCampaignsOutput() throws Exception {
    List<String> replays = new ArrayList<>();
    campaign()
        .path("runs")
        .forEach(
            r -> {
              if (!r.path("warmup").asBoolean()
                  && r.path("point").asText().equals("replay-trace-x2")) {
                replays.add(out.resolve(r.path("dir").asText()).toString());
              }
            });
    Path merged = dir.resolve("merged");
    assertThat(cli("merge", replays.get(0), replays.get(1), "--out", merged.toString()))
        .as(console.toString())
        .isZero();
    assertThat(
            JSON.readTree(merged.resolve("summary.json").toFile())
                .path("requests")
                .path("sent")
                .asLong())
        .isEqualTo(60);
    int before = console.toString().length();
    assertThat(cli("compare", out.toString(), out.toString())).isZero();
    assertThat(console.toString().substring(before))
        .doesNotContain("DIFFERS")
        .contains("replay-trace-x2:")
        .contains("sessions-2t/c2:");
  }
}
