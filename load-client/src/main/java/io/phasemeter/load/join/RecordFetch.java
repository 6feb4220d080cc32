package io.phasemeter.load.join;

import io.phasemeter.load.http.Transport;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.PoolOptions;
import io.vertx.ext.web.client.HttpRequest;
import io.vertx.ext.web.client.HttpResponse;
import io.vertx.ext.web.client.WebClient;
import io.vertx.ext.web.client.WebClientOptions;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * The end of a run's join: every request still unjoined is looked up by its trace id ({@code GET
 * /admin/records/{traceId}}) on every replica, so that a record a feed missed (cut, reconnecting, a
 * replica found late) still joins, attributed to the replica that had it. At most {@value
 * #PER_REPLICA} lookups in flight per replica, the whole within a bounded wait; a replica that
 * refuses the connection, or does not accept it within {@value #CONNECT_TIMEOUT_MS} ms, is asked no
 * more (a killed replica costs one refused connection, not a wait per request). Untimed calls, made
 * with Vert.x Web Client.
 */
public final class RecordFetch {
  /** Lookups in flight per replica at most. */
  public static final int PER_REPLICA = 16;

  static final int CONNECT_TIMEOUT_MS = 2_000;

  /** One lookup's limit: a record is a small JSON answer from a loopback or in-cluster address. */
  static final long REQUEST_TIMEOUT_MS = 5_000;

  /** A record is well under a kilobyte; a larger answer is not one. */
  static final int MAX_RECORD_BYTES = 1 << 20;

  /**
   * What the fetch did.
   *
   * @param unjoined requests unjoined when it began
   * @param asked lookups sent, over every replica
   * @param found requests joined by a fetched record
   * @param unreachable replicas that could not be reached (asked no more)
   * @param errors lookups answered neither 200 nor 404, or failed after the connection
   * @param timedOut whether the wait ran out before every lookup was done
   */
  public record Result(
      long unjoined, long asked, long found, int unreachable, long errors, boolean timedOut) {}

  private final Vertx vertx;
  private final String token;
  private final Joiner joiner;
  private final Function<String, ServerRecord> parse;
  private final Consumer<String> progress;
  private final LongSupplier nanoTime;
  private final Transport transport;
  private final AtomicLong asked = new AtomicLong();
  private final AtomicLong found = new AtomicLong();
  private final AtomicLong errors = new AtomicLong();
  private volatile boolean stopped;

  /**
   * @param parse a record's JSON to the record, null when it is not one (a feed's parser)
   * @param progress where a progress line goes (stderr)
   * @param transport the run's trust over https ({@code --ca-file}, {@code --insecure})
   */
  public RecordFetch(
      Vertx vertx,
      String token,
      Joiner joiner,
      Function<String, ServerRecord> parse,
      Consumer<String> progress,
      LongSupplier nanoTime,
      Transport transport) {
    this.transport = transport;
    this.vertx = vertx;
    this.token = token;
    this.joiner = joiner;
    this.parse = parse;
    this.progress = progress;
    this.nanoTime = nanoTime;
  }

  /**
   * Looks every unjoined request up on {@code replicas}, waiting at most {@code timeout}; blocks
   * the calling thread (never an event loop).
   */
  public Result fetch(List<Replica> replicas, Duration timeout) throws InterruptedException {
    List<String> ids = joiner.waitingIds();
    if (ids.isEmpty() || replicas.isEmpty() || timeout.isZero() || timeout.isNegative()) {
      return new Result(ids.size(), 0, 0, 0, 0, false);
    }
    progress.accept(
        String.format(
            Locale.ROOT,
            "fetching %d unjoined records by trace id from %d replica%s (at most %.0f s)",
            ids.size(),
            replicas.size(),
            replicas.size() == 1 ? "" : "s",
            timeout.toMillis() / 1e3));
    WebClientOptions options =
        new WebClientOptions().setConnectTimeout(CONNECT_TIMEOUT_MS).setKeepAlive(true);
    transport.applyTrust(options);
    WebClient client =
        WebClient.create(vertx, options, new PoolOptions().setHttp1MaxSize(PER_REPLICA));
    long started = nanoTime.getAsLong();
    long ticker =
        vertx.setPeriodic(
            1_000,
            t ->
                progress.accept(
                    String.format(
                        Locale.ROOT,
                        "fetching: %d looked up, %d found, %d still unjoined, %.0f s",
                        asked.get(),
                        found.get(),
                        joiner.waiting(),
                        (nanoTime.getAsLong() - started) / 1e9)));
    List<Future<Void>> lanes = new ArrayList<>();
    for (Replica r : replicas) {
      AtomicInteger next = new AtomicInteger();
      for (int i = 0; i < Math.min(PER_REPLICA, ids.size()); i++) {
        Promise<Void> lane = Promise.promise();
        lanes.add(lane.future());
        vertx.runOnContext(v -> nextLookup(client, r, ids, next, lane));
      }
    }
    boolean timedOut = false;
    try {
      Future.join(new ArrayList<Future<?>>(lanes))
          .otherwiseEmpty()
          .await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      timedOut = true;
    } finally {
      stopped = true;
      vertx.cancelTimer(ticker);
      client.close();
    }
    int unreachable = (int) replicas.stream().filter(Replica::isUnreachable).count();
    Result result =
        new Result(ids.size(), asked.get(), found.get(), unreachable, errors.get(), timedOut);
    progress.accept(
        String.format(
            Locale.ROOT,
            "fetched %d of %d unjoined records (%d looked up%s%s%s)",
            result.found(),
            result.unjoined(),
            result.asked(),
            unreachable > 0 ? ", " + unreachable + " replica(s) unreachable" : "",
            result.errors() > 0 ? ", " + result.errors() + " lookups failed" : "",
            timedOut ? ", the wait of " + timeout.toMillis() / 1000.0 + " s ran out" : ""));
    return result;
  }

  /**
   * The lane's next id still unjoined, asked of {@code r}; completes the lane when none is left.
   */
  private void nextLookup(
      WebClient client, Replica r, List<String> ids, AtomicInteger next, Promise<Void> lane) {
    String id;
    do {
      int i = next.getAndIncrement();
      if (stopped || r.isUnreachable() || i >= ids.size()) {
        lane.tryComplete();
        return;
      }
      id = ids.get(i);
    } while (!joiner.isWaiting(id));
    String traceId = id;
    asked.incrementAndGet();
    request(client, r.admin(), traceId)
        .send()
        .onComplete(
            ar -> {
              if (ar.failed()) {
                if (unreachable(ar.cause())) {
                  r.unreachable();
                } else {
                  errors.incrementAndGet();
                }
              } else {
                answered(r, ar.result());
              }
              nextLookup(client, r, ids, next, lane);
            });
  }

  private void answered(Replica r, HttpResponse<Buffer> resp) {
    if (resp.statusCode() == 404) {
      return;
    }
    Buffer body = resp.body();
    if (resp.statusCode() != 200 || body == null || body.length() > MAX_RECORD_BYTES) {
      errors.incrementAndGet();
      return;
    }
    ServerRecord s = parse.apply(body.toString());
    if (s == null) {
      errors.incrementAndGet();
    } else if (joiner.fetched(s, r)) {
      found.incrementAndGet();
    }
  }

  private HttpRequest<Buffer> request(WebClient client, URI admin, String traceId) {
    boolean https = "https".equalsIgnoreCase(admin.getScheme());
    String path = admin.getRawPath() == null ? "" : admin.getRawPath().replaceAll("/+$", "");
    String host = admin.getHost();
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    HttpRequest<Buffer> req =
        client
            .get(
                admin.getPort() > 0 ? admin.getPort() : https ? 443 : 80,
                host,
                path + "/admin/records/" + traceId)
            .ssl(https)
            .timeout(REQUEST_TIMEOUT_MS);
    if (token != null && !token.isBlank()) {
      req.putHeader("authorization", "Bearer " + token);
    }
    return req;
  }

  /** A failure to reach the replica at all (refused, not accepted in time, no route). */
  private static boolean unreachable(Throwable t) {
    return t instanceof java.net.ConnectException
        || t instanceof java.net.NoRouteToHostException
        || t instanceof java.net.UnknownHostException
        || (t.getCause() != null && t.getCause() instanceof java.net.ConnectException);
  }
}
