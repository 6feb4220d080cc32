package io.phasemeter.load.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A replayed trace's schedule on an injected clock: each row leaves at the clock's start plus its
 * time, whatever the wake-ups do, the step ends after the last row, and a row is built with its own
 * number whatever was dropped or sent before it.
 */
class TracePacingTest {
  private static final long MS = 1_000_000L;

  @Test
  void eachRowIsIntendedAtTheStartPlusItsOffsetEvenAfterALateWakeUp() {
    long[] offsets = {0, 0, 3 * MS, 3 * MS + 250_000, 40 * MS, 41 * MS};
    long start = 7 * MS;
    long[] now = {start};
    long[] oversleep = {0};
    int[] sleeps = {0};
    List<long[]> launched = new ArrayList<>();
    Pacer pacer =
        new Pacer(
            () -> now[0],
            (deadline, at) -> {
              sleeps[0]++;
              now[0] = deadline + oversleep[0];
              // The wake-up after the third row is 5 ms late: rows 4 and 5 are due by then.
              oversleep[0] = launched.size() == 3 ? 5 * MS : 0;
            });
    Arrivals trace = Arrivals.trace(offsets, 100);
    assertThat(trace.kind()).isEqualTo("trace");
    assertThat(trace.ratePerSec()).isEqualTo(100);
    long[] counts =
        pacer.run(
            trace,
            start,
            start + 41 * MS + MS,
            intended -> {
              launched.add(new long[] {intended, now[0]});
              return true;
            });
    assertThat(counts).containsExactly(6, 0);
    for (int i = 0; i < offsets.length; i++) {
      assertThat(launched.get(i)[0]).as("row " + i).isEqualTo(start + offsets[i]);
      assertThat(launched.get(i)[1]).as("row " + i).isGreaterThanOrEqualTo(launched.get(i)[0]);
    }
    // A sleep before rows 2, 3 and 4 (5 was due on waking); none after the last row: the step
    // ended there.
    assertThat(sleeps[0]).isEqualTo(3);
  }

  @Test
  void aCutRunSendsOnlyTheRowsDueBeforeItsEnd() {
    long[] offsets = {0, 10 * MS, 20 * MS, 30 * MS};
    long[] now = {0};
    List<Long> launched = new ArrayList<>();
    long[] counts =
        new Pacer(() -> now[0], (deadline, at) -> now[0] = deadline)
            .run(Arrivals.trace(offsets, 1), 0, 20 * MS, i -> launched.add(i));
    assertThat(launched).containsExactly(0L, 10 * MS);
    assertThat(counts).containsExactly(2, 0);
  }

  @Test
  void afterTheLastRowTheGapEndsAnyStep() {
    Arrivals a = Arrivals.trace(new long[] {0, 5}, 1);
    assertThat(a.nextGapNanos()).isEqualTo(5);
    assertThat(a.nextGapNanos()).isEqualTo(Arrivals.AFTER_THE_LAST_NANOS);
    assertThat(a.nextGapNanos()).isEqualTo(Arrivals.AFTER_THE_LAST_NANOS);
    // Far past a day's step, and no overflow from a clock of a year's uptime.
    assertThat(Arrivals.AFTER_THE_LAST_NANOS).isGreaterThan(86_400_000_000_000L * 365 * 50);
    assertThat(365 * 86_400_000_000_000L + Arrivals.AFTER_THE_LAST_NANOS).isPositive();
    assertThatThrownBy(() -> Arrivals.trace(new long[] {3}, 1))
        .hasMessageContaining("first arrival must be at offset 0");
  }

  @Test
  void aReplayedRowIsBuiltWithItsOwnNumberWhateverWasSentBefore() {
    Workload w =
        Workload.from(
            "m",
            Api.COMPLETIONS,
            false,
            1,
            (seq, headers) ->
                new RequestSpec(
                    Api.COMPLETIONS,
                    "/v1/completions",
                    Buffer.buffer("{}"),
                    "row-" + (seq - 1),
                    1,
                    1,
                    false,
                    headers));
    AtomicLong sent = new AtomicLong();
    Series s = Series.measured(TraceIds.of(9), sent, w, gap -> {}, r -> {});
    Series.Prepared first = s.build(1);
    s.issue();
    // Row 1 was dropped (or is a later turn, sent after): row 2 is request 3 all the same.
    Series.Prepared third = s.build(3);
    s.issue();
    assertThat(first.seq()).isEqualTo(1);
    assertThat(first.spec().bucket()).isEqualTo("row-0");
    assertThat(third.seq()).isEqualTo(3);
    assertThat(third.spec().bucket()).isEqualTo("row-2");
    assertThat(third.traceId()).isEqualTo(TraceIds.of(9).traceId(3));
    // The counter of requests sent counts the two sent.
    assertThat(sent.get()).isEqualTo(2);

    // Numbered by request sent (a rate's requests): the next number.
    Series plain = Series.measured(TraceIds.of(9), new AtomicLong(), w, gap -> {}, r -> {});
    plain.build();
    plain.issue();
    assertThat(plain.build().seq()).isEqualTo(2);
  }
}
