package io.phasemeter.load.http;

import static io.phasemeter.load.http.RequestRunnerSimulatorTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The runner on {@code /v1/responses} and {@code /v1/embeddings} against the real simulator, which
 * writes vLLM's formats; truths and faults injected through its {@code x-sim-*} headers.
 */
@ExtendWith(VertxExtension.class)
class RequestRunnerSimulatorApisTest {
  private static final long MS = 1_000_000;

  private Simulator sim;
  private RequestRunner runner;
  private final List<Long> itl = new CopyOnWriteArrayList<>();
  private final TraceIds ids = TraceIds.of(0xa91);

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    sim =
        await(
            Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withDecodeStepMs(1)
                    .withPrefillTokensPerSecond(1_000_000)));
    runner =
        new RequestRunner(
            vertx,
            URI.create("http://127.0.0.1:" + sim.port()),
            4,
            Duration.ofSeconds(30),
            itl::add);
  }

  @AfterEach
  void stop() throws Exception {
    await(runner.close());
    await(sim.close());
  }

  private ClientResult run(long seq, RequestSpec spec) throws Exception {
    return await(
        runner.run(seq, spec, ids.traceId(seq), ids.traceparent(seq), 0, System.nanoTime()));
  }

  private static RequestSpec responses(boolean stream, Map<String, String> headers) {
    return Workload.responses("sim-llama", 12, stream, 7).request(1).withHeaders(headers);
  }

  // ---------------------------------------------------------------- responses

  @Test
  void aStreamedResponseTimesItsFirstDeltaNotResponseCreated() throws Exception {
    // The simulator sends its head and response.created at once, then holds the first token.
    ClientResult r = run(0, responses(true, Map.of("x-sim-ttft-ms", "80")));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.usagePromptTokens()).isPositive();
    assertThat(r.usageCompletionTokens()).isBetween(1L, 12L);
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(80 * MS).isLessThan(r.totalNanos());
    assertThat(r.ttfbNanos()).isLessThanOrEqualTo(r.ttftNanos());
    // One delta per decode step; the EOS step's delta is empty and no content.
    long content = r.itlCount() + 1;
    assertThat(content)
        .isBetween(r.usageCompletionTokens() - 1, r.usageCompletionTokens())
        .isEqualTo(itl.size() + 1);
  }

  @Test
  void reasoningDeltasAreContentToo() throws Exception {
    ClientResult plain = run(1, responses(true, Map.of()));
    itl.clear();
    ClientResult reasoning = run(2, responses(true, Map.of("x-sim-reasoning-tokens", "3")));
    assertThat(reasoning.error()).isEqualTo(ErrorClass.NONE);
    // The same token plan: three of its tokens are reasoning deltas, and still content events.
    assertThat(reasoning.usageCompletionTokens()).isEqualTo(plain.usageCompletionTokens());
    assertThat(reasoning.itlCount()).isEqualTo(plain.itlCount());
  }

  @Test
  void aWholeResponseSucceedsCompletedOrStoppedAtTheLength() throws Exception {
    ClientResult r = run(3, responses(false, Map.of()));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.usageCompletionTokens()).isBetween(1L, 12L);
    assertThat(r.ttftNanos()).isEqualTo(r.totalNanos());
    assertThat(r.tpotNanos()).isEqualTo(-1);
  }

  @Test
  void everyFaultOfAResponseStreamIsAFailureAndKeepsNoGaps() throws Exception {
    Map<String, ErrorClass> expected =
        Map.of(
            "error", ErrorClass.STREAM_ERROR,
            "error_event", ErrorClass.STREAM_ERROR,
            "malformed", ErrorClass.STREAM_ERROR,
            "disconnect", ErrorClass.RESET,
            "reset", ErrorClass.RESET);
    Map<String, String> reasons =
        Map.of(
            "error",
            "response.failed (server_error): Simulated engine failure (x-sim-fault: error)",
            "error_event",
            "an error event (server_error): Simulated engine failure (x-sim-fault: error_event)",
            "malformed",
            "an event is not JSON",
            "disconnect",
            "connection closed mid-response",
            "reset",
            "connection closed before the response headers");
    long seq = 10;
    for (Map.Entry<String, ErrorClass> e : expected.entrySet()) {
      ClientResult r =
          run(
              seq++,
              responses(true, Map.of("x-sim-fault", e.getKey(), "x-sim-fault-after-tokens", "2")));
      assertThat(r.error()).as(e.getKey()).isEqualTo(e.getValue());
      assertThat(r.ok()).isFalse();
      assertThat(r.invalidReason()).as(e.getKey()).isEqualTo(reasons.get(e.getKey()));
    }
    assertThat(itl).as("failed streams stay out of the ITL figures").isEmpty();
  }

  @Test
  void aWholeResponseThatFailsIsNeverASuccess() throws Exception {
    assertThat(run(20, responses(false, Map.of("x-sim-fault", "error"))).error())
        .isEqualTo(ErrorClass.HTTP_5XX);
    assertThat(run(21, responses(false, Map.of("x-sim-fault", "malformed"))).error())
        .isEqualTo(ErrorClass.INVALID);
  }

  // ---------------------------------------------------------------- embeddings

  private static RequestSpec embeddings(int inputTokens, Map<String, String> headers) {
    return Workload.embeddings("sim-llama", inputTokens, 3).request(0).withHeaders(headers);
  }

  @Test
  void anEmbeddingHasItsExactInputAndNoTokenFigures() throws Exception {
    ClientResult r = run(30, embeddings(300, Map.of()));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.invalidReason()).isNull();
    assertThat(r.usagePromptTokens()).isEqualTo(300);
    assertThat(r.usageCompletionTokens()).isEqualTo(-1);
    assertThat(r.ttftNanos()).isEqualTo(-1);
    assertThat(r.tpotNanos()).isEqualTo(-1);
    assertThat(r.itlCount()).isZero();
    assertThat(r.totalNanos()).isPositive();
    RequestSpec mixed = Workload.embeddings("sim-llama", Mix.of(Profile.SINGLE_1K), 3).request(4);
    assertThat(run(31, mixed).usagePromptTokens()).isEqualTo(1024);
  }

  @Test
  void everyFaultOfAnEmbeddingIsAFailure() throws Exception {
    assertThat(run(40, embeddings(16, Map.of("x-sim-fault", "error"))).error())
        .isEqualTo(ErrorClass.HTTP_5XX);
    assertThat(run(41, embeddings(16, Map.of("x-sim-fault", "error_event"))).error())
        .isEqualTo(ErrorClass.HTTP_5XX);
    ClientResult malformed = run(42, embeddings(16, Map.of("x-sim-fault", "malformed")));
    assertThat(malformed.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(malformed.invalidReason()).isEqualTo("response body is not a JSON object");
    assertThat(run(43, embeddings(16, Map.of("x-sim-fault", "disconnect"))).error())
        .isEqualTo(ErrorClass.RESET);
  }
}
