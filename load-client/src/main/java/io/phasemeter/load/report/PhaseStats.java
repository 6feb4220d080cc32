package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.HdrHistogram.Histogram;

/**
 * Per-phase distributions of one run, or of one reporting window, following docs/design.md §2:
 *
 * <ul>
 *   <li>client latencies ({@code client_total}, {@code client_ttft}, {@code transport_setup},
 *       {@code tpot}) over successful requests only; {@code transport_setup}'s parts ({@code dns},
 *       {@code connect}, {@code tls}) over the successful requests that opened a connection;
 *   <li>server phases and both envelopes over <em>joined</em> successful requests only, each
 *       envelope computed per request before any quantile — never {@code p95(A) − p95(B)};
 *   <li>{@code schedule_lag} over every started request, failed or not;
 *   <li>{@code itl} from {@link #addItl(long)}, one call per inter-token gap.
 * </ul>
 *
 * <p>A negative value (an envelope below zero is a boundary, unit or join error) is kept, counted
 * by {@link #negativeCount(String)} and part of every quantile; nothing is clipped. Quantiles are
 * within 1 % of the per-request values, with memory bounded by the range of values, not their
 * number (see {@link SignedHistogram}). Construction allocates no histogram until a value arrives,
 * so one instance per reporting window is cheap.
 *
 * <p>An instance made {@link #withLimits with budget limits} also counts, beside the histograms and
 * exactly, each limited phase's values and those at or below each of its limits (in whole
 * nanoseconds, see {@link LimitCounts}): what the budgets are judged on, as the proxy judges them
 * ({@code core.budget.LatencyLimit.breached}). The histograms give the quantile shown beside the
 * verdict.
 *
 * <p>Thread-safe: every method holds the instance's lock briefly.
 */
public final class PhaseStats {

  /** Every phase name, in the order reports show them: the catalogue's ({@link Phases}). */
  public static final List<String> NAMES = Phases.reportedKeys();

  /**
   * The proxy's own phases a record carries by name (its {@code phases} map), in report order: the
   * catalogue's pipeline phases that have a row; auth, prepare and route are summed as gateway.
   */
  static final List<String> PIPELINE = keys(Phases.Source.PIPELINE);

  /** The engine's split of generation, from its own spans, in report order. */
  static final List<String> ENGINE = keys(Phases.Source.ENGINE);

  private static List<String> keys(Phases.Source source) {
    return Phases.inReportOrder().stream()
        .filter(p -> p.source() == source)
        .map(Phases::key)
        .toList();
  }

  /** The keys of {@code phases}, in their order. */
  static List<String> keys(List<Phases> phases) {
    return phases.stream().map(Phases::key).toList();
  }

  private static final Set<String> NAME_SET =
      Collections.unmodifiableSet(new LinkedHashSet<>(NAMES));

  /**
   * Quantiles of one phase in milliseconds; every figure is NaN when {@code count} is 0.
   *
   * @param count values recorded
   * @param p50 median
   * @param p95 95th percentile
   * @param p99 99th percentile
   * @param max the largest value, exact
   */
  public record Summary(long count, double p50, double p95, double p99, double max) {
    static final Summary EMPTY = new Summary(0, Double.NaN, Double.NaN, Double.NaN, Double.NaN);
  }

  private final Map<String, SignedHistogram> histograms = new LinkedHashMap<>();

  /**
   * Exact counts per limited phase; a phase leaves the map when values reach its histogram that
   * were not counted (an hlog read back, a merge of uncounted statistics): no counts, no claim.
   */
  private final Map<String, LimitCounts> exact = new HashMap<>();

  private long started;
  private long ok;
  private long joined;
  private long joinedOk;
  private long engineExpected;
  private long engineMatched;

  /** An empty instance; allocates no histogram until a value arrives. */
  public PhaseStats() {}

  /**
   * An instance holding one live window's distributions (see {@link PhaseWindow}); its request
   * counters are zero.
   */
  static PhaseStats ofWindow(Map<String, SignedHistogram> histograms) {
    PhaseStats stats = new PhaseStats();
    stats.histograms.putAll(histograms);
    return stats;
  }

  /** An empty instance. */
  public static PhaseStats create() {
    return new PhaseStats();
  }

  /**
   * An empty instance that counts, for each phase key of {@code limitsNanos} (canonical keys:
   * {@code server_ttft}, not {@code ttft}), its values at or below each given limit in nanoseconds.
   */
  public static PhaseStats withLimits(Map<String, ? extends Collection<Long>> limitsNanos) {
    PhaseStats stats = new PhaseStats();
    limitsNanos.forEach(
        (name, limits) -> {
          stats.existing(name);
          long[] sorted = limits.stream().mapToLong(Long::longValue).sorted().distinct().toArray();
          if (sorted.length > 0) {
            stats.exact.put(name, new LimitCounts(sorted));
          }
        });
    return stats;
  }

  /** An instance holding every pair of {@code pairs} (no ITL: that has its own path). */
  public static PhaseStats of(Iterable<Pair> pairs) {
    PhaseStats stats = new PhaseStats();
    for (Pair p : pairs) {
      stats.add(p);
    }
    return stats;
  }

  /** Adds one finished request, joined with the proxy's record or not. */
  public synchronized void add(Pair pair) {
    ClientResult c = pair.client();
    started++;
    if (pair.joined()) {
      joined++;
    }
    if (c.ok()) {
      ok++;
      if (pair.joined()) {
        joinedOk++;
        ServerRecord s = pair.server();
        if (s.phasesMs() != null && !s.external() && s.engineStatus() != null) {
          engineExpected++;
          if (s.engineStatus().equals("matched")) {
            engineMatched++;
          }
        }
      }
    }
    values(pair, this::record);
  }

  /** One value: into the phase's histogram and, if the phase is limited, its exact counts. */
  private void record(String name, double ms) {
    histogram(name).recordMs(ms);
    if (!exact.isEmpty()) {
      LimitCounts c = exact.get(name);
      if (c != null) {
        c.record(SignedHistogram.nanos(ms));
      }
    }
  }

  /** Where one request's per-phase values go: a run's histograms or a live window's recorders. */
  interface ValueSink {
    void record(String phase, double ms);
  }

  /**
   * Hands every per-phase value of one finished request to {@code sink}, in milliseconds: what
   * {@link #add} records, and what the live window records (docs/design.md §2).
   */
  static void values(Pair pair, ValueSink sink) {
    ClientResult c = pair.client();
    if (c.intendedNanos() >= 0 && c.actualNanos() >= 0) {
      finite(sink, "schedule_lag", c.scheduleLagNanos() / 1e6);
    }
    if (!c.ok()) {
      return;
    }
    nanos(sink, "client_total", c.totalNanos());
    nanos(sink, "client_ttft", c.ttftNanos());
    nanos(sink, "transport_setup", c.transportSetupNanos());
    // Its parts, for a request that opened its connection (dns: a name was resolved; tls: https).
    nanos(sink, "dns", c.dnsNanos());
    nanos(sink, "connect", c.connectNanos());
    nanos(sink, "tls", c.tlsNanos());
    nanos(sink, "tpot", c.tpotNanos());
    if (!pair.joined()) {
      return;
    }
    ServerRecord s = pair.server();
    finite(sink, "network_envelope", pair.networkEnvelopeMs());
    finite(sink, "ttft_envelope", pair.ttftEnvelopeMs());
    finite(sink, "server_root", s.rootMs());
    finite(sink, "server_ttft", s.serverTtftMs());
    finite(sink, "unattributed", s.unattributedMs());
    if (s.phasesMs() != null) {
      finite(sink, "gateway", s.gatewayMs());
      for (String phase : PIPELINE) {
        finite(sink, phase, s.phasesMs().get(phase));
      }
      // The engine's split of generation; an external provider's generation is never split.
      if (!s.external() && s.engineStatus() != null && s.engineStatus().equals("matched")) {
        for (String phase : ENGINE) {
          finite(sink, phase, s.phasesMs().get(phase));
        }
      }
    }
  }

  /** An inter-token gap in milliseconds, as {@link #addItl} records it; null when negative. */
  static Double itlMs(long nanos) {
    return nanos >= 0 ? nanos / 1e6 : null;
  }

  private static void nanos(ValueSink sink, String name, long nanos) {
    if (nanos >= 0) {
      sink.record(name, nanos / 1e6);
    }
  }

  private static void finite(ValueSink sink, String name, Double ms) {
    if (ms != null && Double.isFinite(ms)) {
      sink.record(name, ms);
    }
  }

  /**
   * Share of joined successful records that waited for the engine's span and got it (0–1); NaN when
   * none waited (the proxy's {@code telemetry.engine_spans} is off, or every pool is external).
   */
  public synchronized double engineCoverage() {
    return engineExpected == 0 ? Double.NaN : (double) engineMatched / engineExpected;
  }

  /** Joined successful records that waited for the engine's span, and those that got it. */
  public synchronized long[] engineCounts() {
    return new long[] {engineExpected, engineMatched};
  }

  /** Adds one inter-token gap, in nanoseconds. */
  public synchronized void addItl(long nanos) {
    Double ms = itlMs(nanos);
    if (ms != null) {
      record("itl", ms);
    }
  }

  /** Adds everything {@code other} holds to this instance (e.g. a window into the cumulative). */
  public void merge(PhaseStats other) {
    PhaseStats snapshot = other.copy();
    synchronized (this) {
      snapshot.histograms.forEach((name, h) -> histogram(name).add(h));
      for (String name : List.copyOf(exact.keySet())) {
        SignedHistogram h = snapshot.histograms.get(name);
        LimitCounts theirs = snapshot.exact.get(name);
        if (theirs != null && theirs.sameLimits(exact.get(name))) {
          exact.get(name).add(theirs);
        } else if (h != null && h.count() > 0) {
          exact.remove(name);
        }
      }
      started += snapshot.started;
      ok += snapshot.ok;
      joined += snapshot.joined;
      joinedOk += snapshot.joinedOk;
      engineExpected += snapshot.engineExpected;
      engineMatched += snapshot.engineMatched;
    }
  }

  /** An independent copy. */
  public synchronized PhaseStats copy() {
    PhaseStats c = new PhaseStats();
    histograms.forEach((name, h) -> c.histograms.put(name, h.copy()));
    exact.forEach((name, counts) -> c.exact.put(name, counts.copy()));
    c.started = started;
    c.ok = ok;
    c.joined = joined;
    c.joinedOk = joinedOk;
    c.engineExpected = engineExpected;
    c.engineMatched = engineMatched;
    return c;
  }

  /** The phase names this class knows, in report order. */
  public Set<String> names() {
    return NAME_SET;
  }

  /** count, p50, p95, p99 and max of one phase, in milliseconds. */
  public synchronized Summary summary(String name) {
    SignedHistogram h = existing(name);
    if (h == null || h.count() == 0) {
      return Summary.EMPTY;
    }
    return new Summary(
        h.count(), h.quantileMs(0.50), h.quantileMs(0.95), h.quantileMs(0.99), h.maxMs());
  }

  /**
   * The {@code q} quantile (0–1) of one phase's per-request values in milliseconds; {@code q = 0}
   * is the minimum and {@code q = 1} the maximum, both exact. NaN when nothing was recorded.
   */
  public synchronized double quantileMs(String name, double q) {
    SignedHistogram h = existing(name);
    return h == null ? Double.NaN : h.quantileMs(q);
  }

  /** Values recorded for one phase. */
  public synchronized long count(String name) {
    SignedHistogram h = existing(name);
    return h == null ? 0 : h.count();
  }

  /**
   * {@code {atOrBelow, total}}: of one phase's values, how many were at or below {@code
   * limitNanos}, and how many there were, both exact; null when this instance does not count that
   * phase and limit exactly (judge by the quantile then, and say so).
   */
  public synchronized long[] limitCounts(String name, long limitNanos) {
    existing(name);
    LimitCounts c = exact.get(name);
    return c == null ? null : c.counts(limitNanos);
  }

  /** Values below zero recorded for one phase (for an envelope: boundary, unit or join errors). */
  public synchronized long negativeCount(String name) {
    SignedHistogram h = existing(name);
    return h == null ? 0 : h.negativeCount();
  }

  /** Requests added, successful or not. */
  public synchronized long startedCount() {
    return started;
  }

  /** Successful requests added. */
  public synchronized long okCount() {
    return ok;
  }

  /** Requests added that joined a proxy record, successful or not. */
  public synchronized long joinedCount() {
    return joined;
  }

  /** Successful requests that joined a proxy record. */
  public synchronized long joinedOkCount() {
    return joinedOk;
  }

  /**
   * Share of successful requests that joined a proxy record (0–1): the population the envelopes and
   * server phases describe; NaN when no request succeeded.
   */
  public synchronized double joinCoverage() {
    return ok == 0 ? Double.NaN : (double) joinedOk / ok;
  }

  /**
   * One side of a phase in microseconds, for {@code HistogramLogWriter}; see {@link
   * SignedHistogram}.
   */
  synchronized Histogram microsHistogram(String name, boolean negatives) {
    SignedHistogram h = existing(name);
    return h == null
        ? new Histogram(SignedHistogram.SIGNIFICANT_DIGITS)
        : h.microsHistogram(negatives);
  }

  /**
   * Adds one interval histogram read back from a phases.hlog (microseconds; tag {@code NAME} or
   * {@code NAME_negative}, see {@link PhaseLog}). Unknown tags are refused.
   */
  synchronized void addLogged(String tag, Histogram micros) {
    boolean negatives = tag.endsWith(PhaseLog.NEGATIVE_SUFFIX);
    String name =
        negatives ? tag.substring(0, tag.length() - PhaseLog.NEGATIVE_SUFFIX.length()) : tag;
    existing(name);
    // Values at microsecond resolution, uncounted: this phase's exact counts no longer cover it.
    exact.remove(name);
    histogram(name).addMicros(micros, negatives);
  }

  /** Sets the request counters that summary.json's {@code join} object carries. */
  synchronized void addCounts(long started, long ok, long joined, long joinedOk) {
    this.started += started;
    this.ok += ok;
    this.joined += joined;
    this.joinedOk += joinedOk;
  }

  private SignedHistogram existing(String name) {
    if (!NAME_SET.contains(name)) {
      throw new IllegalArgumentException("unknown phase: " + name + " (known: " + NAMES + ")");
    }
    return histograms.get(name);
  }

  private SignedHistogram histogram(String name) {
    return histograms.computeIfAbsent(name, n -> new SignedHistogram());
  }
}
