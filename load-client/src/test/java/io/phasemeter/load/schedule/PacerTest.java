package io.phasemeter.load.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.RequestRunner;
import io.phasemeter.load.workload.Arrivals;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class PacerTest {
  private static final long MS = 1_000_000L;

  /** A clock the sleeper moves: to the deadline plus a chosen oversleep. */
  private static final class FakeTime {
    long now;
    long oversleep;
    int sleeps;
    final List<Long> sleptAt = new ArrayList<>();

    Pacer pacer() {
      return new Pacer(
          () -> now,
          (deadline, at) -> {
            assertThat(at).isEqualTo(now);
            assertThat(deadline).isGreaterThan(at);
            sleeps++;
            sleptAt.add(now);
            now = deadline + oversleep;
          });
    }
  }

  /** Records what it was handed, with the clock at that moment. */
  private static final class Recorder implements Pacer.Launcher {
    final FakeTime time;
    final List<long[]> launched = new ArrayList<>(); // {intended, clock}
    int prepared;
    boolean accept = true;

    Recorder(FakeTime time) {
      this.time = time;
    }

    @Override
    public boolean launch(long intended) {
      launched.add(new long[] {intended, time.now});
      return accept;
    }

    @Override
    public void prepare() {
      prepared++;
    }
  }

  @Test
  void eachArrivalLeavesAtItsIntendedTimeWhenTheWakeUpIsPunctual() {
    FakeTime t = new FakeTime();
    t.now = 5 * MS;
    Recorder r = new Recorder(t);
    long[] counts = t.pacer().run(Arrivals.constant(1000), 5 * MS, 15 * MS, r);
    assertThat(counts).containsExactly(10, 0);
    assertThat(r.launched).hasSize(10);
    for (int i = 0; i < 10; i++) {
      assertThat(r.launched.get(i)[0]).isEqualTo(5 * MS + i * MS);
      assertThat(r.launched.get(i)[1]).isEqualTo(r.launched.get(i)[0]);
    }
    // One sleep per gap, each after preparing the next request.
    assertThat(t.sleeps).isEqualTo(9);
    assertThat(r.prepared).isEqualTo(9);
  }

  @Test
  void aLateWakeUpSendsEveryDueArrivalWithItsOwnIntendedTimeNoneSkipped() {
    FakeTime t = new FakeTime();
    t.oversleep = 3 * MS + MS / 2;
    Recorder r = new Recorder(t);
    long[] counts = t.pacer().run(Arrivals.constant(1000), 0, 20 * MS, r);
    assertThat(counts).containsExactly(20, 0);
    for (int i = 0; i < 20; i++) {
      long[] l = r.launched.get(i);
      // The schedule is the clock's, not the wake-ups': intended times stay 1 ms apart ...
      assertThat(l[0]).isEqualTo(i * MS);
      // ... and a late start shows as the clock being past the intended time (schedule lag).
      assertThat(l[1]).isGreaterThanOrEqualTo(l[0]);
    }
    // Woke at 4.5 ms: arrivals 1..4 left together, late by 3.5 .. 0.5 ms.
    assertThat(r.launched.subList(1, 5))
        .allSatisfy(l -> assertThat(l[1]).isEqualTo(4 * MS + MS / 2));
  }

  @Test
  void refusedArrivalsAreCountedAsDroppedAndTheScheduleGoesOn() {
    FakeTime t = new FakeTime();
    Recorder r = new Recorder(t);
    r.accept = false;
    long[] counts = t.pacer().run(Arrivals.constant(100), 0, 100 * MS, r);
    assertThat(counts).containsExactly(0, 10);
    assertThat(r.launched)
        .extracting(l -> l[0])
        .containsExactly(
            0L, 10 * MS, 20 * MS, 30 * MS, 40 * MS, 50 * MS, 60 * MS, 70 * MS, 80 * MS, 90 * MS);
  }

  @Test
  void aStartAlreadyPastTheEndSendsNothing() {
    FakeTime t = new FakeTime();
    t.now = 50 * MS;
    Recorder r = new Recorder(t);
    assertThat(t.pacer().run(Arrivals.constant(1000), 10 * MS, 10 * MS, r)).containsExactly(0, 0);
    assertThat(r.launched).isEmpty();
  }

  @Test
  void belowFiftyPerSecondEachArrivalIsHandedOutTheLeadAheadAndKeepsItsIntendedTime() {
    FakeTime t = new FakeTime();
    Recorder r = new Recorder(t);
    long[] counts = t.pacer().run(Arrivals.constant(10), 0, 500 * MS, r);
    assertThat(counts).containsExactly(5, 0);
    for (int i = 0; i < 5; i++) {
      long[] l = r.launched.get(i);
      // The schedule is unchanged: 100 ms apart from the start.
      assertThat(l[0]).isEqualTo(i * 100 * MS);
      if (i > 0) {
        // Handed out ahead (the first one has no gap before it), by the exchange's tolerance.
        assertThat(l[1]).isEqualTo(l[0] - Pacer.LEAD_NANOS);
      }
    }
    assertThat(Pacer.LEAD_NANOS).isEqualTo(RequestRunner.HAND_OUT_LEAD_NANOS);
  }

  @Test
  void aboveFiftyPerSecondNothingIsHandedOutAhead() {
    FakeTime t = new FakeTime();
    Recorder r = new Recorder(t);
    t.pacer().run(Arrivals.constant(100), 0, 100 * MS, r);
    assertThat(r.launched).hasSize(10).allSatisfy(l -> assertThat(l[1]).isEqualTo(l[0]));
  }
}
