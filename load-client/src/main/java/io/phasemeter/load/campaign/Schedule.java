package io.phasemeter.load.campaign;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * The order of a campaign's runs: first one discarded warm-up run per point, then {@code repeats}
 * blocks, each running every point once in a fresh random order. A slow drift (a warming cache, a
 * throttling card, a neighbour's job) then spreads over every point instead of landing on the ones
 * that happen to run last. The orders come from one seeded generator, so the same seed and points
 * give the same schedule, and the seed is recorded.
 *
 * @param seed the generator's seed
 * @param warmup point ids of the warm-up block, in run order
 * @param blocks point ids of each measured block, in run order
 */
public record Schedule(long seed, List<String> warmup, List<List<String>> blocks) {

  public Schedule {
    warmup = List.copyOf(warmup);
    blocks = blocks.stream().map(List::copyOf).toList();
  }

  /** One scheduled run. {@code block} is 0 for a warm-up run, {@code repeat} then too. */
  public record Entry(int index, int block, int repeat, Plan.Point point) {
    /** Whether this run is a discarded warm-up run. */
    public boolean warmup() {
      return block == 0;
    }

    /** A directory-safe name, e.g. {@code b2-doc-qa-c4} or {@code warmup-doc-qa-r0.3}. */
    public String name() {
      return String.format("%03d-", index)
          + (warmup() ? "warmup" : "b" + block)
          + "-"
          + point.id().replace('/', '-');
    }
  }

  /** Shuffles the point ids once for the warm-up and once per block with one seeded generator. */
  public static Schedule of(List<String> pointIds, int repeats, long seed) {
    Random random = new Random(seed);
    List<String> warmup = new ArrayList<>(pointIds);
    Collections.shuffle(warmup, random);
    List<List<String>> blocks = new ArrayList<>();
    for (int b = 0; b < repeats; b++) {
      List<String> order = new ArrayList<>(pointIds);
      Collections.shuffle(order, random);
      blocks.add(order);
    }
    return new Schedule(seed, warmup, blocks);
  }

  /** Every run in order: the warm-up block, then the measured blocks. */
  public List<Entry> entries(List<Plan.Point> points) {
    List<Entry> out = new ArrayList<>();
    int index = 1;
    for (String id : warmup) {
      out.add(new Entry(index++, 0, 0, find(points, id)));
    }
    for (int b = 0; b < blocks.size(); b++) {
      for (String id : blocks.get(b)) {
        out.add(new Entry(index++, b + 1, b + 1, find(points, id)));
      }
    }
    return out;
  }

  private static Plan.Point find(List<Plan.Point> points, String id) {
    return points.stream()
        .filter(p -> p.id().equals(id))
        .findFirst()
        .orElseThrow(() -> new IllegalArgumentException("no point " + id));
  }
}
