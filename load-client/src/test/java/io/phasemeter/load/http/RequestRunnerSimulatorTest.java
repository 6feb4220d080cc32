package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.NetServer;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The runner against the real simulator, with truths injected through its x-sim-* headers. */
@ExtendWith(VertxExtension.class)
class RequestRunnerSimulatorTest {
  private static final long MS = 1_000_000;

  private Vertx vertx;
  private Simulator sim;
  private RequestRunner runner;
  private final List<Long> itl = new CopyOnWriteArrayList<>();
  private final TraceIds ids = TraceIds.of(0x5eed);

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    this.vertx = vertx;
    // Fast defaults so tests that do not inject timing stay short: 1 ms decode steps.
    sim =
        await(
            Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withDecodeStepMs(1)
                    .withPrefillTokensPerSecond(1_000_000)));
    runner = runner(sim.port(), Duration.ofSeconds(30));
  }

  @AfterEach
  void stop() throws Exception {
    await(runner.close());
    await(sim.close());
  }

  @Test
  void streamedRequestMeasuresEveryPhaseWithExactUsage() throws Exception {
    // Injected truths: a 150 ms hold before the first token, then 20 tokens 25 ms apart.
    RequestSpec spec =
        Workload.completions("sim-llama", Profile.custom(64, 20), true, 1)
            .request(0)
            .withHeaders(Map.of("x-sim-ttft-ms", "150", "x-sim-decode-step-ms", "25"));
    long intended = System.nanoTime();
    ClientResult r = run(0, spec, intended);

    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.ok()).isTrue();
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.traceId()).isEqualTo(ids.traceId(0));
    assertThat(r.bucket()).isEqualTo("64-20");
    assertThat(r.usagePromptTokens()).isEqualTo(64);
    assertThat(r.usageCompletionTokens()).isEqualTo(20);
    assertThat(r.invalidReason()).isNull();
    assertThat(r.intendedNanos()).isEqualTo(intended);
    assertThat(r.scheduleLagNanos()).isNotNegative();
    assertThat(r.transportSetupNanos()).isNotNegative();
    assertThat(r.ttfbNanos()).isPositive().isLessThanOrEqualTo(r.ttftNanos());
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(150 * MS).isLessThan(r.totalNanos());
    // 20 content events: 19 gaps, in the sink and counted.
    assertThat(r.itlCount()).isEqualTo(19);
    assertThat(itl).hasSize(19);
    // TPOT against the injected 25 ms step. The simulator schedules steps on a timeline, so the
    // 19 gaps sum to 19 steps unless the first token was itself late; 0.7x leaves 140 ms for that.
    // The upper bound is loose (3x) and only guards against a unit error (e.g. ms vs ns).
    assertThat(r.tpotNanos()).isBetween(Math.round(0.7 * 25 * MS), 75 * MS);
    long sum = itl.stream().mapToLong(Long::longValue).sum();
    assertThat(sum / 19).isEqualTo(r.tpotNanos());
  }

  @Test
  void wholeRequestHasTtftEqualToTotalAndNoTokenTimes() throws Exception {
    RequestSpec spec =
        Workload.completions("sim-llama", Profile.custom(100, 12), false, 2)
            .request(1)
            .withHeaders(Map.of("x-sim-ttft-ms", "50"));
    ClientResult r = run(1, spec, System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.usagePromptTokens()).isEqualTo(100);
    assertThat(r.usageCompletionTokens()).isEqualTo(12);
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(50 * MS);
    assertThat(r.ttftNanos()).isLessThanOrEqualTo(r.totalNanos());
    assertThat(r.ttfbNanos()).isGreaterThanOrEqualTo(50 * MS);
    assertThat(r.tpotNanos()).isEqualTo(-1);
    assertThat(r.itlCount()).isZero();
    assertThat(itl).isEmpty();
  }

  @Test
  void chatRoleChunkIsNotTheFirstToken() throws Exception {
    RequestSpec spec =
        Workload.chat("sim-llama", 8, true, 3)
            .request(2)
            .withHeaders(Map.of("x-sim-ttft-ms", "120"));
    ClientResult r = run(2, spec, System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.promptTokens()).isEqualTo(-1);
    // The simulator sends its headers (and vLLM its role chunk) before the hold ends.
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(120 * MS);
    assertThat(r.usageCompletionTokens()).isBetween(1L, 8L);
  }

  @Test
  void serverErrorIsHttp5xx() throws Exception {
    ClientResult r = run(3, completion(true, Map.of("x-sim-fault", "error")), System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.HTTP_5XX);
    assertThat(r.status()).isEqualTo(500);
    assertThat(r.ttftNanos()).isEqualTo(-1);
    // The message of the simulator's OpenAI-style error body.
    assertThat(r.invalidReason())
        .isEqualTo("HTTP 500: Simulated engine failure (x-sim-fault: error)");
  }

  @Test
  void badRequestIsHttp4xx() throws Exception {
    ClientResult r = run(4, completion(true, Map.of("x-sim-fault", "bogus")), System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.HTTP_4XX);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.invalidReason()).startsWith("HTTP 400: ").contains("bogus");
  }

  @Test
  void disconnectMidStreamIsReset() throws Exception {
    ClientResult r =
        run(
            5,
            completion(true, Map.of("x-sim-fault", "disconnect", "x-sim-fault-after-tokens", "3")),
            System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.RESET);
    assertThat(r.invalidReason()).isEqualTo("connection closed mid-response");
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.ttftNanos()).isPositive();
    assertThat(itl).as("failed streams stay out of the ITL figures").isEmpty();
  }

  @Test
  void disconnectOfWholeResponseIsReset() throws Exception {
    ClientResult r =
        run(6, completion(false, Map.of("x-sim-fault", "disconnect")), System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.RESET);
    assertThat(r.invalidReason()).isEqualTo("connection closed before the response headers");
    assertThat(r.status()).isZero();
  }

  @Test
  void connectionClosedBeforeAnswerIsReset() throws Exception {
    ClientResult r = run(7, completion(true, Map.of("x-sim-fault", "reset")), System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.RESET);
    assertThat(r.invalidReason()).isEqualTo("connection closed before the response headers");
  }

  @Test
  void malformedEventIsStreamError() throws Exception {
    ClientResult r =
        run(8, completion(true, Map.of("x-sim-fault", "malformed")), System.nanoTime());
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.invalidReason()).isEqualTo("an event is not JSON");
  }

  @Test
  void stallPastTheTimeoutIsTimeout() throws Exception {
    RequestRunner quick = runner(sim.port(), Duration.ofMillis(300));
    try {
      ClientResult r =
          await(
              quick.run(
                  9,
                  completion(true, Map.of("x-sim-fault", "stall", "x-sim-stall-ms", "60000")),
                  ids.traceId(9),
                  ids.traceparent(9),
                  0,
                  System.nanoTime()));
      assertThat(r.error()).isEqualTo(ErrorClass.TIMEOUT);
      assertThat(r.invalidReason()).isEqualTo("timed out mid-stream, after the first token");
      assertThat(r.totalNanos()).isGreaterThanOrEqualTo(300 * MS);
      assertThat(r.ttftNanos()).isPositive();
    } finally {
      await(quick.close());
    }
    // The runner is still usable afterwards.
    assertThat(run(10, completion(true, Map.of()), System.nanoTime()).ok()).isTrue();
  }

  @Test
  void closedPortIsConnect() throws Exception {
    NetServer probe = await(vertx.createNetServer().connectHandler(s -> s.close()).listen(0));
    int port = probe.actualPort();
    await(probe.close());
    RequestRunner dead = runner(port, Duration.ofSeconds(10));
    try {
      ClientResult r =
          await(
              dead.run(
                  11, completion(true, Map.of()), ids.traceId(11), null, 0, System.nanoTime()));
      assertThat(r.error()).isEqualTo(ErrorClass.CONNECT);
      assertThat(r.invalidReason()).isEqualTo("connection refused");
      assertThat(r.status()).isZero();
      assertThat(r.transportSetupNanos()).isEqualTo(-1);
    } finally {
      await(dead.close());
    }
  }

  @Test
  void manyConcurrentRequestsThroughAFewConnectionsAllSucceed() throws Exception {
    RequestRunner pooled = runner(sim.port(), Duration.ofSeconds(30));
    Workload w = Workload.completions("sim-llama", Profile.custom(32, 4), true, 4);
    try {
      // Issued from this (non-Vert.x) thread: the runner hops to its context.
      List<Future<ClientResult>> all = new java.util.ArrayList<>();
      for (long seq = 0; seq < 50; seq++) {
        all.add(
            pooled.run(
                seq, w.request(seq), ids.traceId(seq), ids.traceparent(seq), 1, System.nanoTime()));
      }
      for (Future<ClientResult> f : all) {
        ClientResult r = await(f);
        assertThat(r.error()).as("seq %d", r.seq()).isEqualTo(ErrorClass.NONE);
        assertThat(r.step()).isEqualTo(1);
        assertThat(r.usageCompletionTokens()).isEqualTo(4);
      }
    } finally {
      await(pooled.close());
    }
  }

  private RequestSpec completion(boolean stream, Map<String, String> headers) {
    return Workload.completions("sim-llama", Profile.custom(16, 8), stream, 5)
        .request(0)
        .withHeaders(headers);
  }

  private RequestRunner runner(int port, Duration timeout) {
    return new RequestRunner(vertx, URI.create("http://127.0.0.1:" + port), 4, timeout, itl::add);
  }

  private ClientResult run(long seq, RequestSpec spec, long intended) throws Exception {
    return await(runner.run(seq, spec, ids.traceId(seq), ids.traceparent(seq), 0, intended));
  }

  static <T> T await(Future<T> f) throws Exception {
    return f.toCompletionStage().toCompletableFuture().get(60, TimeUnit.SECONDS);
  }
}
