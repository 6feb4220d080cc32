package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.LoadMain;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** A campaign whose plan names its {@code api}: every run speaks it, and says so. */
class ApiCampaignTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  private Vertx servers;
  private Simulator sim;
  private final StringWriter out = new StringWriter();

  @BeforeEach
  void start() throws Exception {
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
  }

  @AfterEach
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private int campaign(String plan, Path outDir) throws Exception {
    Path file = dir.resolve("plan.yaml");
    Files.writeString(file, plan);
    CommandLine cl = new CommandLine(new LoadMain());
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(out, true));
    return cl.execute(
        "campaign",
        "--plan",
        file.toString(),
        "--url",
        "http://127.0.0.1:" + sim.port(),
        "--out",
        outDir.toString());
  }

  @Test
  void aChatCampaignAsksEachRunForTheProfilesOutputLength() throws Exception {
    Path outDir = dir.resolve("chat");
    int code =
        campaign(
            "model: sim-llama\nrepeats: 3\nduration: 400ms\nwarmup_duration: 200ms\n"
                + "profiles: [64:6]\nconcurrency: [2]\napi: chat\n",
            outDir);
    assertThat(code).as(out.toString()).isZero();
    JsonNode c = JSON.readTree(outDir.resolve("campaign.json").toFile());
    assertThat(c.path("plan").path("api").asText()).isEqualTo("chat");
    assertThat(c.path("invalid_runs")).isEmpty();
    try (Stream<Path> runs = Files.list(outDir.resolve("runs"))) {
      for (Path run : runs.toList()) {
        JsonNode s = JSON.readTree(run.resolve("summary.json").toFile());
        assertThat(s.path("api").asText()).isEqualTo("chat");
        assertThat(s.path("conditions").path("workload").asText())
            .isEqualTo("chat, free text, streamed");
        long ok = s.path("requests").path("ok").asLong();
        assertThat(ok).isPositive();
        // The simulator stops at a random point up to max_tokens: 6, the profile's output, not
        // the 128 of a chat run without --output-tokens.
        assertThat(s.path("total_output_tokens").asLong()).isBetween(ok, 6 * ok);
      }
    }
  }

  @Test
  void responsesAndEmbeddingsCampaignsRunValid() throws Exception {
    Path responses = dir.resolve("responses");
    assertThat(
            campaign(
                "model: sim-llama\nrepeats: 3\nduration: 400ms\nwarmup_duration: 200ms\n"
                    + "profiles: [64:6]\nconcurrency: [2]\napi: responses\n",
                responses))
        .as(out.toString())
        .isZero();
    Path embeddings = dir.resolve("embeddings");
    assertThat(
            campaign(
                "model: sim-llama\nrepeats: 3\nduration: 400ms\nwarmup_duration: 200ms\n"
                    + "profiles: [64:6]\nconcurrency: [2]\napi: embeddings\n",
                embeddings))
        .as(out.toString())
        .isZero();
    JsonNode c = JSON.readTree(embeddings.resolve("campaign.json").toFile());
    assertThat(c.path("plan").path("api").asText()).isEqualTo("embeddings");
    assertThat(c.path("plan").path("stream").asBoolean()).isFalse();
    assertThat(c.path("invalid_runs")).isEmpty();
    try (Stream<Path> runs = Files.list(responses.resolve("runs"))) {
      for (Path run : runs.toList()) {
        JsonNode s = JSON.readTree(run.resolve("summary.json").toFile());
        long ok = s.path("requests").path("ok").asLong();
        assertThat(s.path("total_output_tokens").asLong()).isBetween(ok, 6 * ok);
      }
    }
    try (Stream<Path> runs = Files.list(embeddings.resolve("runs"))) {
      for (Path run : runs.toList()) {
        JsonNode s = JSON.readTree(run.resolve("summary.json").toFile());
        assertThat(s.path("conditions").path("workload").asText())
            .isEqualTo("embeddings, 64 tokens in, whole responses");
        assertThat(s.path("phases").path("client_ttft").isNull()).isTrue();
      }
    }
    // The progress lines of an embeddings campaign show no TTFT or TPOT figure.
    assertThat(out.toString()).contains("(ttft, tpot: not applicable to embeddings)");
  }
}
