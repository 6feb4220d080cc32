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
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * A campaign plan's {@code slo}: each run's goodput joins the per-point metrics with the Student-t
 * interval. The simulator decodes 10 ms per token with an instant prefill, so every request of the
 * 2-token point takes ~10 ms and meets e2el = 300 ms, and every one of the 60-token point takes
 * ~590 ms and misses it: attainment 1 and 0 in every run.
 */
class GoodputCampaignTest {
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
                    .withSlots(16)
                    .withDecodeStepMs(10)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000))
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
  void eachPointReportsGoodputWithItsInterval() throws Exception {
    Path outDir = dir.resolve("c");
    int code =
        campaign(
            "model: sim-llama\nrepeats: 3\nseed: 3\nduration: 1s\nwarmup_duration: 200ms\n"
                + "profiles: [16:2, 16:60]\nrates: [4]\narrival: constant\n"
                + "slo: e2el=300ms\n",
            outDir);
    assertThat(code).as(out.toString()).isZero();
    JsonNode c = JSON.readTree(outDir.resolve("campaign.json").toFile());
    assertThat(c.path("plan").path("slo").asText()).isEqualTo("client_total=300ms");
    assertThat(c.path("metrics").toString())
        .contains("\"request_goodput\"", "\"output_token_goodput\"", "\"attainment\"");
    for (JsonNode p : c.path("points")) {
      boolean shortPoint = p.path("id").asText().startsWith("16-2/");
      JsonNode att = p.path("metrics").path("attainment");
      assertThat(att.path("n").asInt()).isEqualTo(3);
      assertThat(att.path("mean").asDouble()).isEqualTo(shortPoint ? 1.0 : 0.0);
      assertThat(att.path("ci95_half_width").asDouble()).isZero();
      JsonNode g = p.path("metrics").path("request_goodput");
      assertThat(g.path("n").asInt()).isEqualTo(3);
      assertThat(g.path("ci95_half_width").isNumber()).isTrue();
      if (shortPoint) {
        assertThat(g.path("mean").asDouble()).isPositive();
        // Every request good: goodput is the throughput, run by run.
        assertThat(g.path("runs").toString())
            .isEqualTo(p.path("metrics").path("request_throughput").path("runs").toString());
      } else {
        assertThat(g.path("mean").asDouble()).isZero();
      }
    }
    List<String> csv = Files.readAllLines(outDir.resolve("runs.csv"));
    assertThat(csv.get(0)).contains("request_goodput,output_token_goodput,attainment");
    assertThat(Files.readString(outDir.resolve("report.html")))
        .contains("goodput vs rate (client_total=300ms)");
  }

  @Test
  void goodputTakesTheRunsWithFailedRequestsTheOtherMetricsLeaveOut() throws Exception {
    // A quarter of the requests fail: every run is invalid (a failed request), yet it sent its
    // load, and attainment (good / sent, failures included) is what goodput is about.
    servers.close().await(10, TimeUnit.SECONDS);
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(16)
                    .withDecodeStepMs(10)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000)
                    .withErrorRate(0.25)
                    .withSeed(5))
            .await(10, TimeUnit.SECONDS);
    Path outDir = dir.resolve("f");
    int code =
        campaign(
            "model: sim-llama\nrepeats: 3\nseed: 3\nduration: 1s\nwarmup_duration: 200ms\n"
                + "profiles: [16:2]\nrates: [12]\narrival: constant\nslo: e2el=300ms\n",
            outDir);
    assertThat(code).as(out.toString()).isNotEqualTo(2);
    JsonNode c = JSON.readTree(outDir.resolve("campaign.json").toFile());
    JsonNode p = c.path("points").get(0);
    assertThat(p.path("valid_runs").asInt()).as(out.toString()).isZero();
    assertThat(p.path("goodput_runs").asInt()).isEqualTo(3);
    JsonNode m = p.path("metrics");
    assertThat(m.path("ttft_p50_ms").path("n").asInt()).as("valid runs only").isZero();
    JsonNode att = m.path("attainment");
    assertThat(att.path("n").asInt()).isEqualTo(3);
    assertThat(att.path("mean").asDouble()).isGreaterThan(0).isLessThan(1);
    assertThat(att.path("ci95_low").asDouble()).isGreaterThanOrEqualTo(0);
    assertThat(att.path("ci95_high").asDouble()).isLessThanOrEqualTo(1);
    // Each run's own attainment, as its summary.json says.
    assertThat(att.path("runs").size()).isEqualTo(3);
    for (JsonNode run : c.path("runs")) {
      if (!run.path("warmup").asBoolean()) {
        JsonNode g =
            JSON.readTree(outDir.resolve(run.path("dir").asText()).resolve("summary.json").toFile())
                .path("goodput");
        assertThat(g.path("failed").asLong()).isPositive();
        assertThat(run.path("metrics").path("attainment").asDouble())
            .isEqualTo(g.path("attainment").asDouble());
      }
    }
    assertThat(m.path("request_goodput").path("n").asInt()).isEqualTo(3);
  }

  @Test
  void objectivesNoRunCouldBeJudgedOnAreRefusedAtStart() throws Exception {
    String base = "model: sim-llama\nrepeats: 3\nduration: 1s\nprofiles: [16:2]\nrates: [4]\n";
    assertThat(campaign(base + "api: embeddings\nslo: ttft=1s\n", dir.resolve("e"))).isEqualTo(2);
    assertThat(out.toString())
        .contains(
            "plan.yaml: slo: client_ttft: not applicable to --api embeddings (embeddings"
                + " generate no tokens");
    assertThat(campaign(base + "slo: {ttft: 1s, queue: 100}\n", dir.resolve("q"))).isEqualTo(2);
    assertThat(out.toString())
        .contains("plan.yaml: slo: queue: a figure of the proxy's record, joined per request");
    assertThat(campaign(base + "slo: {ttfx: 1s}\n", dir.resolve("x"))).isEqualTo(2);
    assertThat(out.toString())
        .contains("plan.yaml: slo.ttfx: unknown objective (known: ttft, tpot, e2el,");
    assertThat(Files.exists(dir.resolve("e"))).isFalse();
  }
}
