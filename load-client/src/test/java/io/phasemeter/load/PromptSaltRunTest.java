package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two runs with the same {@code --seed} against the simulator with its prefix cache on (as vLLM's
 * automatic prefix caching): with their default salts the second finds nothing of the first in the
 * cache (its hits do not grow, its warm-up to the server included); with {@code --prompt-salt 0} it
 * finds every block of the first (the control: the same runs can hit).
 */
class PromptSaltRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern HITS =
      Pattern.compile("(?m)^vllm:prefix_cache_hits_total\\{[^}]*} ([0-9.eE+]+)$");
  private static final Pattern QUERIES =
      Pattern.compile("(?m)^vllm:prefix_cache_queries_total\\{[^}]*} ([0-9.eE+]+)$");

  private static Vertx servers;
  private static Simulator sim;

  @TempDir static Path dir;

  @BeforeAll
  static void start() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults().withPort(0).withDecodeStepMs(1).withDecodeStepGrowth(0))
            .await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  /** The simulator's counter {@code p}, summed over its series. */
  private static double counter(Pattern p) throws Exception {
    HttpResponse<String> r =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + sim.port() + "/metrics"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
    Matcher m = p.matcher(r.body());
    double sum = 0;
    boolean found = false;
    while (m.find()) {
      sum += Double.parseDouble(m.group(1));
      found = true;
    }
    assertThat(found).as(p.pattern()).isTrue();
    return sum;
  }

  /**
   * One run of 400 ms at concurrency 4 (some hundred requests of 96 tokens), 4 warm-up requests to
   * the server first; its salt.
   */
  private static String run(String name, String... salt) throws Exception {
    Path out = dir.resolve(name);
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + sim.port(),
                "--model",
                "sim-llama",
                "--concurrency",
                "4",
                "--duration",
                "400ms",
                "--input-tokens",
                "96",
                "--output-tokens",
                "2",
                "--seed",
                "5",
                "--warmup",
                "4",
                "--warmup-target",
                "server",
                "--client-floor",
                "off",
                "--report-interval",
                "10s",
                "--out",
                out.toString()));
    args.addAll(List.of(salt));
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
            .execute(args.toArray(String[]::new));
    assertThat(code).as(stdout + "\n" + stderr).isZero();
    return JSON.readTree(out.resolve("summary.json").toFile())
        .get("conditions")
        .get("prompt_salt")
        .asText();
  }

  @Test
  void aSecondRunWithTheSameSeedHitsNothingOfTheFirstUnlessUnsalted() throws Exception {
    String first = run("salted-1");
    double hits = counter(HITS);
    double queries = counter(QUERIES);
    String second = run("salted-2");
    assertThat(first).matches("[0-9a-f]{16}").isNotEqualTo(second);
    assertThat(counter(QUERIES)).as("the second run reached the cache").isGreaterThan(queries);
    assertThat(counter(HITS)).as("hits during the second salted run").isEqualTo(hits);

    assertThat(run("unsalted-1", "--prompt-salt", "0")).isEqualTo("none");
    hits = counter(HITS);
    run("unsalted-2", "--prompt-salt", "none");
    // Six whole blocks of 96 tokens, the last recomputed: 80 tokens a request at least.
    assertThat(counter(HITS) - hits).as("hits during the second unsalted run").isGreaterThan(80);
  }
}
