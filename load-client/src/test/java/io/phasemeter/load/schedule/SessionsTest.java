package io.phasemeter.load.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.AnswerText;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.Workload;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The sessions' schedule on a clock and timers advanced by hand: every turn's intended start, what
 * ends a session, and what is counted, against the truth the test sets.
 */
class SessionsTest {
  private static final long MS = 1_000_000L;
  private static final long T0 = 5_000 * MS;

  /** One turn handed to the runner. */
  private record Launch(
      RequestSpec spec, long intended, AnswerText answer, Consumer<ClientResult> done) {}

  /** A timer due at {@code at}. */
  private record Due(long at, Runnable task) {}

  private long now = T0;
  private final List<Launch> launches = new ArrayList<>();
  private final List<Launch> pending = new ArrayList<>();
  private final List<Due> timers = new ArrayList<>();
  private final Map<Launch, Long> ends = new HashMap<>();
  private int doneCalls;
  private java.util.function.Predicate<RequestSpec> failLaunch;

  /** Builds of turns handed to the builder and not yet run ({@link #startDeferred}). */
  private final List<Runnable> builds = new ArrayList<>();

  private Sessions start(Api api, int count, int turns, long thinkMs, Duration d, int maxTokens) {
    return start(api, count, turns, thinkMs, d, maxTokens, false);
  }

  /** As {@link #start}, with each turn's build left in {@link #builds} until the test runs it. */
  private Sessions startDeferred(Api api, int count, int turns, long thinkMs) {
    return start(api, count, turns, thinkMs, null, 1_000, true);
  }

  private Sessions start(
      Api api, int count, int turns, long thinkMs, Duration d, int maxTokens, boolean deferred) {
    Conversation.Shape shape =
        new Conversation.Shape(
            "m",
            api,
            api == Api.COMPLETIONS ? Mix.parse("10:5=1") : null,
            8,
            true,
            3,
            Map.of(),
            new SessionSpec(count, turns, Duration.ofMillis(thinkMs), maxTokens),
            PromptSalt.NONE);
    Sessions s = new Sessions(shape, "run", d);
    s.start(
        (spec, intended, answer, done) -> {
          if (failLaunch != null && failLaunch.test(spec)) {
            throw new IllegalStateException("the launcher failed");
          }
          Launch l = new Launch(spec, intended, answer, done);
          launches.add(l);
          pending.add(l);
        },
        (delay, task) -> timers.add(new Due(now + delay, task)),
        deferred ? builds::add : Runnable::run,
        () -> now,
        () -> doneCalls++);
    return s;
  }

  /** Answers the oldest pending turn after {@code tookMs} from now, ok or not. */
  private void answer(long tookMs, boolean ok) {
    Launch l = pending.remove(0);
    now += tookMs * MS;
    ends.put(l, now);
    l.done().accept(result(l, ok));
  }

  /** Runs every timer due by the next one's time, moving the clock there. */
  private boolean fireNextTimer() {
    if (timers.isEmpty()) {
      return false;
    }
    Due next = timers.stream().min(Comparator.comparingLong(Due::at)).orElseThrow();
    timers.remove(next);
    now = Math.max(now, next.at());
    next.task().run();
    return true;
  }

  private ClientResult result(Launch l, boolean ok) {
    long actual = Math.max(now - 1, l.intended());
    return new ClientResult(
        launches.indexOf(l) + 1,
        "0".repeat(32),
        "b",
        0,
        l.intended(),
        actual,
        0,
        now - l.intended(),
        now - l.intended(),
        now - l.intended(),
        -1,
        0,
        ok ? 200 : 500,
        ok ? ErrorClass.NONE : ErrorClass.HTTP_5XX,
        ok ? null : "HTTP 500",
        l.spec().promptTokens(),
        l.spec().maxTokens(),
        l.spec().promptTokens(),
        ok ? l.spec().maxTokens() : -1,
        null,
        false,
        l.spec().turn(),
        l.spec().headers().get(Workload.SESSION_HEADER));
  }

  @Test
  void eachTurnIsIntendedTheThinkTimeAfterThePreviousAnswersLastByte() {
    Sessions s = start(Api.COMPLETIONS, 2, 3, 100, null, 1_000);
    assertThat(launches).hasSize(2).allMatch(l -> l.intended() == T0);
    // Turn by turn: both sessions answered, then their timers fire.
    for (int round = 0; round < 3; round++) {
      answer(40, true);
      answer(25, true);
      while (fireNextTimer()) {}
    }
    assertThat(pending).isEmpty();
    assertThat(launches).hasSize(6);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(launches.stream().map(l -> l.spec().headers().get(Workload.SESSION_HEADER)))
        .containsOnly("run-s1", "run-s2");
    // Turn k + 1 of a session: intended exactly turn k's last byte + 100 ms.
    for (String id : List.of("run-s1", "run-s2")) {
      List<Launch> turns =
          launches.stream()
              .filter(l -> l.spec().headers().get(Workload.SESSION_HEADER).equals(id))
              .toList();
      assertThat(turns).extracting(l -> l.spec().turn()).containsExactly(1, 2, 3);
      for (int k = 1; k < turns.size(); k++) {
        assertThat(turns.get(k).intended()).isEqualTo(ends.get(turns.get(k - 1)) + 100 * MS);
      }
    }
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(2, 2, 0, 0, 0, 0, 0, 0, 0));
    assertThat(s.launched()).isEqualTo(6);
    // Without a duration the step ends at the last answer's last byte.
    assertThat(s.endNanos())
        .isEqualTo(ends.values().stream().mapToLong(Long::longValue).max().getAsLong());
  }

  @Test
  void theNextTurnsStartIsTheLastByteOfThePreviousPlusTheThinkTime() {
    start(Api.COMPLETIONS, 1, 3, 100, null, 1_000);
    answer(40, true); // last byte at T0 + 40 ms
    assertThat(timers).hasSize(1);
    // The timer hands the turn out ahead by the runner's lead; the exchange waits the rest.
    assertThat(timers.get(0).at()).isEqualTo(T0 + 140 * MS - RequestRunner.HAND_OUT_LEAD_NANOS);
    fireNextTimer();
    assertThat(launches.get(1).intended()).isEqualTo(T0 + 140 * MS);
    // Answered late: the next intended start follows the actual last byte, not the plan.
    answer(300, true);
    long lastByte = now;
    fireNextTimer();
    assertThat(launches.get(2).intended()).isEqualTo(lastByte + 100 * MS);
  }

  @Test
  void withoutThinkTimeTheNextTurnGoesAtOnce() {
    start(Api.COMPLETIONS, 1, 2, 0, null, 1_000);
    answer(10, true);
    assertThat(timers).isEmpty();
    assertThat(launches).hasSize(2);
    assertThat(launches.get(1).intended()).isEqualTo(T0 + 10 * MS);
  }

  @Test
  void aFailedTurnCutsItsSessionAndWithoutADurationNothingReplacesIt() {
    Sessions s = start(Api.COMPLETIONS, 2, 4, 0, null, 1_000);
    answer(10, true); // s1 turn 1
    answer(10, false); // s2 turn 1 fails: turns 2-4 not sent
    answer(10, true); // s1 turn 2
    answer(10, true);
    answer(10, true);
    assertThat(pending).isEmpty();
    assertThat(launches).hasSize(5);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(2, 1, 1, 0, 0, 0, 3, 0, 0));
  }

  @Test
  void withADurationEndedSessionsAreReplacedAndNoTurnStartsAfterTheEnd() {
    Sessions s = start(Api.COMPLETIONS, 1, 3, 0, Duration.ofSeconds(1), 1_000);
    answer(300, true);
    answer(300, true);
    answer(300, true); // s1 done at 900 ms: s2 replaces it at once
    assertThat(launches).hasSize(4);
    assertThat(launches.get(3).intended()).isEqualTo(T0 + 900 * MS);
    assertThat(launches.get(3).spec().headers()).containsEntry(Workload.SESSION_HEADER, "run-s2");
    answer(50, false); // s2 fails at 950 ms: s3 replaces it
    assertThat(launches).hasSize(5);
    answer(100, true); // s3 turn 1 ends at 1,050 ms: turn 2 would start after the end
    assertThat(pending).isEmpty();
    assertThat(launches).hasSize(5);
    assertThat(launches).allMatch(l -> l.intended() < T0 + 1_000 * MS);
    assertThat(doneCalls).isEqualTo(1);
    Sessions.Counts c = s.counts();
    assertThat(c).isEqualTo(new Sessions.Counts(3, 1, 1, 0, 1, 0, 4, 0, 0));
    assertThat(c.started() * 3).isEqualTo(launches.size() + c.turnsNotSent());
    assertThat(s.endNanos()).isEqualTo(T0 + 1_000 * MS);
  }

  @Test
  void aCompletionsSessionEndsAtItsTokenLimitWithoutAnError() {
    // 10 in + 5 out; turn 2's prompt is 25 tokens, + 5 = 30 > 29.
    Sessions s = start(Api.COMPLETIONS, 1, 3, 0, Duration.ofSeconds(1), 29);
    answer(100, true);
    // The session ended at its limit; a new one replaced it (a duration is set).
    assertThat(launches).hasSize(2);
    assertThat(launches.get(1).spec().turn()).isEqualTo(1);
    assertThat(s.counts().atMaxTokens()).isEqualTo(1);
    assertThat(s.counts().turnsNotSent()).isEqualTo(2);
    assertThat(s.counts().cut()).isZero();
  }

  @Test
  void onlyChatTurnsKeepTheAnswersText() {
    start(Api.CHAT, 1, 2, 0, null, SessionSpec.DEFAULT_MAX_TOKENS);
    assertThat(launches.get(0).answer()).isNotNull();
    start(Api.COMPLETIONS, 1, 2, 0, null, 1_000);
    assertThat(launches.get(1).answer()).isNull();
  }

  @Test
  void aSessionWhoseNextTurnFallsAtOrAfterTheEndIsStopped() {
    Sessions s = start(Api.COMPLETIONS, 3, 2, 0, Duration.ofNanos(1), 1_000);
    assertThat(launches).hasSize(3); // due at the start, just before the end
    answer(5, true);
    answer(5, true);
    answer(5, true);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(3, 0, 0, 0, 3, 0, 3, 0, 0));
  }

  /** Runs every build handed to the builder so far, and those they hand over. */
  private void runBuilds() {
    while (!builds.isEmpty()) {
      builds.remove(0).run();
    }
  }

  @Test
  void withoutADurationOneTurnSessionsEndAtTheirAnswersNotAtTheirStart() {
    // T = 1: every turn is intended at the start; the step lasts until the last answer's last byte.
    Sessions s = start(Api.COMPLETIONS, 2, 1, 0, null, 1_000);
    answer(40, true);
    answer(25, true);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.startNanos()).isEqualTo(T0);
    assertThat(s.endNanos()).isEqualTo(T0 + 65 * MS);
  }

  @Test
  void withoutADurationTheLastTurnsServiceTimeIsInTheStep() {
    // 1 session × 2 turns of 1 s each, no think time: 2 requests over 2 s, 1 request a second.
    Sessions s = start(Api.COMPLETIONS, 1, 2, 0, null, 1_000);
    answer(1_000, true);
    answer(1_000, true);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.endNanos() - s.startNanos()).isEqualTo(2_000 * MS);
    assertThat(s.launched() / ((s.endNanos() - s.startNanos()) / 1e9)).isEqualTo(1.0);
  }

  @Test
  void aChatAnswerCutAtItsLimitIsCounted() {
    Sessions s = start(Api.CHAT, 1, 3, 0, null, SessionSpec.DEFAULT_MAX_TOKENS);
    io.phasemeter.load.http.AnswerTexts.append(
        launches.get(0).answer(), "x".repeat(Conversation.MAX_ANSWER_BYTES + 1));
    answer(10, true);
    io.phasemeter.load.http.AnswerTexts.append(launches.get(1).answer(), "short");
    answer(10, true);
    io.phasemeter.load.http.AnswerTexts.append(
        launches.get(2).answer(), "y".repeat(Conversation.MAX_ANSWER_BYTES + 5));
    answer(10, true);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.counts().answersTruncated()).isEqualTo(2);
    assertThat(s.counts().completed()).isEqualTo(1);
  }

  @Test
  void eachTurnIsBuiltByTheBuilderDuringTheThinkTimeAndLeavesAtItsIntendedStart() {
    startDeferred(Api.COMPLETIONS, 1, 3, 100);
    assertThat(launches).isEmpty(); // the first turn waits for its build
    runBuilds();
    assertThat(launches).hasSize(1);
    assertThat(launches.get(0).intended()).isEqualTo(T0);
    answer(40, true); // last byte at T0 + 40 ms: the next turn is handed to the builder at once
    assertThat(builds).hasSize(1);
    assertThat(timers).isEmpty();
    now += 30 * MS; // building takes 30 ms of the think time
    runBuilds();
    assertThat(timers).hasSize(1);
    assertThat(timers.get(0).at()).isEqualTo(T0 + 140 * MS - RequestRunner.HAND_OUT_LEAD_NANOS);
    fireNextTimer();
    assertThat(launches.get(1).intended()).isEqualTo(T0 + 140 * MS);
    // A build that outlasts the think time: handed out at once, its intended start unchanged.
    answer(10, true);
    long lastByte = now;
    now += 500 * MS;
    runBuilds();
    assertThat(timers).isEmpty();
    assertThat(launches).hasSize(3);
    assertThat(launches.get(2).intended()).isEqualTo(lastByte + 100 * MS);
  }

  @Test
  void aLauncherThatThrowsCutsItsSessionAndTheRunGoesOn() {
    failLaunch =
        spec -> spec.turn() == 2 && spec.headers().get(Workload.SESSION_HEADER).equals("run-s2");
    Sessions s = start(Api.COMPLETIONS, 2, 3, 0, null, 1_000);
    answer(10, true); // s1 turn 1
    answer(10, true); // s2 turn 1: its turn 2 throws as it is handed out
    answer(10, true);
    answer(10, true);
    assertThat(pending).isEmpty();
    assertThat(doneCalls).isEqualTo(1);
    Sessions.Counts c = s.counts();
    assertThat(c).isEqualTo(new Sessions.Counts(2, 1, 1, 0, 0, 0, 2, 0, 1));
    assertThat(s.launched()).isEqualTo(launches.size()).isEqualTo(4);
    assertThat(c.started() * 3).isEqualTo(s.launched() + c.turnsNotSent());
    assertThat(s.firstClientError()).isEqualTo("java.lang.IllegalStateException");
  }

  @Test
  void anExceptionTakingAnAnswerCutsItsSessionAndTheRunGoesOn() {
    Sessions s = startDeferred(Api.COMPLETIONS, 2, 2, 0);
    runBuilds();
    Launch first = pending.get(0);
    answer(10, true); // s1 turn 1: its turn 2 waits for the builder
    // The same answer again: the conversation awaits none, and throws.
    first.done().accept(result(first, true));
    runBuilds(); // s1's turn 2 is not sent: its session was cut
    answer(10, true); // s2 turn 1
    runBuilds();
    answer(10, true); // s2 turn 2
    assertThat(pending).isEmpty();
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(2, 1, 1, 0, 0, 0, 1, 0, 1));
    assertThat(launches).hasSize(3);
  }

  @Test
  void aBuilderThatThrowsCutsItsSession() {
    Sessions s = new Sessions(shapeOf(Api.COMPLETIONS, 1, 2), "run", null);
    s.start(
        (spec, intended, answer, done) -> {},
        (delay, task) -> {},
        task -> {
          throw new java.util.concurrent.RejectedExecutionException("full");
        },
        () -> now,
        () -> doneCalls++);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(1, 0, 1, 0, 0, 0, 2, 0, 1));
  }

  @Test
  void stopEndsTheOpenSessionsWhereTheyAreAndTheStepWithWhatItHas() {
    Sessions s = start(Api.COMPLETIONS, 2, 2, 0, null, 1_000);
    Launch stuck = pending.remove(1); // s2's turn 1 never answers
    answer(10, true);
    answer(10, true); // s1 completed
    assertThat(doneCalls).isZero();
    now += 5_000 * MS;
    assertThat(s.stop()).isEqualTo(1);
    assertThat(doneCalls).isEqualTo(1);
    assertThat(s.endNanos()).isEqualTo(now);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(2, 1, 0, 0, 0, 1, 1, 0, 0));
    // Its late answer starts nothing.
    stuck.done().accept(result(stuck, true));
    assertThat(launches).hasSize(3);
    assertThat(s.stop()).isZero();
    assertThat(doneCalls).isEqualTo(1);
  }

  @Test
  void aTurnBuiltAndWaitingForItsThinkTimeWhenStoppedCountsAsNotSent() {
    Sessions s = start(Api.COMPLETIONS, 1, 3, 100, null, 1_000);
    answer(10, true);
    // Turn 2 is built and waits for its think time on a timer.
    assertThat(timers).hasSize(1);
    assertThat(s.stop()).isEqualTo(1);
    // started × turns = launched + turns not sent: 1 × 3 = 1 + 2.
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(1, 0, 0, 0, 0, 1, 2, 0, 0));
    assertThat(s.launched()).isEqualTo(1);
    // Its timer fires: nothing is sent, nothing counted twice.
    assertThat(fireNextTimer()).isTrue();
    assertThat(launches).hasSize(1);
    assertThat(s.launched()).isEqualTo(1);
    assertThat(s.counts()).isEqualTo(new Sessions.Counts(1, 0, 0, 0, 0, 1, 2, 0, 0));
  }

  @Test
  void theBoundIsTheDurationOrEveryTurnAtItsTimeoutPlusTheThinkTime() {
    Duration timeout = Duration.ofSeconds(30);
    assertThat(new Sessions(shapeOf(Api.COMPLETIONS, 4, 3), "r", null).bound(timeout))
        .isEqualTo(Duration.ofSeconds(3 * (30 + 2) + 10));
    assertThat(
            new Sessions(shapeOf(Api.COMPLETIONS, 4, 3), "r", Duration.ofMinutes(1)).bound(timeout))
        .isEqualTo(Duration.ofSeconds(60 + 30 + 10));
    // Past what a long can count in nanoseconds: that much.
    assertThat(
            new Sessions(shapeOf(Api.COMPLETIONS, 4, 3), "r", null)
                .bound(Duration.ofDays(365L * 200)))
        .isEqualTo(Duration.ofNanos(Long.MAX_VALUE));
  }

  /** Sessions of {@code turns} turns, think time 2 s. */
  private static Conversation.Shape shapeOf(Api api, int count, int turns) {
    return new Conversation.Shape(
        "m",
        api,
        Mix.parse("10:5=1"),
        8,
        true,
        3,
        Map.of(),
        new SessionSpec(count, turns, Duration.ofSeconds(2), 1_000),
        null);
  }
}
