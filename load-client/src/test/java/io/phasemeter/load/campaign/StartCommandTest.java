package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.LoadMain;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code --start-cmd}: the simulator started as a separate JVM, timed in three cold/warm pairs,
 * kept running for the campaign and stopped after it; and a command that never gets ready.
 */
class StartCommandTest {
  @TempDir Path dir;

  private final StringWriter out = new StringWriter();

  private int run(String... args) {
    CommandLine cl = new CommandLine(new LoadMain());
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(out, true));
    return cl.execute(args);
  }

  private Path plan() throws Exception {
    Path plan = dir.resolve("plan.yaml");
    Files.writeString(
        plan,
        "model: sim-llama\nrepeats: 3\nduration: 300ms\nwarmup_duration: 200ms\n"
            + "profiles: [32:4]\nconcurrency: [1]\n");
    return plan;
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void theSimulatorIsStartedTimedInPairsUsedAndStopped() throws Exception {
    int port = freePort();
    String java = ProcessHandle.current().info().command().orElse("java");
    String cp =
        System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    String cmd =
        "exec '"
            + java
            + "' -Xshare:auto -XX:TieredStopAtLevel=1 -cp '"
            + cp
            + "' io.phasemeter.sim.SimulatorMain --host 127.0.0.1 --port "
            + port
            + " --decode-step-ms 2 --prefill-tokens-per-s 1000000";
    Path outDir = dir.resolve("c");
    int code =
        run(
            "campaign",
            "--plan",
            plan().toString(),
            "--url",
            "http://127.0.0.1:" + port,
            "--out",
            outDir.toString(),
            "--start-cmd",
            cmd,
            "--label",
            "gpu=none");
    assertThat(code).as(out.toString()).isZero();
    JsonNode c = new ObjectMapper().readTree(outDir.resolve("campaign.json").toFile());
    JsonNode starts = c.path("server_starts");
    assertThat(starts).hasSize(6);
    for (int i = 0; i < 6; i++) {
      JsonNode s = starts.get(i);
      assertThat(s.path("kind").asText()).isEqualTo(i % 2 == 0 ? "cold" : "warm");
      assertThat(s.path("pair").asInt()).isEqualTo(i / 2 + 1);
      assertThat(s.path("error").isNull()).isTrue();
      assertThat(s.path("ready_ms").asDouble())
          .isGreaterThanOrEqualTo(s.path("health_ms").asDouble());
    }
    assertThat(c.path("server_start_statistics").path("cold_ready_ms").path("n").asInt())
        .isEqualTo(3);
    assertThat(c.path("conditions").path("start_cmd").asText()).isEqualTo(cmd);
    assertThat(c.path("invalid_runs")).isEmpty();
    assertThat(out.toString()).contains("server start 3 (warm): /health after");
    // Stopped at the end: nothing listens on the port any more.
    assertThatThrownBy(() -> new Socket("127.0.0.1", port).close())
        .isInstanceOf(java.io.IOException.class);
  }

  @Test
  void aServerThatNeverGetsReadyEndsTheCampaignWithExit4() throws Exception {
    int code =
        run(
            "campaign",
            "--plan",
            plan().toString(),
            "--url",
            "http://127.0.0.1:" + freePort(),
            "--out",
            dir.resolve("d").toString(),
            "--start-cmd",
            "echo starting; exit 3");
    assertThat(code).isEqualTo(4);
    assertThat(out.toString())
        .contains("server start 1 (cold): FAILED: the start command exited with 3")
        .contains("the server did not become ready");
  }

  @Test
  void badUsageIsExit2() throws Exception {
    assertThat(
            run(
                "campaign",
                "--plan",
                plan().toString(),
                "--url",
                "http://x",
                "--start-pairs",
                "2",
                "--start-cmd",
                "true"))
        .isEqualTo(2);
    assertThat(out.toString()).contains("--start-pairs must be at least 3");
    Path bad = dir.resolve("bad.yaml");
    Files.writeString(bad, "model: m\nrepeats: 1\n");
    assertThat(run("campaign", "--plan", bad.toString(), "--url", "http://x")).isEqualTo(2);
    assertThat(out.toString()).contains("bad.yaml: key 'repeats' must be at least 3, got 1");
  }
}
