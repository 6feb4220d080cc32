package io.phasemeter.proxy.budget;

import io.phasemeter.core.Phases;
import io.phasemeter.core.slo.Objectives;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

/**
 * One budget's judged and met requests per tenant over its rolling window, counted exactly: a ring
 * of {@link #STEPS} time steps per tenant, each a row of counts (judged, met, and each first missed
 * objective), on an injected monotonic clock. A request stays in the count for between {@code
 * (STEPS − 1) / STEPS} of the window and the whole window after it ended: the window is read as its
 * last {@link #STEPS} steps, the current one included, as the rolling quantiles are.
 *
 * <p>Bounded: {@code maxTenants} rows per budget, and one for {@code other} (tenants are bounded by
 * the allowlist already; past the bound a tenant is counted as {@code other}), each {@code STEPS ×}
 * {@link #WIDTH} longs.
 */
final class AttainmentWindow {
  /** Time steps per window. */
  static final int STEPS = 60;

  /** Row columns: judged, met, then the first missed objective. */
  static final int JUDGED = 0;

  static final int MET = 1;
  static final int ERROR = 2;
  private static final int[] COLUMN = new int[Phases.values().length];
  private static final Phases[] PHASE_OF_COLUMN;

  /** The columns of a row. */
  static final int WIDTH;

  static {
    java.util.Arrays.fill(COLUMN, -1);
    int next = ERROR + 1;
    java.util.List<Phases> phases = new java.util.ArrayList<>();
    for (Phases p : Phases.values()) {
      if (Objectives.judgedByProxy(p)) {
        COLUMN[p.ordinal()] = next++;
        phases.add(p);
      }
    }
    WIDTH = next;
    PHASE_OF_COLUMN = new Phases[WIDTH];
    for (Phases p : phases) {
      PHASE_OF_COLUMN[COLUMN[p.ordinal()]] = p;
    }
  }

  // Objective to column, read without allocating (Phases.fromKey copies the enum's values).
  private static final Map<String, Integer> COLUMN_OF;

  static {
    Map<String, Integer> m = new HashMap<>();
    m.put(io.phasemeter.proxy.pipeline.SloJudgement.ERROR, ERROR);
    for (int k = ERROR + 1; k < WIDTH; k++) {
      m.put(PHASE_OF_COLUMN[k].key(), k);
    }
    COLUMN_OF = Map.copyOf(m);
  }

  private final long stepNanos;
  private final LongSupplier clock;
  private final int maxTenants;
  private final Map<String, Cell> byTenant = new ConcurrentHashMap<>();

  /**
   * @param window the budget's window
   * @param clock monotonic nanoseconds
   * @param maxTenants bound on rows; further tenants are counted as {@code other}
   */
  AttainmentWindow(Duration window, LongSupplier clock, int maxTenants) {
    this.stepNanos = Math.max(1, window.toNanos() / STEPS);
    this.clock = clock;
    this.maxTenants = maxTenants;
  }

  /** The column of a first missed objective ({@code error} or a catalogue key), or -1. */
  static int column(String objective) {
    return COLUMN_OF.getOrDefault(objective, -1);
  }

  /** The objective a column counts: {@code error} or a catalogue key. */
  static String objective(int column) {
    return column == ERROR
        ? io.phasemeter.proxy.pipeline.SloJudgement.ERROR
        : PHASE_OF_COLUMN[column].key();
  }

  /**
   * Counts one judged request of {@code tenant}; {@code column} is its first missed objective's.
   */
  void record(String tenant, boolean met, int column) {
    Cell c = byTenant.get(tenant);
    if (c == null) {
      String t =
          byTenant.size() >= maxTenants
              ? io.phasemeter.proxy.pipeline.RequestContext.OTHER_TENANT
              : tenant;
      c = byTenant.computeIfAbsent(t, x -> new Cell());
    }
    c.record(Math.floorDiv(clock.getAsLong(), stepNanos), met, column);
  }

  /** Per tenant, the counts of the window ending now: a row of {@link #WIDTH} columns. */
  Map<String, long[]> sums() {
    long step = Math.floorDiv(clock.getAsLong(), stepNanos);
    Map<String, long[]> out = new HashMap<>();
    byTenant.forEach((t, c) -> out.put(t, c.sum(step)));
    return out;
  }

  /** One tenant's ring: row {@code step % STEPS} holds step {@code steps[row]}'s counts. */
  private static final class Cell {
    private final long[] steps = new long[STEPS];
    private final long[] counts = new long[STEPS * WIDTH];

    Cell() {
      java.util.Arrays.fill(steps, Long.MIN_VALUE);
    }

    synchronized void record(long step, boolean met, int column) {
      int row = (int) Math.floorMod(step, (long) STEPS);
      int at = row * WIDTH;
      if (steps[row] != step) {
        steps[row] = step;
        java.util.Arrays.fill(counts, at, at + WIDTH, 0);
      }
      counts[at + JUDGED]++;
      if (met) {
        counts[at + MET]++;
      } else if (column >= 0) {
        counts[at + column]++;
      }
    }

    synchronized long[] sum(long step) {
      long[] out = new long[WIDTH];
      for (int row = 0; row < STEPS; row++) {
        long s = steps[row];
        if (s <= step && s > step - STEPS) {
          for (int k = 0; k < WIDTH; k++) {
            out[k] += counts[row * WIDTH + k];
          }
        }
      }
      return out;
    }
  }
}
