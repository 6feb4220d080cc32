package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A run's failed requests counted by class and reason: the {@value #LIMIT} most frequent pairs
 * named (with the first request that gave each), the rest summed into one "other" bucket, so that a
 * run whose engine words every error differently (a token count, an id in each message) still
 * writes a bounded summary.json and report.
 *
 * @param failed every failed request
 * @param top the most frequent (class, reason) pairs, most frequent first (ties: by class, then by
 *     reason), at most {@value #LIMIT}
 * @param otherCount failed requests whose reason is not among {@code top}
 * @param otherReasons how many distinct (class, reason) pairs those are
 */
record FailureReasons(long failed, List<Reason> top, long otherCount, long otherReasons) {

  /** How many reasons are named; the rest are counted as "other". */
  static final int LIMIT = 10;

  /**
   * One reason and how many failed requests gave it.
   *
   * @param errorClass the class ({@code STREAM_ERROR}, {@code HTTP_5XX}, …)
   * @param reason the reason as pairs.csv's {@code invalid_reason} holds it; empty when none (a run
   *     written before every failure had one)
   * @param count how many failed requests had this class and reason
   * @param firstTraceId the trace id of the first of them (in the order counted)
   */
  record Reason(String errorClass, String reason, long count, String firstTraceId) {}

  /** Counts the failures among a run's requests. */
  static FailureReasons of(List<Pair> pairs) {
    Counter c = new Counter();
    for (Pair p : pairs) {
      ClientResult r = p.client();
      if (!r.ok()) {
        c.add(r.error().name(), r.invalidReason(), r.traceId());
      }
    }
    return c.result();
  }

  /** Counts (class, reason, trace id) rows as they come; then {@link #result()}. */
  static final class Counter {
    private final Map<List<String>, long[]> counts = new HashMap<>();
    private final Map<List<String>, String> first = new HashMap<>();
    private long failed;

    /** One failed request. */
    void add(String errorClass, String reason, String traceId) {
      List<String> key = List.of(errorClass, reason == null ? "" : reason);
      failed++;
      long[] n = counts.get(key);
      if (n == null) {
        counts.put(key, new long[] {1});
        first.put(key, traceId == null ? "" : traceId);
      } else {
        n[0]++;
      }
    }

    FailureReasons result() {
      List<Reason> all = new ArrayList<>(counts.size());
      counts.forEach((k, n) -> all.add(new Reason(k.get(0), k.get(1), n[0], first.get(k))));
      all.sort(
          Comparator.comparingLong(Reason::count)
              .reversed()
              .thenComparing(Reason::errorClass)
              .thenComparing(Reason::reason));
      List<Reason> top = List.copyOf(all.subList(0, Math.min(LIMIT, all.size())));
      long other = 0;
      for (Reason r : all.subList(top.size(), all.size())) {
        other += r.count();
      }
      return new FailureReasons(failed, top, other, all.size() - top.size());
    }
  }

  /** Writes this as summary.json's {@code failures} object into {@code o}. */
  void write(ObjectNode o) {
    o.put("failed", failed);
    o.put("limit", LIMIT);
    var reasons = o.putArray("reasons");
    for (Reason r : top) {
      ObjectNode e = reasons.addObject();
      e.put("class", r.errorClass());
      e.put("reason", r.reason());
      e.put("count", r.count());
      if (!Objects.requireNonNullElse(r.firstTraceId(), "").isEmpty()) {
        e.put("first_trace_id", r.firstTraceId());
      }
    }
    ObjectNode other = o.putObject("other");
    other.put("count", otherCount);
    other.put("reasons", otherReasons);
  }
}
