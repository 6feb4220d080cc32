package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class ScheduleTest {
  private static final List<String> POINTS =
      IntStream.rangeClosed(1, 8).mapToObj(i -> "p" + i).toList();

  @Test
  void everyBlockIsAPermutationOfThePoints() {
    Schedule s = Schedule.of(POINTS, 5, 42);
    assertThat(s.warmup()).containsExactlyInAnyOrderElementsOf(POINTS);
    assertThat(s.blocks()).hasSize(5);
    for (List<String> block : s.blocks()) {
      assertThat(block).containsExactlyInAnyOrderElementsOf(POINTS);
    }
    // Fresh order per block: with 8 points, five identical orders would be a broken shuffle.
    assertThat(s.blocks().stream().distinct().count()).isGreaterThan(1);
  }

  @Test
  void theSameSeedGivesTheSameScheduleAndTheSeedIsKept() {
    Schedule a = Schedule.of(POINTS, 4, 7);
    Schedule b = Schedule.of(POINTS, 4, 7);
    assertThat(a).isEqualTo(b);
    assertThat(a.seed()).isEqualTo(7);
    assertThat(Schedule.of(POINTS, 4, 8).blocks()).isNotEqualTo(a.blocks());
  }

  @Test
  void entriesRunTheWarmUpsFirstThenTheBlocksInOrder() {
    Plan plan =
        Plan.parse(
            "model: m\nrepeats: 3\nduration: 1s\nprofiles: [64:8]\nconcurrency: [1, 2]\nrates: [1]\n",
            "p.yaml");
    Schedule s = Schedule.of(plan.points().stream().map(Plan.Point::id).toList(), 3, 1);
    List<Schedule.Entry> e = s.entries(plan.points());
    assertThat(e).hasSize(3 + 9);
    assertThat(e.subList(0, 3)).allMatch(Schedule.Entry::warmup);
    assertThat(e.subList(3, 6)).allMatch(x -> x.block() == 1 && x.repeat() == 1);
    assertThat(e.subList(9, 12).stream().map(x -> x.point().id()).toList())
        .isEqualTo(s.blocks().get(2));
    assertThat(e.get(0).name()).startsWith("001-warmup-64-8-");
  }
}
