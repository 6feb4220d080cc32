package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.CalibrationServer;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client's floor and its warm-up, through real sockets: the floor is measured against the
 * client's own endpoint and reported in summary.json, the live output, the report and the
 * conditions; it is below the envelope of a run whose path holds an injected delay; the warm-up is
 * counted and said, and when it goes to the client's own endpoint the target sees none of it.
 */
class ClientFloorRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @BeforeEach
  void start() {
    servers = Vertx.vertx();
  }

  @AfterEach
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private int run(String... args) {
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(args);
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  /**
   * A TCP relay in front of {@code port} that holds every chunk {@code delayMs} in each direction,
   * in order: a network with a known one-way delay.
   */
  private int delayingRelay(int port, long delayMs) throws Exception {
    NetServer relay =
        servers
            .createNetServer()
            .connectHandler(
                in -> {
                  in.pause();
                  servers
                      .createNetClient()
                      .connect(port, "127.0.0.1")
                      .onSuccess(
                          up -> {
                            pipe(in, up, delayMs);
                            pipe(up, in, delayMs);
                            in.resume();
                          })
                      .onFailure(e -> in.close());
                });
    return relay.listen(0, "127.0.0.1").await(10, TimeUnit.SECONDS).actualPort();
  }

  private void pipe(NetSocket from, NetSocket to, long delayMs) {
    from.handler((Buffer b) -> servers.setTimer(delayMs, t -> to.write(b))); // timers fire in order
    from.closeHandler(v -> servers.setTimer(delayMs + 1, t -> to.close()));
  }

  @Test
  void theFloorIsReportedEverywhereAndIsBelowTheEnvelopeOfAPathWithADelay() throws Exception {
    Simulator sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000))
            .await(10, TimeUnit.SECONDS);
    PhasemeterProxy proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams:"
                        + " [http://127.0.0.1:"
                        + sim.port()
                        + "]\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
    // 25 ms each way between the client and the proxy: every envelope holds at least 50 ms.
    int relay = delayingRelay(proxy.port(), 25);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + relay,
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--rate",
            "10",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--warmup",
            "200",
            "--report-interval",
            "1s",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    JsonNode floor = s.path("client_floor");
    assertThat(floor.isObject()).as(s.toString()).isTrue();
    for (String k : new String[] {"ttft_ms", "connect_ms", "chunk_ms"}) {
      assertThat(floor.path(k).asDouble(Double.NaN)).as(k + " " + floor).isPositive();
    }
    assertThat(floor.path("requests").asLong()).isPositive();
    // The floor is the client's own cost; the run's envelopes hold the relay's 2 x 25 ms besides.
    double ttftEnvelope = s.path("phases").path("ttft_envelope").path("p50_ms").asDouble();
    double networkEnvelope = s.path("phases").path("network_envelope").path("p50_ms").asDouble();
    assertThat(floor.path("ttft_ms").asDouble()).isLessThan(ttftEnvelope);
    assertThat(floor.path("ttft_ms").asDouble()).isLessThan(networkEnvelope);
    // Nothing of the warm-ups or the floor was counted or joined: one pairs.csv row per request.
    long sent = s.path("requests").path("sent").asLong();
    assertThat(sent).isPositive();
    assertThat(Files.readAllLines(dir.resolve("pairs.csv"))).hasSize((int) sent + 1);
    // The warm-up: how many, and where.
    assertThat(floor.path("warmup_target").asText()).isEqualTo("self");
    assertThat(floor.path("warmup_requests").asLong()).isGreaterThanOrEqualTo(200);
    JsonNode c = s.path("conditions");
    assertThat(c.path("warmup_requests").asLong())
        .isEqualTo(floor.path("warmup_requests").asLong());
    assertThat(c.path("warmup_target").asText()).isEqualTo("self");
    assertThat(c.path("client_floor_ttft_ms").asDouble())
        .isEqualTo(floor.path("ttft_ms").asDouble());
    assertThat(c.path("client_floor_connect_ms").asDouble()).as(c.toString()).isPositive();
    // The live output (under the table's header) and the report say it too.
    assertThat(out.toString()).contains("\n  client floor: TTFT ");
    String html = Files.readString(dir.resolve("report.html"));
    assertThat(html).contains("client floor: TTFT ").contains("Warm-up: ");
  }

  @Test
  void aWarmUpAgainstTheClientsOwnEndpointSendsTheTargetNothing() throws Exception {
    // The target counts what it gets; it answers as the client's endpoint does.
    CalibrationServer target = CalibrationServer.start(servers).await(10, TimeUnit.SECONDS);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + target.port(),
            "--model",
            "m",
            "--rate",
            "5",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--warmup",
            "50",
            "--warmup-target",
            "self",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    long sent = s.path("requests").path("sent").asLong();
    assertThat(sent).isPositive();
    // Neither the warm-up nor the floor reached the target: only the run's own requests.
    assertThat(target.requests()).isEqualTo(sent);
    assertThat(s.path("client_floor").path("warmup_requests").asLong()).isGreaterThanOrEqualTo(50);
    assertThat(out.toString()).contains("to the client's own endpoint (--warmup-target self)");
  }

  @Test
  void aWarmUpAgainstTheServerIsSentThereAndTheFloorCanBeTurnedOff() throws Exception {
    CalibrationServer target = CalibrationServer.start(servers).await(10, TimeUnit.SECONDS);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + target.port(),
            "--model",
            "m",
            "--rate",
            "5",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--warmup",
            "30",
            "--warmup-target",
            "server",
            "--client-floor",
            "off",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(target.requests()).isEqualTo(30 + s.path("requests").path("sent").asLong());
    assertThat(s.path("client_floor").isNull()).as(s.toString()).isTrue();
    assertThat(s.path("conditions").path("warmup_requests").asLong()).isEqualTo(30);
    assertThat(s.path("conditions").path("warmup_target").asText()).isEqualTo("server");
    assertThat(out.toString()).doesNotContain("client floor:");
  }

  @Test
  void theClientsOwnWarmUpAndFloorComeBeforeTheTargetsWarmUpAndAreRecorded() throws Exception {
    CalibrationServer target = CalibrationServer.start(servers).await(10, TimeUnit.SECONDS);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + target.port(),
            "--model",
            "m",
            "--rate",
            "5",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--warmup",
            "20",
            "--warmup-target",
            "server",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    // The target got its 20 and the run's; the floor's warm-up went to the client's endpoint.
    assertThat(target.requests()).isEqualTo(20 + s.path("requests").path("sent").asLong());
    JsonNode c = s.path("conditions");
    assertThat(c.path("client_floor_warmup_requests").asLong()).isPositive();
    assertThat(s.path("client_floor").path("floor_warmup_requests").asLong())
        .isEqualTo(c.path("client_floor_warmup_requests").asLong());
    assertThat(c.path("warmup_requests").asLong()).isEqualTo(20);
    String o = out.toString();
    assertThat(o)
        .contains("to the client's own endpoint for the client's floor (--client-floor on)")
        .doesNotContain("(--warmup-target self)");
    // The client's own endpoint first, then the target's warm-up, then the clock: the target's
    // warmed connection does not idle behind the floor and the JIT wait.
    int floor = o.indexOf("client floor: TTFT");
    int jit = o.indexOf("for the JIT compiler (limit 5 s)");
    int toTarget = o.indexOf("requests sent one by one to the target");
    int clock = o.indexOf("phasemeter load: clock starts");
    assertThat(floor).as(o).isNotNegative();
    assertThat(jit).as(o).isGreaterThan(floor);
    assertThat(toTarget).as(o).isGreaterThan(jit);
    assertThat(clock).as(o).isGreaterThan(toTarget);
  }

  @Test
  void noWarmUpAndNoFloorSendNothingBeforeTheClockAndSkipTheJitWait() throws Exception {
    CalibrationServer target = CalibrationServer.start(servers).await(10, TimeUnit.SECONDS);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + target.port(),
            "--model",
            "m",
            "--rate",
            "5",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--warmup",
            "0",
            "--client-floor",
            "off",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(target.requests()).isEqualTo(s.path("requests").path("sent").asLong());
    JsonNode c = s.path("conditions");
    assertThat(c.path("warmup_requests").asLong()).isZero();
    assertThat(c.path("client_floor_warmup_requests").asLong()).isZero();
    assertThat(c.path("client_jit_wait_ms").asDouble()).isZero();
    assertThat(s.path("client_floor").isNull()).isTrue();
    // No endpoint of its own, no warm-up, no wait: straight to the clock.
    assertThat(out.toString())
        .doesNotContain("own endpoint")
        .doesNotContain("warming up")
        .doesNotContain("JIT compiler")
        .contains("phasemeter load: clock starts");
  }

  @Test
  void aWrongWarmUpTargetIsAUsageError() {
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--rate",
            "1",
            "--duration",
            "1s",
            "--warmup-target",
            "elsewhere");
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("--warmup-target must be self or server");
  }
}
