package io.phasemeter.load.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.CalibrationServer;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Sessions through a real {@link StepRunner} against the client's own endpoint: where each turn is
 * built (never on an event loop), and a step that would never end, ended at its bound.
 */
class SessionsBuildTest {
  private static Vertx vertx;
  private static CalibrationServer endpoint;

  @BeforeAll
  static void startEndpoint() throws Exception {
    vertx = Vertx.vertx();
    endpoint = CalibrationServer.start(vertx).await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static Sessions sessions(int count, int turns) {
    return new Sessions(
        new Conversation.Shape(
            "m",
            Api.COMPLETIONS,
            Mix.parse("16:2=1"),
            0,
            false,
            7,
            Map.of(),
            new SessionSpec(count, turns, Duration.ofMillis(1), SessionSpec.DEFAULT_MAX_TOKENS),
            null),
        "b",
        null);
  }

  private static StepInfo run(Sessions sessions, List<ClientResult> results, Duration bound) {
    try (StepRunner runner =
        new StepRunner(
            vertx,
            URI.create("http://127.0.0.1:" + endpoint.port()),
            16,
            Duration.ofSeconds(10),
            true,
            1)) {
      Series series =
          Series.measured(
              TraceIds.random(),
              new AtomicLong(),
              Workload.completions("m", Mix.parse("16:2=1"), false, 7),
              gap -> {},
              results::add);
      return StepRunner.await(runner.sessions(series, sessions), sessions, bound);
    }
  }

  @Test
  void everyTurnIsBuiltOnAWorkerNeverOnAnEventLoop() {
    Sessions s = sessions(3, 3);
    List<Boolean> onEventLoop = new CopyOnWriteArrayList<>();
    List<Boolean> onWorker = new CopyOnWriteArrayList<>();
    s.beforeEachBuild(
        () -> {
          onEventLoop.add(Context.isOnEventLoopThread());
          onWorker.add(Context.isOnWorkerThread());
        });
    List<ClientResult> results = new CopyOnWriteArrayList<>();
    StepInfo step = run(s, results, Duration.ofSeconds(60));
    assertThat(step.sent()).isEqualTo(9);
    assertThat(results).hasSize(9).allMatch(ClientResult::ok);
    assertThat(s.counts().completed()).isEqualTo(3);
    assertThat(onEventLoop).hasSize(9).containsOnly(false);
    assertThat(onWorker).hasSize(9).containsOnly(true);
  }

  @Test
  void aSessionThatNeverEndsIsStoppedAtTheBoundAndTheStepEndsWithWhatItHas() {
    Sessions s = sessions(1, 2);
    CountDownLatch release = new CountDownLatch(1);
    // The one session's first build never finishes (until the test is over).
    s.beforeEachBuild(
        () -> {
          try {
            release.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
    List<ClientResult> results = new CopyOnWriteArrayList<>();
    StepInfo step;
    try {
      step = run(s, results, Duration.ofMillis(200));
    } finally {
      release.countDown();
    }
    assertThat(step.sent()).isZero();
    assertThat(step.endNanos()).isGreaterThan(step.startNanos());
    Sessions.Counts c = s.counts();
    assertThat(c.started()).isEqualTo(1);
    assertThat(c.stoppedAtDeadline()).isEqualTo(1);
    assertThat(c.turnsNotSent()).isEqualTo(2);
    assertThat(results).isEmpty();
  }
}
