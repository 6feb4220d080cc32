package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.phasemeter.sim.SimulatorConfig.StepClock;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The engine's step clocks ({@code --step-clock}) on a manual clock: every time below is the
 * engine's own, exact to the nanosecond; nothing depends on the wall clock. One prompt token
 * prefills in 1 ms.
 */
class StepClockTest {
  private static final long MS = 1_000_000;

  private static final SimulatorConfig SHARED =
      SimulatorConfig.defaults()
          .withStepClock(StepClock.SHARED)
          .withSlots(64)
          .withPrefillTokensPerSecond(1000)
          .withDecodeStepMs(20)
          .withDecodeStepGrowth(0);

  private final ManualTimers timers = new ManualTimers();
  private final List<Token> tokens = new ArrayList<>();
  private Engine engine;
  private int maxRunning;

  /**
   * Token {@code index} of sequence {@code seq}, emitted at {@code nanos} on the engine's clock.
   */
  record Token(String seq, int index, long nanos) {}

  private Engine engine(SimulatorConfig config) {
    engine =
        new Engine(
            timers,
            config,
            CostModel.of(config),
            timers.clock(),
            new VllmMetrics(config.models()),
            EngineTracer.create(null, timers.clock()));
    return engine;
  }

  private Sequence sequence(String name, int promptTokens, int completionTokens) {
    return sequence(name, promptTokens, completionTokens, 0, -1, -1, 0);
  }

  private Sequence sequence(
      String name,
      int promptTokens,
      int completionTokens,
      long holdMs,
      double decodeStepOverrideMs,
      int stallAfterTokens,
      long stallMs) {
    ParsedRequest request =
        new ParsedRequest(
            Endpoint.CHAT,
            "sim-llama",
            promptTokens,
            completionTokens,
            0,
            true,
            true,
            false,
            name.hashCode());
    TokenPlan plan = TokenPlan.create(42, name.hashCode(), completionTokens, 0, true);
    return new Sequence(
        request,
        plan,
        holdMs * MS,
        decodeStepOverrideMs,
        stallAfterTokens,
        stallMs * MS,
        (index, text, finish) -> {
          tokens.add(new Token(name, index, timers.now()));
          maxRunning = Math.max(maxRunning, engine.stats().running());
        });
  }

  private void admitAt(double ms, Sequence s) {
    timers.advanceToMs(ms);
    assertThat(engine.admit(s)).isTrue();
  }

  private List<Long> times(String seq) {
    return tokens.stream().filter(t -> t.seq().equals(seq)).map(Token::nanos).toList();
  }

  private List<Long> timesOfIndex(int index, String prefix) {
    return tokens.stream()
        .filter(t -> t.index() == index && t.seq().startsWith(prefix))
        .map(Token::nanos)
        .toList();
  }

  private static List<Long> ms(long... values) {
    List<Long> out = new ArrayList<>();
    for (long v : values) {
      out.add(v * MS);
    }
    return out;
  }

  @Test
  void streamsStartedAtDifferentTimesWithinAStepGetEveryTokenAtTheSameBoundary() {
    engine(SHARED);
    // The pacer starts the clock: its prefill ends at 1 ms, a boundary; then one every 20 ms.
    admitAt(0, sequence("pacer", 1, 12));
    int n = 20;
    for (int i = 0; i < n; i++) {
      // Admitted 2.0 .. 19.1 ms, prefills ending 3.0 .. 20.1 ms: all within the step 1 -> 21 ms.
      admitAt(2 + i * 0.9, sequence("s" + i, 1, 10));
    }
    timers.drain();

    assertThat(times("pacer")).isEqualTo(ms(1, 21, 41, 61, 81, 101, 121, 141, 161, 181, 201, 221));
    for (int k = 0; k < 10; k++) {
      List<Long> atK = timesOfIndex(k, "s");
      assertThat(atK).as("token %d of every stream", k).hasSize(n);
      // all at the same instant: the boundary 21 + 20 k ms, with the pacer's token k + 1
      assertThat(atK.stream().distinct().toList())
          .as("token %d", k)
          .containsExactly((21 + 20L * k) * MS);
    }
    // all in one turn each: within a boundary the streams emit in admission order
    List<String> firstBoundary =
        tokens.stream().filter(t -> t.nanos() == 21 * MS).map(Token::seq).toList();
    assertThat(firstBoundary.get(0)).isEqualTo("pacer");
    assertThat(firstBoundary).hasSize(n + 1);
    assertThat(engine.stats()).isEqualTo(new SimulatorStats(0, 0, n + 1, 0, 0, 0));
    assertThat(timers.live()).as("the clock stopped with the batch empty").isZero();
  }

  @Test
  void ttftRoundsUpToTheNextBoundary() {
    engine(SHARED);
    admitAt(0, sequence("pacer", 1, 6)); // boundaries at 1, 21, 41, 61 ...
    admitAt(5, sequence("mid", 3, 2)); // prefill ends at 8 ms: first token at 21
    admitAt(21, sequence("onTheBoundary", 0, 2)); // prefill ends at 21 ms, after that boundary
    admitAt(22, sequence("held", 1, 2, 30, -1, -1, 0)); // ttft hold: ready at 53 ms -> 61
    timers.drain();

    assertThat(times("mid")).isEqualTo(ms(21, 41));
    assertThat(times("onTheBoundary")).isEqualTo(ms(41, 61));
    assertThat(times("held")).isEqualTo(ms(61, 81));
  }

  @Test
  void anIdleEngineStartsItsClockWhenTheFirstPrefillEnds() {
    engine(SHARED);
    admitAt(0, sequence("a", 5, 3)); // alone: its first token when its prefill ends, as today
    admitAt(2, sequence("b", 1, 2)); // ready at 3 ms, before a's: b starts the clock
    timers.drain();
    assertThat(times("b")).isEqualTo(ms(3, 23));
    assertThat(times("a")).isEqualTo(ms(23, 43, 63));

    // Once the batch is empty the clock stops; the next sequence starts it afresh.
    tokens.clear();
    admitAt(100, sequence("c", 2, 2));
    timers.drain();
    assertThat(times("c")).isEqualTo(ms(102, 122));
  }

  @Test
  void theStepGrowsWithTheRunningBatch() {
    engine(SHARED.withDecodeStepGrowth(0.5));
    admitAt(0, sequence("a", 1, 3));
    admitAt(0, sequence("b", 1, 6));
    timers.drain();
    // two running: 20 * (1 + 0.5) = 30 ms; after a's last token (61 ms) one: 20 ms
    assertThat(times("a")).isEqualTo(ms(1, 31, 61));
    assertThat(times("b")).isEqualTo(ms(1, 31, 61, 81, 101, 121));
  }

  @Test
  void slotsStillBoundTheBatch() {
    engine(SHARED.withSlots(2));
    for (String name : List.of("a", "b", "c", "d", "e")) {
      admitAt(0, sequence(name, 1, 3));
    }
    assertThat(engine.stats().running()).isEqualTo(2);
    assertThat(engine.stats().waiting()).isEqualTo(3);
    timers.drain();

    assertThat(maxRunning).isEqualTo(2);
    assertThat(times("a")).isEqualTo(ms(1, 21, 41));
    assertThat(times("b")).isEqualTo(ms(1, 21, 41));
    // c and d take the slots at 41 ms, their prefills end at 42: they join at the next boundary
    assertThat(times("c")).isEqualTo(ms(61, 81, 101));
    assertThat(times("d")).isEqualTo(ms(61, 81, 101));
    assertThat(times("e")).isEqualTo(ms(121, 141, 161));
    assertThat(engine.stats()).isEqualTo(new SimulatorStats(0, 0, 5, 0, 0, 0));
  }

  @Test
  void cancelMidStreamFreesTheSlotAndStopsItsTokens() {
    engine(SHARED.withSlots(1));
    Sequence a = sequence("a", 1, 100);
    admitAt(0, a);
    admitAt(0, sequence("b", 1, 2));
    assertThat(engine.stats().waiting()).isEqualTo(1);
    timers.advanceToMs(50); // a's tokens at 1, 21, 41
    engine.cancel(a);
    assertThat(engine.stats().running()).isEqualTo(1); // b took the slot at once
    assertThat(engine.stats().waiting()).isZero();
    assertThat(engine.stats().cancelled()).isEqualTo(1);
    timers.drain();

    assertThat(times("a")).isEqualTo(ms(1, 21, 41));
    // the batch emptied with a: the clock stopped, b (ready at 51 ms) starts it again
    assertThat(times("b")).isEqualTo(ms(51, 71));
    assertThat(engine.stats()).isEqualTo(new SimulatorStats(0, 0, 1, 1, 0, 0));
    assertThat(timers.live()).isZero();
  }

  @Test
  void cancelOfTheOnlySequenceStopsTheClock() {
    engine(SHARED);
    Sequence a = sequence("a", 1, 100);
    admitAt(0, a);
    timers.advanceToMs(30);
    engine.cancel(a);
    assertThat(timers.live()).isZero();
    assertThat(engine.stats()).isEqualTo(new SimulatorStats(0, 0, 0, 1, 0, 0));
  }

  @Test
  void aDecodeStepOverrideKeepsItsOwnClock() {
    engine(SHARED);
    admitAt(0, sequence("pacer", 1, 4)); // 1, 21, 41, 61
    admitAt(5, sequence("own", 1, 4, 0, 7, -1, 0)); // x-sim-decode-step-ms: 7
    timers.drain();
    assertThat(times("pacer")).isEqualTo(ms(1, 21, 41, 61));
    assertThat(times("own")).isEqualTo(ms(6, 13, 20, 27));
  }

  @Test
  void aStallRejoinsTheBatchAtABoundary() {
    engine(SHARED);
    admitAt(0, sequence("pacer", 1, 8)); // 1, 21, ... 141
    admitAt(0, sequence("stall", 1, 4, 0, -1, 2, 50)); // 50 ms of silence after 2 tokens
    timers.drain();
    // token 1 at 21 ms; silent until 71 ms; back at the boundary 81
    assertThat(times("stall")).isEqualTo(ms(1, 21, 81, 101));
  }

  @Test
  void aLateTimerCatchesUpEveryBoundaryAndKeepsTheSchedule() {
    // A busy event loop runs the boundary timer late: the missed boundaries are emitted at once
    // and the clock keeps its schedule, as the per-sequence timers do.
    engine(SHARED);
    admitAt(0, sequence("a", 1, 6));
    timers.lateTo(65 * MS);
    assertThat(times("a")).isEqualTo(ms(65, 65, 65, 65));
    timers.drain();
    assertThat(times("a")).isEqualTo(ms(65, 65, 65, 65, 81, 101));
  }

  @Test
  void perSequenceIsTheDefaultAndKeepsEachStreamOnItsOwnClock() {
    assertThat(SimulatorConfig.defaults().stepClock()).isEqualTo(StepClock.PER_SEQUENCE);
    engine(SHARED.withStepClock(StepClock.PER_SEQUENCE));
    admitAt(0, sequence("a", 1, 3));
    admitAt(2.5, sequence("b", 1, 3));
    admitAt(7, sequence("c", 1, 3));
    timers.drain();
    // each from its own prefill end, 20 ms apart
    assertThat(times("a")).isEqualTo(ms(1, 21, 41));
    assertThat(times("b")).isEqualTo(List.of(3_500_000L, 23_500_000L, 43_500_000L));
    assertThat(times("c")).isEqualTo(ms(8, 28, 48));
    assertThat(
            tokens.stream()
                .collect(Collectors.groupingBy(Token::nanos, Collectors.counting()))
                .values())
        .as("no two streams share an instant")
        .allMatch(c -> c == 1);
  }
}
