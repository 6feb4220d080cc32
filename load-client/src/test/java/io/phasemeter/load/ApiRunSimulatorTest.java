package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run --api responses|embeddings} against the simulator in this JVM, straight (through
 * the proxy and joined: {@link ApiProxyJoinTest}), the client speaking only HTTP.
 */
class ApiRunSimulatorTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private Simulator sim;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

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

  private int run(String... extra) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + sim.port(),
                "--model",
                "sim-llama",
                "--concurrency",
                "3",
                "--duration",
                "1s",
                "--out",
                dir.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(args));
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  @Test
  void streamedResponsesAreMeasuredLikeChat() throws Exception {
    assertThat(run("--api", "responses", "--output-tokens", "16")).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.get("api").asText()).isEqualTo("responses");
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    long ok = s.get("requests").get("ok").asLong();
    assertThat(ok).isPositive();
    assertThat(s.get("phases").get("client_ttft").get("count").asLong()).isEqualTo(ok);
    assertThat(s.get("phases").get("itl").get("count").asLong()).isPositive();
    // At most 16 a request (the simulator may stop early, as a model at its EOS).
    assertThat(s.get("total_output_tokens").asLong()).isBetween(ok, 16 * ok);
    assertThat(s.get("conditions").get("workload").asText())
        .isEqualTo("responses, free text, streamed");
  }

  @Test
  void wholeResponsesSucceed() throws Exception {
    assertThat(run("--api", "responses", "--no-stream", "--output-tokens", "8"))
        .as(out + "\n" + err)
        .isZero();
    JsonNode s = summary();
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    assertThat(s.get("requests").get("ok").asLong()).isPositive();
  }

  @Test
  void embeddingsHaveExactInputsAndTheirTokenFiguresAreNotApplicable() throws Exception {
    assertThat(run("--api", "embeddings", "--mix", "100:1=1,200:1=1"))
        .as(out + "\n" + err)
        .isZero();
    JsonNode s = summary();
    assertThat(s.get("api").asText()).isEqualTo("embeddings");
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    assertThat(s.get("requests").get("invalid").asLong()).isZero();
    long ok = s.get("requests").get("ok").asLong();
    assertThat(ok).isPositive();
    assertThat(s.get("phases").get("client_total").get("count").asLong()).isEqualTo(ok);
    for (String name : List.of("client_ttft", "ttft_envelope", "server_ttft", "tpot", "itl")) {
      assertThat(s.get("phases").get(name).isNull()).as(name).isTrue();
    }
    assertThat(s.get("output_token_throughput").isNull()).isTrue();
    List<String> lines = Files.readAllLines(dir.resolve("pairs.csv"));
    List<String> header = RunMerge.splitCsv(lines.get(0));
    for (String line : lines.subList(1, lines.size())) {
      List<String> f = RunMerge.splitCsv(line);
      assertThat(f.get(header.indexOf("class"))).isEqualTo("NONE");
      assertThat(f.get(header.indexOf("bucket"))).isIn("100", "200");
      assertThat(f.get(header.indexOf("client_ttft_ms"))).isEmpty();
      assertThat(f.get(header.indexOf("tpot_ms"))).isEmpty();
    }
    assertThat(out.toString()).contains("not applicable (embeddings generate no tokens");
  }

  @Test
  void aFailingServerMakesEveryRequestAnErrorNeverASuccess() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withDecodeStepMs(1)
                    .withPrefillTokensPerSecond(1_000_000)
                    .withErrorRate(1.0))
            .await(10, TimeUnit.SECONDS);
    assertThat(run("--api", "responses", "--output-tokens", "4")).isEqualTo(4);
    JsonNode responses = summary();
    assertThat(responses.get("requests").get("ok").asLong()).isZero();
    assertThat(responses.get("requests").get("errors").asLong()).isPositive();
    assertThat(run("--api", "embeddings", "--input-tokens", "32")).isEqualTo(4);
    JsonNode embeddings = summary();
    assertThat(embeddings.get("requests").get("ok").asLong()).isZero();
    assertThat(embeddings.get("requests").get("errors").asLong()).isPositive();
  }
}
