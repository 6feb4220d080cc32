package io.phasemeter.load.schedule;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

/**
 * The requests of the measured run, or of the warm-up at load: where their numbers and trace ids
 * come from, and where their results go. Warm-up requests are numbered below zero (beneath the
 * one-by-one warm-up's), and their results and inter-token gaps go into statistics that nobody
 * reads: the same code runs as for a measured request, and nothing is counted.
 */
public final class Series {
  /** A request built before its start: its number, body and trace context. */
  record Prepared(long seq, RequestSpec spec, String traceId, String traceparent) {}

  private final TraceIds ids;
  private final AtomicLong issued;
  private final Workload workload;
  private final long warmupRequests;
  private final boolean counted;
  private final LongConsumer itl;
  private final Consumer<ClientResult> done;

  private Series(
      TraceIds ids,
      AtomicLong issued,
      Workload workload,
      long warmupRequests,
      boolean counted,
      LongConsumer itl,
      Consumer<ClientResult> done) {
    this.ids = ids;
    this.issued = issued;
    this.workload = workload;
    this.warmupRequests = warmupRequests;
    this.counted = counted;
    this.itl = itl;
    this.done = done;
  }

  /**
   * The measured run's requests, numbered 1, 2, … by {@code seq}.
   *
   * @param itl told every inter-token gap, in nanoseconds
   * @param done told every finished request
   */
  public static Series measured(
      TraceIds ids,
      AtomicLong seq,
      Workload workload,
      LongConsumer itl,
      Consumer<ClientResult> done) {
    return new Series(ids, seq, workload, 0, true, itl, done);
  }

  /**
   * The warm-up at load's requests, numbered below the {@code warmupRequests} of the one-by-one
   * warm-up, with a counter of their own.
   */
  public static Series warmUp(
      TraceIds ids,
      int warmupRequests,
      Workload workload,
      LongConsumer itl,
      Consumer<ClientResult> done) {
    return new Series(ids, new AtomicLong(), workload, warmupRequests, false, itl, done);
  }

  /** Whether its requests count (the measured run) or not (the warm-up). */
  public boolean counted() {
    return counted;
  }

  /** Builds the next request; it counts as issued once {@link #issue} is called. */
  Prepared build() {
    return build(issued.get() + 1);
  }

  /**
   * Builds request {@code k} (from 1), whatever was issued before: a replayed trace's row {@code k
   * - 1}, so that a request keeps its row's number (and trace id) whatever was dropped or sent
   * before it. It counts as issued once {@link #issue} is called.
   */
  Prepared build(long k) {
    long n = counted ? k : -(warmupRequests + k);
    return new Prepared(n, workload.request(n), ids.traceId(k), ids.traceparent(k));
  }

  void issue() {
    issued.incrementAndGet();
  }

  /** A request built elsewhere (a session's turn), numbered and issued now. */
  Prepared issue(RequestSpec spec) {
    long k = issued.incrementAndGet();
    long n = counted ? k : -(warmupRequests + k);
    return new Prepared(n, spec, ids.traceId(k), ids.traceparent(k));
  }

  LongConsumer itl() {
    return itl;
  }

  void done(ClientResult r) {
    done.accept(r);
  }
}
