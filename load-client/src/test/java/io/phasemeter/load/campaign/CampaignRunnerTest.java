package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.LoadMain;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * One short campaign against the simulator (in this JVM), reached through a relay that adds the
 * simulator's {@code x-sim-fault: error} header to one request of one chosen run; the campaign must
 * list that run as invalid with its reason and keep it out of the statistics. The compare tests
 * reuse the campaign's output.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CampaignRunnerTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String FAULTY_POINT = "64-8/c2";
  private static final int FAULTY_BLOCK = 2;

  @TempDir static Path dir;

  private Vertx servers;
  private Simulator sim;
  private HttpServer relay;
  private final AtomicInteger faults = new AtomicInteger();
  private final StringWriter progress = new StringWriter();
  private CampaignRunner.Result result;
  private Path out;

  @BeforeAll
  void runCampaign() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(8)
                    .withDecodeStepMs(5)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    relay = startRelay();
    Path planFile = dir.resolve("plan.yaml");
    Files.writeString(
        planFile,
        "model: sim-llama\nrepeats: 3\nseed: 11\nduration: 1s\nwarmup_duration: 300ms\n"
            + "profiles: [64:8]\nconcurrency: [1, 2]\nrates: [4]\narrival: constant\n");
    out = dir.resolve("a");
    CampaignRunner.Options o =
        new CampaignRunner.Options(
            planFile,
            URI.create("http://127.0.0.1:" + relay.actualPort()),
            null,
            null,
            out,
            Map.of("gpu", "none (simulator)", "engine", "phasemeter-sim"),
            null,
            null,
            null,
            null,
            0,
            Duration.ofSeconds(30),
            Duration.ofSeconds(1),
            Duration.ZERO,
            null,
            null);
    result =
        new CampaignRunner(Plan.load(planFile), o, new PrintWriter(progress, true))
            .beforeRun(
                e ->
                    faults.set(
                        e.block() == FAULTY_BLOCK && e.point().id().equals(FAULTY_POINT) ? 1 : 0))
            .run();
    System.out.println(progress); // the progress lines, kept in the surefire output
  }

  @AfterAll
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  /** Forwards to the simulator, adding {@code x-sim-fault: error} while faults are owed. */
  private HttpServer startRelay() throws Exception {
    HttpClient client = servers.createHttpClient();
    return servers
        .createHttpServer()
        .requestHandler(
            req -> {
              req.pause();
              RequestOptions ro =
                  new RequestOptions()
                      .setMethod(req.method())
                      .setHost("127.0.0.1")
                      .setPort(sim.port())
                      .setURI(req.uri());
              ro.setHeaders(req.headers().copy().remove("host"));
              if (faults.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                ro.putHeader("x-sim-fault", "error");
              }
              client
                  .request(ro)
                  .compose(up -> up.send(req))
                  .onSuccess(
                      up -> {
                        req.response().setStatusCode(up.statusCode());
                        req.response().headers().addAll(up.headers());
                        up.pipeTo(req.response());
                      })
                  .onFailure(t -> req.response().setStatusCode(502).end());
            })
        .listen(0, "127.0.0.1")
        .await(5, TimeUnit.SECONDS);
  }

  private JsonNode campaign() throws Exception {
    return JSON.readTree(out.resolve("campaign.json").toFile());
  }

  @Test
  void theFaultyRunIsListedAsInvalidWithItsReasonAndLeftOutOfTheStatistics() throws Exception {
    JsonNode c = campaign();
    JsonNode invalid = c.path("invalid_runs");
    assertThat(invalid).hasSize(1);
    assertThat(invalid.get(0).path("point").asText()).isEqualTo(FAULTY_POINT);
    assertThat(invalid.get(0).path("block").asInt()).isEqualTo(FAULTY_BLOCK);
    assertThat(invalid.get(0).path("reasons").get(0).asText())
        .matches("1 of \\d+ requests failed \\{HTTP_5XX=1\\}");
    for (JsonNode p : c.path("points")) {
      boolean faulty = p.path("id").asText().equals(FAULTY_POINT);
      assertThat(p.path("valid_runs").asInt()).isEqualTo(faulty ? 2 : 3);
      assertThat(p.path("invalid_runs").asInt()).isEqualTo(faulty ? 1 : 0);
      JsonNode ttft = p.path("metrics").path("ttft_p50_ms");
      assertThat(ttft.path("n").asInt()).isEqualTo(faulty ? 2 : 3);
      assertThat(ttft.path("runs")).hasSize(faulty ? 2 : 3);
      assertThat(ttft.path("ci95_half_width").isNumber()).isTrue();
    }
    assertThat(Files.readString(out.resolve("report.html")))
        .contains("Invalid runs (left out of the statistics)")
        .contains("requests failed {HTTP_5XX=1}")
        .contains("<svg");
    assertThat(progress.toString())
        .contains("block 2/3")
        .containsPattern("64-8/c2 +repeat 2  INVALID: 1 of \\d+ requests failed");
  }

  @Test
  void theStatisticsAreTheStudentTIntervalOfEveryValidRun() throws Exception {
    JsonNode m = campaign().path("points").get(0).path("metrics").path("request_throughput");
    List<Double> runs =
        JSON.convertValue(
            m.path("runs"),
            JSON.getTypeFactory().constructCollectionType(List.class, Double.class));
    Stats.Interval expected = Stats.of(runs);
    assertThat(m.path("mean").asDouble()).isEqualTo(expected.mean());
    assertThat(m.path("t").asDouble())
        .isCloseTo(4.3027, org.assertj.core.api.Assertions.within(1e-4));
    assertThat(m.path("ci95_half_width").asDouble()).isEqualTo(expected.half());
  }

  @Test
  void blocksArePermutationsFromTheRecordedSeedAndEveryRunIsInRunsCsv() throws Exception {
    JsonNode s = campaign().path("schedule");
    assertThat(s.path("seed").asLong()).isEqualTo(11);
    Schedule again =
        Schedule.of(result.plan().points().stream().map(Plan.Point::id).toList(), 3, 11);
    assertThat(JSON.convertValue(s.path("blocks"), List.class)).isEqualTo(again.blocks());
    List<String> csv = Files.readAllLines(out.resolve("runs.csv"));
    assertThat(csv).hasSize(1 + 3 + 9);
    assertThat(csv.get(0)).startsWith("index,name,point,profile,concurrency,rate,warmup,block");
    assertThat(csv.stream().filter(l -> l.contains(",true,0,0,")).count()).isEqualTo(3);
    assertThat(
            Files.exists(
                out.resolve("runs")
                    .resolve(result.runs().get(0).entry().name())
                    .resolve("summary.json")))
        .isTrue();
  }

  @Test
  void conditionsAreRecordedNotTyped() throws Exception {
    JsonNode c = campaign().path("conditions");
    assertThat(c.path("plan_sha256").asText()).matches("[0-9a-f]{64}");
    assertThat(c.path("upstream_models").path("status").asInt()).isEqualTo(200);
    assertThat(c.path("upstream_models").path("body").path("data").get(0).path("id").asText())
        .isEqualTo("sim-llama");
    assertThat(c.path("labels").path("gpu").asText()).isEqualTo("none (simulator)");
    assertThat(c.path("phasemeter_version").asText()).isNotEmpty();
    assertThat(c.has("git_commit")).isTrue();
  }

  private int compare(StringWriter sink, String... args) {
    CommandLine cl = new CommandLine(new LoadMain());
    cl.setOut(new PrintWriter(sink, true));
    cl.setErr(new PrintWriter(sink, true));
    String[] all = new String[args.length + 1];
    all[0] = "compare";
    System.arraycopy(args, 0, all, 1, args.length);
    return cl.execute(all);
  }

  private Path copyWithLabel(String name, String gpu) throws Exception {
    ObjectNode c = (ObjectNode) campaign();
    ((ObjectNode) c.path("conditions").path("labels")).put("gpu", gpu);
    Path d = dir.resolve(name);
    Files.createDirectories(d);
    JSON.writeValue(d.resolve("campaign.json").toFile(), c);
    return d;
  }

  @Test
  void compareRefusesWhenTheHardwareDiffersUnlessVariedOrForced() throws Exception {
    Path b = copyWithLabel("b", "A100-40GB");
    StringWriter refused = new StringWriter();
    assertThat(compare(refused, out.toString(), b.toString())).isEqualTo(2);
    assertThat(refused.toString())
        .contains("DIFFERS: labels.gpu: A=none (simulator)  B=A100-40GB")
        .contains("refused");

    StringWriter forced = new StringWriter();
    assertThat(compare(forced, out.toString(), b.toString(), "--force")).isZero();
    assertThat(forced.toString()).contains("WARNING: labels.gpu").contains("64-8/c1:");

    StringWriter varied = new StringWriter();
    assertThat(compare(varied, out.toString(), b.toString(), "--vary", "gpu")).isZero();
    assertThat(varied.toString()).contains("varied: labels.gpu");
  }

  @Test
  void compareOfACampaignWithItselfShowsZeroDifferences() throws Exception {
    StringWriter same = new StringWriter();
    assertThat(compare(same, out.toString(), out.resolve("campaign.json").toString())).isZero();
    assertThat(same.toString())
        .doesNotContain("DIFFERS")
        .contains("request_throughput")
        .contains("diff +0.")
        .doesNotContain(" *\n");
  }
}
