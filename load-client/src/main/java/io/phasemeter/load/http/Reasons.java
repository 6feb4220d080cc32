package io.phasemeter.load.http;

import java.util.HashMap;

/**
 * One String per distinct failure reason of a run, so that a run of failures keeps one reason
 * object, not one per failed request (the pairs keep every result's reason to the end of the run:
 * see {@code PairColumns}). Bounded: past {@link #MAX_ENTRIES} distinct reasons a new one is kept
 * as it came and not remembered. Used from the runner's context only: no lock.
 */
final class Reasons {
  /** Distinct reasons remembered, at most. */
  static final int MAX_ENTRIES = 1024;

  private final HashMap<String, String> seen = new HashMap<>();
  private final int max;

  Reasons() {
    this(MAX_ENTRIES);
  }

  Reasons(int max) {
    this.max = max;
  }

  /** The String already kept that equals {@code reason}, else {@code reason} (null for null). */
  String intern(String reason) {
    if (reason == null) {
      return null;
    }
    String kept = seen.get(reason);
    if (kept != null) {
      return kept;
    }
    if (seen.size() < max) {
      seen.put(reason, reason);
    }
    return reason;
  }

  /** Distinct reasons remembered. */
  int size() {
    return seen.size();
  }
}
