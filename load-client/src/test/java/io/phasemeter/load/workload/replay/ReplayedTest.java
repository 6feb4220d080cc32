package io.phasemeter.load.workload.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a run takes from a trace read: the rows the clock paces, when a later turn is due, the
 * step's planned length and rate, the bound on how slow a replay may be, and the session labels
 * pairs.csv writes instead of the trace's ids.
 */
class ReplayedTest {
  private static final long MS = 1_000_000L;

  @TempDir Path dir;

  private Replayed load(String text, double speed) throws Exception {
    Path file = Files.writeString(dir.resolve("t.jsonl"), text);
    return new Replay(file, Replay.Format.MOONCAKE, speed, 0, Replay.Prefixes.SHARED).load();
  }

  private static final String SESSIONS =
      String.join(
          "\n",
          "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"u-1\"}",
          "{\"timestamp\": 100, \"input_length\": 10, \"output_length\": 2}",
          "{\"timestamp\": 200, \"input_length\": 20, \"output_length\": 2, \"session_id\": \"u-1\"}",
          "{\"session_id\": \"u-1\", \"delay\": 1000, \"input_length\": 30, \"output_length\": 2}",
          "{\"timestamp\": 300, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"u-2\"}");

  @Test
  void theClockPacesFirstTurnsAndRowsOutsideSessionsAndALaterTurnWaitsForTheAnswer()
      throws Exception {
    Replayed r = load(SESSIONS, 2);
    assertThat(r.pacedRows()).isEqualTo(3);
    assertThat(new int[] {r.pacedRow(0), r.pacedRow(1), r.pacedRow(2)}).containsExactly(0, 1, 4);
    // The paced rows' gaps, at speed 2.
    var arrivals = r.arrivals(null);
    assertThat(arrivals.nextGapNanos()).isEqualTo(50 * MS);
    assertThat(arrivals.nextGapNanos()).isEqualTo(100 * MS);
    long start = 7_000 * MS;
    // Row 2: its time (100 ms after the start) or its previous turn's end, the later.
    assertThat(r.due(2, start, start + 40 * MS)).isEqualTo(start + 100 * MS);
    assertThat(r.due(2, start, start + 140 * MS)).isEqualTo(start + 140 * MS);
    // Row 3: 1000 ms ÷ 2 after its previous turn's end.
    assertThat(r.due(3, start, start + 140 * MS)).isEqualTo(start + 640 * MS);
    // Planned: row 3 at the earliest 100 + 500 ms, the step's 600 ms and 1 ms; five rows in it.
    assertThat(r.stepDuration(null)).isEqualTo(Duration.ofMillis(601));
    assertThat(r.pacedDuration(null)).isEqualTo(Duration.ofMillis(151));
    assertThat(r.rowsSentMax(null)).isEqualTo(5);
    // Cut at 150 ms: rows due before it (row 4 is due at 150 ms itself).
    assertThat(r.rowsSentMax(Duration.ofMillis(150))).isEqualTo(3);
    assertThat(r.meanRate(null)).isEqualTo(5 / 0.601);
    assertThat(r.conditions(null)).containsEntry("replay_span_s", 1.2);
    assertThat(r.arrivalText(null)).endsWith("; a session's later turns after its previous answer");
  }

  @Test
  void aReplayLongerThanThirtyDaysAtItsSpeedIsRefusedAndOneOfThirtyDaysDoesNotOverflow()
      throws Exception {
    String tenSeconds =
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n"
            + "{\"timestamp\": 10000, \"input_length\": 10, \"output_length\": 2}\n";
    assertThatThrownBy(() -> load(tenSeconds, 1e-9))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "--replay-speed 0.000000001 stretches the trace's 10 s to 1.16e+05 days: more than 30"
                + " (the limit); replay faster or fewer rows (--replay-limit)");
    // Just under 30 days: taken, every figure finite and positive.
    double speed = 10.0 / Replayed.MAX_SPAN.toSeconds() * (1 + 1e-9);
    Replayed slow = load(tenSeconds, speed);
    assertThat(slow.stepDuration(null))
        .isLessThanOrEqualTo(Replayed.MAX_SPAN.plusMillis(1))
        .isGreaterThan(Replayed.MAX_SPAN.minusDays(1));
    assertThat(slow.rowsSentMax(null)).isEqualTo(2);
    assertThat(slow.meanRate(null)).isPositive().isFinite();
    assertThat(slow.arrivals(null).nextGapNanos()).isPositive();
    // A whole trace's delays count too.
    String delays =
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"a\"}\n"
            + "{\"session_id\": \"a\", \"delay\": 3000000000, \"input_length\": 20,"
            + " \"output_length\": 2}\n";
    assertThatThrownBy(() -> load(delays, 1)).hasMessageContaining("more than 30 (the limit)");
  }

  @Test
  void aSessionsLabelIsAShortSaltedHashOfItsIdNeverTheId() throws Exception {
    Replayed r = load(SESSIONS, 1);
    SessionLabels run1 = r.sessionLabels("00000000000000aa");
    String a = run1.label(0);
    assertThat(a).hasSize(16).matches("[0-9a-f]{16}").doesNotContain("u-1");
    assertThat(run1.label(2)).isEqualTo(a);
    assertThat(run1.label(3)).isSameAs(a);
    assertThat(run1.label(4)).isNotEqualTo(a).hasSize(16);
    assertThat(run1.label(1)).as("no session").isNull();
    assertThat(run1.label(5)).as("past the rows").isNull();
    // The first 8 bytes of SHA-256(salt, NUL, id).
    assertThat(a)
        .isEqualTo(
            HexFormat.of()
                .formatHex(
                    java.security.MessageDigest.getInstance("SHA-256")
                        .digest("00000000000000aa\0u-1".getBytes()),
                    0,
                    8));
    // Another run, another salt: another label.
    assertThat(r.sessionLabels("00000000000000bb").label(0)).isNotEqualTo(a);
  }
}
