package io.phasemeter.load.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.Replayed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A replayed trace's sessions on a clock and timers advanced by hand, from a trace read as a run
 * reads it (at speed 2): a later turn is intended at its time, or at its previous turn's end when
 * that is later, or at that end plus its delay ÷ speed (AIPerf's multi-turn Mooncake form); a
 * failed or dropped turn cuts its session; a duration's end stops it; and the step waits for every
 * session.
 */
class ReplayTurnsTest {
  private static final long MS = 1_000_000L;
  private static final long T0 = 9_000 * MS;

  /**
   * Rows 0-8: session a (rows 0, 3, 5: timestamps 0 and 300 ms, then none), b (rows 1, 4: 100 ms,
   * then a delay of 500 ms), a row of no session (2) and c (rows 6, 7, 8: 400, 450, 500 ms).
   */
  private static final String TRACE =
      String.join(
          "\n",
          "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"a\"}",
          "{\"timestamp\": 100, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"b\"}",
          "{\"timestamp\": 200, \"input_length\": 10, \"output_length\": 2}",
          "{\"timestamp\": 300, \"input_length\": 20, \"output_length\": 2, \"session_id\": \"a\"}",
          "{\"session_id\": \"b\", \"delay\": 500, \"input_length\": 20, \"output_length\": 2}",
          "{\"session_id\": \"a\", \"input_length\": 30, \"output_length\": 2}",
          "{\"timestamp\": 400, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"c\"}",
          "{\"timestamp\": 450, \"input_length\": 20, \"output_length\": 2, \"session_id\": \"c\"}",
          "{\"timestamp\": 500, \"input_length\": 30, \"output_length\": 2, \"session_id\": \"c\"}");

  /** One later turn handed to the launcher. */
  private record Launch(int row, long intended, Consumer<ClientResult> done, Runnable notSent) {}

  /** A timer due at {@code at}. */
  private record Due(long at, Runnable task) {}

  @TempDir Path dir;

  private long now = T0;
  private final List<Launch> launches = new ArrayList<>();
  private final List<Due> timers = new ArrayList<>();
  private final Map<Integer, Integer> prepared = new LinkedHashMap<>();
  private boolean dropNext;
  private int doneCalls;

  private ReplayTurns start(Duration cut) throws Exception {
    Path file = Files.writeString(dir.resolve("t.jsonl"), TRACE);
    Replayed replayed = new Replay(file, null, 2, 0, Replay.Prefixes.SHARED).load();
    ReplayTurns turns = ReplayTurns.of(replayed, cut);
    turns.start(
        new ReplayTurns.Launcher() {
          @Override
          public void prepare(int row) {
            prepared.merge(row, 1, Integer::sum);
          }

          @Override
          public void forget(int row) {
            prepared.remove(row);
          }

          @Override
          public boolean launch(
              int row, long intended, Consumer<ClientResult> done, Runnable notSent) {
            if (dropNext) {
              dropNext = false;
              return false;
            }
            // Built before it is sent, and built once.
            assertThat(prepared.remove(row)).as("row " + row + " prepared").isEqualTo(1);
            launches.add(new Launch(row, intended, done, notSent));
            return true;
          }
        },
        (delay, task) -> timers.add(new Due(now + delay, task)),
        () -> now,
        T0,
        () -> doneCalls++);
    return turns;
  }

  /** Runs the next timer, moving the clock to its time. */
  private void fireNextTimer() {
    Due next = timers.stream().min(Comparator.comparingLong(Due::at)).orElseThrow();
    timers.remove(next);
    now = Math.max(now, next.at());
    next.task().run();
  }

  private Launch launched(int row) {
    return launches.stream().filter(l -> l.row() == row).findFirst().orElseThrow();
  }

  private static ClientResult result(int row, long intended, long end, boolean ok) {
    return new ClientResult(
        row + 1,
        "0".repeat(32),
        "b",
        0,
        intended,
        intended,
        0,
        end - intended,
        end - intended,
        end - intended,
        -1,
        0,
        ok ? 200 : 500,
        ok ? ErrorClass.NONE : ErrorClass.HTTP_5XX,
        ok ? null : "HTTP 500",
        10,
        2,
        10,
        ok ? 2 : -1,
        null,
        false,
        1,
        "x");
  }

  @Test
  void aLaterTurnLeavesAtItsTimeOrAtThePreviousAnswersEndOrItsDelayAfterIt() throws Exception {
    ReplayTurns turns = start(null);
    // The clock paces rows 0, 1, 2 and 6: no session's later turn.
    assertThat(turns.pacedCount()).isEqualTo(4);
    assertThat(List.of(turns.pacedRow(0), turns.pacedRow(1), turns.pacedRow(2), turns.pacedRow(3)))
        .containsExactly(0, 1, 2, 6);

    Consumer<ClientResult> a1 = turns.paced(0);
    // The next turn is built while this one runs.
    assertThat(prepared).containsKey(3);
    now = T0 + 50 * MS;
    Consumer<ClientResult> b1 = turns.paced(1);
    now = T0 + 60 * MS;
    b1.accept(result(1, T0 + 50 * MS, now, true));
    // b's second turn has no timestamp: it waits its delay, 500 ms ÷ 2, after b1's last byte.
    assertThat(timers).hasSize(1);
    now = T0 + 100 * MS;
    assertThat(turns.paced(2)).as("a row of no session").isNull();

    // c1 (at 200 ms) ends fast: c2 keeps its own time, 450 ms ÷ 2.
    now = T0 + 200 * MS;
    Consumer<ClientResult> c1 = turns.paced(6);
    now = T0 + 210 * MS;
    c1.accept(result(6, T0 + 200 * MS, now, true));
    fireNextTimer();
    assertThat(launched(7).intended()).isEqualTo(T0 + 225 * MS);
    // c2 fails: c3 is not sent, and what was built for it goes.
    now = T0 + 240 * MS;
    launched(7).done().accept(result(7, T0 + 225 * MS, now, false));
    assertThat(prepared).doesNotContainKey(8);

    fireNextTimer();
    assertThat(launched(4).intended()).isEqualTo(T0 + 310 * MS);
    now = T0 + 320 * MS;
    launched(4).done().accept(result(4, T0 + 310 * MS, now, true));

    // a1 is slow: its second turn was due at 300 ms ÷ 2 = 150 ms, before a1 could end. It leaves
    // when a1 has, intended then: waiting for the answer is not schedule lag.
    now = T0 + 400 * MS;
    a1.accept(result(0, T0, now, true));
    assertThat(launched(3).intended()).isEqualTo(T0 + 400 * MS);
    assertThat(timers).isEmpty();
    // a's third turn (neither timestamp nor delay) right after a2's answer.
    now = T0 + 450 * MS;
    launched(3).done().accept(result(3, T0 + 400 * MS, now, true));
    assertThat(launched(5).intended()).isEqualTo(T0 + 450 * MS);

    turns.pacerDone();
    assertThat(doneCalls).as("a still runs").isZero();
    now = T0 + 470 * MS;
    launched(5).done().accept(result(5, T0 + 450 * MS, now, true));
    assertThat(doneCalls).isEqualTo(1);
    assertThat(launches).extracting(Launch::row).containsExactly(7, 4, 3, 5);
    assertThat(turns.counts()).isEqualTo(new Sessions.Counts(3, 2, 1, 0, 0, 0, 1, 0, 0));
    assertThat(turns.lastDueNanos()).isEqualTo(T0 + 450 * MS);
    assertThat(prepared).isEmpty();
  }

  @Test
  void aDurationsEndStopsASessionWhoseNextTurnWouldLeaveAtOrAfterIt() throws Exception {
    ReplayTurns turns = start(Duration.ofMillis(300));
    Consumer<ClientResult> a1 = turns.paced(0);
    now = T0 + 50 * MS;
    Consumer<ClientResult> b1 = turns.paced(1);
    // b2 would be due at 60 + 250 ms: past the end, not sent.
    now = T0 + 60 * MS;
    b1.accept(result(1, T0 + 50 * MS, now, true));
    assertThat(timers).isEmpty();
    // a1 ends at 299 ms: a2 is due at once, before the end.
    now = T0 + 299 * MS;
    a1.accept(result(0, T0, now, true));
    assertThat(launched(3).intended()).isEqualTo(T0 + 299 * MS);
    // a2 ends at 300 ms: a3 would leave at the end itself.
    now = T0 + 300 * MS;
    launched(3).done().accept(result(3, T0 + 299 * MS, now, true));
    turns.pacerDone();
    assertThat(doneCalls).isEqualTo(1);
    assertThat(turns.counts()).isEqualTo(new Sessions.Counts(2, 0, 0, 0, 2, 0, 2, 0, 0));
    assertThat(prepared).isEmpty();
  }

  @Test
  void aDroppedOrUnbuiltTurnCutsItsSessionAndTheStepWaitsForTheClock() throws Exception {
    ReplayTurns turns = start(null);
    // a's first turn dropped at the in-flight cap: none of its three turns is sent.
    turns.pacedDropped(0);
    now = T0 + 50 * MS;
    Consumer<ClientResult> b1 = turns.paced(1);
    now = T0 + 60 * MS;
    b1.accept(result(1, T0 + 50 * MS, now, true));
    now = T0 + 200 * MS;
    Consumer<ClientResult> c1 = turns.paced(6);
    now = T0 + 210 * MS;
    c1.accept(result(6, T0 + 200 * MS, now, true));
    fireNextTimer();
    // c2's request could not be built: c is cut there.
    launched(7).notSent().run();
    // b2 is dropped at the in-flight cap.
    dropNext = true;
    fireNextTimer();
    assertThat(turns.droppedLater()).isEqualTo(1);
    assertThat(launches).extracting(Launch::row).containsExactly(7);
    assertThat(doneCalls).as("the clock has rows to pace").isZero();
    turns.pacerDone();
    assertThat(doneCalls).isEqualTo(1);
    assertThat(turns.counts()).isEqualTo(new Sessions.Counts(3, 0, 3, 0, 0, 0, 3 + 2 + 1, 0, 0));
    assertThat(prepared).isEmpty();
  }
}
