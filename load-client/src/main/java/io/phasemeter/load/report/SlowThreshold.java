package io.phasemeter.load.report;

import io.phasemeter.load.http.ClientResult;

/**
 * The {@code client_total} p99 above twice which a successful request is SLOW, read from a run's
 * statistics. Reading a p99 walks the histogram: once per request it was a third of the event loop
 * at 3,000 req/s (JFR, bench/run); at every 1 % of growth (every request from the 100th to the
 * 200th, ~460 walks by the 10,000th) it still took most of the loop in the first second of a run at
 * 5,000 req/s, the walk not yet compiled. So it is refreshed every 100 ms, and tried every 100
 * successes until there is one. Thread-safe.
 */
public final class SlowThreshold {
  static final long REFRESH_NANOS = 100_000_000L;
  private final PhaseStats stats;
  private long okSeen;
  private long atNanos;
  private double p99 = Double.NaN;

  public SlowThreshold(PhaseStats stats) {
    this.stats = stats;
  }

  /** The current p99 in ms, counting one more success; NaN until 100 successes are in. */
  public synchronized double p99Ms() {
    okSeen++;
    long now = System.nanoTime();
    if (Double.isNaN(p99) ? okSeen % 100 == 0 : now - atNanos >= REFRESH_NANOS) {
      atNanos = now;
      p99 =
          stats.count("client_total") >= 100 ? stats.quantileMs("client_total", 0.99) : Double.NaN;
    }
    return p99;
  }

  /** Whether {@code r} took more than twice {@code p99Ms}; never before there is a p99. */
  public static boolean slow(ClientResult r, double p99Ms) {
    return !Double.isNaN(p99Ms) && r.totalNanos() / 1e6 > 2 * p99Ms;
  }
}
