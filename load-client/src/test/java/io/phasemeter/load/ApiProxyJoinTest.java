package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

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
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run --api …} through the proxy to the simulator, joined with the proxy's records on
 * the trace id: every API joins (embeddings with no server TTFT), and the server phases and
 * envelopes follow.
 */
class ApiProxyJoinTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private PhasemeterProxy proxy;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    servers = Vertx.vertx();
    Simulator sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(8)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n"
                        + "    upstreams: [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: 8\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private JsonNode run(String... extra) throws Exception {
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
                "--concurrency",
                "2",
                "--duration",
                "1s",
                "--out",
                dir.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(RunArgs.quiet(args));
    assertThat(code).as(out + "\n" + err).isZero();
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  @Test
  void everyApiJoinsTheProxysRecords() throws Exception {
    for (String[] args :
        List.of(
            new String[] {"--api", "chat", "--output-tokens", "8"},
            new String[] {"--api", "completions", "--input-tokens", "32", "--output-tokens", "8"},
            new String[] {"--api", "responses", "--output-tokens", "8"},
            new String[] {"--api", "responses", "--output-tokens", "8", "--no-stream"})) {
      String api = String.join(" ", args);
      JsonNode s = run(args);
      long ok = s.get("requests").get("ok").asLong();
      assertThat(ok).as(api).isPositive();
      assertThat(s.get("requests").get("errors").asLong()).as(api).isZero();
      assertThat(s.get("join_coverage").asDouble()).as(api).isEqualTo(1.0);
      assertThat(s.get("phases").get("network_envelope").get("count").asLong()).isEqualTo(ok);
      assertThat(s.get("phases").get("server_root").get("count").asLong()).isEqualTo(ok);
      if (!api.endsWith("--no-stream")) {
        // A stream's first content event, seen by both: the TTFT envelope of every request.
        assertThat(s.get("phases").get("server_ttft").get("count").asLong()).as(api).isEqualTo(ok);
        assertThat(s.get("phases").get("ttft_envelope").get("count").asLong())
            .as(api)
            .isEqualTo(ok);
      }
    }
    JsonNode e = run("--api", "embeddings", "--input-tokens", "64");
    long ok = e.get("requests").get("ok").asLong();
    assertThat(ok).isPositive();
    assertThat(e.get("requests").get("errors").asLong()).isZero();
    assertThat(e.get("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(e.get("phases").get("network_envelope").get("count").asLong()).isEqualTo(ok);
    assertThat(e.get("phases").get("server_root").get("count").asLong()).isEqualTo(ok);
    assertThat(e.get("phases").get("queue").get("count").asLong()).isEqualTo(ok);
    assertThat(e.get("phases").get("server_ttft").isNull()).isTrue();
    assertThat(e.get("phases").get("ttft_envelope").isNull()).isTrue();
    List<String> lines = Files.readAllLines(dir.resolve("pairs.csv"));
    List<String> header = RunMerge.splitCsv(lines.get(0));
    for (String line : lines.subList(1, lines.size())) {
      List<String> f = RunMerge.splitCsv(line);
      assertThat(f.get(header.indexOf("joined"))).isEqualTo("true");
      assertThat(f.get(header.indexOf("server_ttft_ms"))).isEmpty();
      assertThat(f.get(header.indexOf("network_envelope_ms"))).isNotEmpty();
    }
  }
}
