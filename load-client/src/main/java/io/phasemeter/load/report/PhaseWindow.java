package io.phasemeter.load.report;

import io.phasemeter.load.join.Pair;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The live table's window: every phase's values since the last table, one {@link SignedRecorder}
 * per phase. {@link #interval} swaps them all out and starts the next window; the histograms of a
 * returned window are recycled by the next call, so read it before taking another. Recording and
 * taking an interval are serialized by the caller ({@link LiveReport}'s lock).
 */
final class PhaseWindow {
  private final Map<String, SignedRecorder> recorders = new LinkedHashMap<>();

  PhaseWindow() {
    for (String name : PhaseStats.NAMES) {
      recorders.put(name, new SignedRecorder());
    }
  }

  /** One finished request's values, as {@link PhaseStats#add} takes them. */
  void add(Pair pair) {
    PhaseStats.values(pair, (name, ms) -> recorders.get(name).recordMs(ms));
  }

  /** One inter-token gap, in nanoseconds. */
  void addItl(long nanos) {
    Double ms = PhaseStats.itlMs(nanos);
    if (ms != null) {
      recorders.get("itl").recordMs(ms);
    }
  }

  /** The window so far, as statistics (distributions only, no request counters); then a new one. */
  PhaseStats interval() {
    Map<String, SignedHistogram> histograms = new LinkedHashMap<>();
    recorders.forEach((name, r) -> histograms.put(name, r.interval()));
    return PhaseStats.ofWindow(histograms);
  }
}
