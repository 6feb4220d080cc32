package io.phasemeter.load.http;

import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Vertx;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;

/**
 * The client's own floor, measured against its in-process endpoint ({@link CalibrationServer}) with
 * the very code that sends the run's requests ({@link RequestRunner}: its connection pool and
 * exchange), the run's own request bodies and headers: what an envelope can never be below, because
 * a server that answers at once, on the same machine, costs the client this much.
 *
 * <ul>
 *   <li>{@code ttftMs}: median of the actual start to the first content event (to the last byte for
 *       an answer that is not streamed), on a kept-alive connection.
 *   <li>{@code connectMs}: median {@code transport_setup} of requests that each open a connection
 *       (a loopback TCP connect and whatever the client does around it).
 *   <li>{@code chunkMs}: median gap between the content events of one stream, written by the
 *       endpoint back to back (NaN when the requests are not streamed).
 * </ul>
 *
 * Bounded: at most {@link #SAMPLES} requests of each kind (and one more to open the kept-alive
 * connection, and {@link #CONNECT_WARM_UP} fresh connections before the connect samples), and it
 * stops at {@link #BUDGET} whatever it has; a figure with no sample is NaN.
 *
 * @param ttftMs time to first token against an endpoint that answers at once (ms)
 * @param connectMs a loopback connect as the client does it (ms)
 * @param chunkMs the gap between two chunks sent back to back (ms)
 * @param requests requests it sent
 * @param tookMs how long it took (ms)
 */
public record ClientFloor(
    double ttftMs, double connectMs, double chunkMs, int requests, double tookMs) {

  /** Requests of each kind (kept-alive, fresh connection), at most. */
  public static final int SAMPLES = 40;

  /**
   * Requests sent one by one to the endpoint before the floor when the run's warm-up went to the
   * target (or there was none): the floor is the warm client's.
   */
  public static final int WARM_UP = 1000;

  /** Fresh connections opened before the connect samples, to warm the connect path. */
  public static final int CONNECT_WARM_UP = 100;

  /** The longest the measurement takes. */
  public static final Duration BUDGET = Duration.ofMillis(900);

  /**
   * Measures the floor.
   *
   * @param vertx the client's Vert.x (the endpoint runs on it too, on a server of its own)
   * @param endpoint the in-process endpoint
   * @param request the run's request number {@code seq}, with the lengths header for the endpoint
   */
  public static ClientFloor measure(
      Vertx vertx, CalibrationServer endpoint, LongFunction<RequestSpec> request) throws Exception {
    long t0 = System.nanoTime();
    long deadline = t0 + BUDGET.toNanos();
    URI url = URI.create("http://127.0.0.1:" + endpoint.port());
    Duration timeout = Duration.ofMillis(Math.max(1, BUDGET.toMillis()));
    List<Long> gaps = new ArrayList<>();
    long[] ttft = new long[SAMPLES];
    long[] connect = new long[SAMPLES];
    int nTtft = 0;
    int nConnect = 0;
    int sent = 0;
    RequestRunner kept = new RequestRunner(vertx, url, 1, timeout, gap -> {}, true);
    RequestRunner fresh = new RequestRunner(vertx, url, 1, timeout, gap -> {}, false);
    try {
      // The first request opens the kept-alive connection: not a TTFT sample. A third of the
      // budget at most, so that the connects always get their share.
      long keptDeadline = t0 + BUDGET.toNanos() / 3;
      for (int i = -1; i < SAMPLES && System.nanoTime() < keptDeadline; i++) {
        List<Long> its = new ArrayList<>();
        ClientResult r = once(kept, request.apply(-(sent + 1)), its::add, deadline);
        sent++;
        if (i >= 0 && r != null && r.ok() && r.ttftNanos() >= 0) {
          ttft[nTtft++] = r.ttftNanos() - r.scheduleLagNanos();
          gaps.addAll(its);
        }
      }
      // Fresh connections until CONNECT_WARM_UP + SAMPLES or the deadline; the last SAMPLES of
      // them are the samples (the first ones warm the connect path, which a run that reuses its
      // connections has hardly run), or all of them when there were fewer.
      long[] ring = new long[SAMPLES];
      int connects = 0;
      for (int i = 0; i < CONNECT_WARM_UP + SAMPLES && System.nanoTime() < deadline; i++) {
        ClientResult r = once(fresh, request.apply(-(sent + 1)), gap -> {}, deadline);
        sent++;
        if (r != null && r.ok() && r.transportSetupNanos() >= 0) {
          ring[connects++ % SAMPLES] = r.transportSetupNanos();
        }
      }
      nConnect = Math.min(connects, SAMPLES);
      System.arraycopy(ring, 0, connect, 0, nConnect);
    } finally {
      kept.close();
      fresh.close();
    }
    long[] g = gaps.stream().mapToLong(Long::longValue).toArray();
    return new ClientFloor(
        medianMs(ttft, nTtft),
        medianMs(connect, nConnect),
        medianMs(g, g.length),
        sent,
        (System.nanoTime() - t0) / 1e6);
  }

  /** One request, waited for until the deadline; null when it did not end by then. */
  private static ClientResult once(
      RequestRunner runner, RequestSpec spec, java.util.function.LongConsumer itl, long deadline)
      throws Exception {
    java.util.concurrent.CompletableFuture<ClientResult> done =
        new java.util.concurrent.CompletableFuture<>();
    runner.run(0, spec, null, null, 0, System.nanoTime(), itl, done::complete);
    long left = Math.max(1, deadline - System.nanoTime());
    try {
      return done.get(left, TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      return null;
    }
  }

  /** Records the floor in a run's conditions ({@code client_floor_*}). */
  public void record(Map<String, Object> conditions) {
    conditions.put("client_floor_ttft_ms", round(ttftMs));
    conditions.put("client_floor_connect_ms", round(connectMs));
    conditions.put("client_floor_chunk_ms", round(chunkMs));
    conditions.put("client_floor_requests", requests);
    conditions.put("client_floor_took_ms", round(tookMs));
  }

  /**
   * The floor in words, from a run's conditions ({@code client floor: TTFT 0.12 ms, connect 0.05
   * ms, per chunk 0.01 ms (...)}), or null when it was not measured.
   */
  public static String line(Map<String, Object> conditions) {
    if (!(conditions.get("client_floor_requests") instanceof Number n)) {
      return null;
    }
    return "client floor: TTFT "
        + ms(conditions.get("client_floor_ttft_ms"))
        + ", connect "
        + ms(conditions.get("client_floor_connect_ms"))
        + ", per chunk "
        + ms(conditions.get("client_floor_chunk_ms"))
        + " (medians, "
        + n
        + " requests to its own endpoint on loopback; an envelope near these is the client's own"
        + " cost)";
  }

  private static String ms(Object v) {
    return v instanceof Number d && !Double.isNaN(d.doubleValue())
        ? String.format(java.util.Locale.ROOT, "%.3f ms", d.doubleValue())
        : "n/a";
  }

  /** Microsecond precision, as the other figures in the conditions; NaN stays NaN. */
  private static double round(double ms) {
    return Double.isNaN(ms) ? ms : Math.round(ms * 1000) / 1000.0;
  }

  private static double medianMs(long[] v, int n) {
    if (n == 0) {
      return Double.NaN;
    }
    long[] s = Arrays.copyOf(v, n);
    Arrays.sort(s);
    return s[(n - 1) / 2] / 1e6;
  }
}
