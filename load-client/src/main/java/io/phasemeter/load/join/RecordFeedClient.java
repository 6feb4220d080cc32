package io.phasemeter.load.join;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.channel.ConnectTimeoutException;
import io.phasemeter.load.http.SseParser;
import io.phasemeter.load.http.Transport;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.net.ConnectException;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Subscribes to the proxy's record feed ({@code GET /admin/records/stream}, Server-Sent Events) and
 * hands each record to a consumer, parsed. This HTTP feed is the load client's whole contract with
 * the proxy (the same one users see): no proxy class is used.
 *
 * <p>When the feed drops after it was up (the proxy cut a subscriber that stalled, its admin
 * listener restarted, the network), the client subscribes again, waiting {@value #FIRST_BACKOFF_MS}
 * ms before the first attempt and twice as long after each failed one, up to {@value
 * #MAX_BACKOFF_MS} ms, until {@link #close()}. It counts the records it missed from the feed's
 * numbering: each event's SSE {@code id} is the record's number in the proxy, and on arrival the
 * proxy says the number of the last record published before ({@code id: N} alone), so a gap is
 * records published while the client was away, or dropped for it by a slow feed. Every reconnect is
 * told to a listener with how long the feed was gone and how many records were missed.
 *
 * <p>The first subscription is tried again too, with the same back-off, when every place on the
 * feed is taken (429) or the admin listener refuses the connection (not up yet), for at most {@code
 * firstWait} ({@value #FIRST_WAIT_SECONDS} s by default): the listener is told once that the client
 * waits, and {@link #start} fails, naming the answer, when the wait is over. Any other answer (401,
 * 404, an unknown host) fails it at once. Everything but the counters runs on the context that
 * {@link #start} made.
 */
public final class RecordFeedClient {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A record is well under a kilobyte; anything near this is not one. */
  private static final int MAX_RECORD_BYTES = 1 << 20;

  /** Objectives of one verdict: the catalogue has fewer. */
  private static final int MAX_OBJECTIVES = 32;

  /** Distinct tenants and verdicts kept once each (the proxy allows at most 64 tenants). */
  private static final int MAX_CANONICAL = 512;

  /** The wait before the first attempt to subscribe again. */
  static final long FIRST_BACKOFF_MS = 250;

  /** The longest wait between attempts. */
  static final long MAX_BACKOFF_MS = 5_000;

  /** How long the first subscription is tried by default: a place may be freed meanwhile. */
  public static final long FIRST_WAIT_SECONDS = 30;

  /**
   * One reconnect.
   *
   * @param afterSeconds how long the feed was gone, from the drop to the new subscription
   * @param missed records published while it was gone (-1: unknown, the feed numbers none)
   * @param restarted whether the numbering started again (a new proxy process): {@code missed} is
   *     then only what the new process published before the client came back
   * @param reason why the feed dropped
   */
  public record Reconnect(double afterSeconds, long missed, boolean restarted, String reason) {
    /** The line the run prints. */
    public String line() {
      String count =
          missed < 0
              ? "records missed unknown (the feed numbers none)"
              : (restarted ? "at least " : "")
                  + missed
                  + (missed == 1 ? " record missed" : " records missed")
                  + (restarted ? " (the proxy restarted)" : "");
      return String.format(
          Locale.ROOT,
          "record feed: reconnected after %.1f s, %s; it had dropped: %s",
          afterSeconds,
          count,
          reason);
    }
  }

  /**
   * What the subscription went through.
   *
   * @param reconnects times the feed was subscribed again after it dropped
   * @param recordsMissed records the feed published that never reached the client: while it was
   *     away, and any the proxy dropped for it
   */
  public record Counts(long reconnects, long recordsMissed) {}

  private final Vertx vertx;
  private final URI admin;
  private final String token;
  private final Consumer<Reconnect> onReconnect;
  private final Consumer<String> onWaiting;
  private final Duration firstWait;
  private final LongSupplier nanoTime;
  private final Transport transport;
  private final AtomicLong malformed = new AtomicLong();
  private final Map<Object, Object> canonical = new ConcurrentHashMap<>();
  private final AtomicLong reconnects = new AtomicLong();
  private final AtomicLong missed = new AtomicLong();
  private HttpClient client;
  private Context context;
  private Consumer<ServerRecord> sink;
  private volatile boolean connected;
  private volatile boolean closed;
  private volatile String lastError;
  // The first subscription's promise while it waits, for close().
  private volatile Promise<Void> pendingStart;

  // On the context only.
  private long lastId = -1;
  private long connectionBase = -1;
  private boolean reconnectUntold;
  private long droppedAt;
  private String dropReason;
  private long backoffMs = FIRST_BACKOFF_MS;
  private long firstAttemptAt;
  private boolean waitingTold;

  public RecordFeedClient(Vertx vertx, URI admin, String token) {
    this(vertx, admin, token, r -> {});
  }

  /**
   * @param onReconnect told about each reconnect, on the client's context
   */
  public RecordFeedClient(Vertx vertx, URI admin, String token, Consumer<Reconnect> onReconnect) {
    this(
        vertx,
        admin,
        token,
        onReconnect,
        line -> {},
        Duration.ofSeconds(FIRST_WAIT_SECONDS),
        System::nanoTime);
  }

  /**
   * @param onReconnect told about each reconnect, on the client's context
   * @param onWaiting told once, as a line, that the first subscription waits (429, refused)
   * @param firstWait how long the first subscription is tried before {@link #start} fails
   * @param nanoTime the monotonic clock the waits are measured on
   */
  public RecordFeedClient(
      Vertx vertx,
      URI admin,
      String token,
      Consumer<Reconnect> onReconnect,
      Consumer<String> onWaiting,
      Duration firstWait,
      LongSupplier nanoTime) {
    this(vertx, admin, token, onReconnect, onWaiting, firstWait, nanoTime, Transport.DEFAULT);
  }

  /**
   * As above, reaching an https admin listener with the run's trust ({@code --ca-file}, {@code
   * --insecure}).
   */
  public RecordFeedClient(
      Vertx vertx,
      URI admin,
      String token,
      Consumer<Reconnect> onReconnect,
      Consumer<String> onWaiting,
      Duration firstWait,
      LongSupplier nanoTime,
      Transport transport) {
    if (firstWait.isNegative()) {
      throw new IllegalArgumentException("the first wait must not be negative");
    }
    this.vertx = vertx;
    this.admin = admin;
    this.token = token;
    this.onReconnect = onReconnect;
    this.onWaiting = onWaiting;
    this.firstWait = firstWait;
    this.nanoTime = nanoTime;
    this.transport = transport;
  }

  /**
   * Connects; completes once the feed answered 200 (records then flow to {@code sink}), fails when
   * the first attempt does, or, when it found every place taken (429) or the connection refused,
   * when the first wait is over. Later drops are reconnected.
   */
  public Future<Void> start(Consumer<ServerRecord> sink) {
    this.sink = sink;
    Promise<Void> ready = Promise.promise();
    context = vertx.getOrCreateContext();
    client = vertx.createHttpClient(transport.applyTrust(new HttpClientOptions()));
    context.runOnContext(
        v -> {
          firstAttemptAt = nanoTime.getAsLong();
          pendingStart = ready;
          connect(ready);
        });
    return ready.future();
  }

  /** One attempt; {@code ready} is the first one's promise, null for a reconnect. */
  private void connect(Promise<Void> ready) {
    if (closed) {
      if (ready != null) {
        ready.tryFail("the record feed client was closed before the feed answered");
      }
      return;
    }
    RequestOptions o =
        new RequestOptions()
            .setMethod(HttpMethod.GET)
            .setHost(admin.getHost())
            .setSsl("https".equalsIgnoreCase(admin.getScheme()))
            .setPort(
                admin.getPort() > 0
                    ? admin.getPort()
                    : "https".equalsIgnoreCase(admin.getScheme()) ? 443 : 80)
            .setURI(basePath() + "/admin/records/stream")
            .putHeader("accept", "text/event-stream");
    if (token != null && !token.isBlank()) {
      o.putHeader("authorization", "Bearer " + token);
    }
    client
        .request(o)
        .compose(r -> r.send())
        .onSuccess(resp -> onResponse(resp, ready))
        .onFailure(
            t -> {
              lastError = t.toString();
              if (ready == null) {
                retry(null);
                return;
              }
              // Netty's connect timeout is a ConnectException too: only a refusal waits.
              boolean refused =
                  t instanceof ConnectException && !(t instanceof ConnectTimeoutException);
              String reach = "cannot reach the proxy's record feed at " + admin;
              if (!refused) {
                ready.tryFail(reach + " (" + t.getMessage() + ")");
              } else if (!waitAgain(
                  ready, "the proxy's admin listener at " + admin + " refused the connection")) {
                ready.tryFail(reach + " (connection refused" + forTheWait() + ")");
              }
            });
  }

  private void onResponse(HttpClientResponse resp, Promise<Void> ready) {
    if (resp.statusCode() != 200) {
      String answer =
          "the proxy's record feed at "
              + admin
              + " answered "
              + resp.statusCode()
              + (resp.statusCode() == 401 ? " (set --admin-token)" : "");
      lastError = answer;
      if (ready != null && resp.statusCode() != 429) {
        ready.tryFail(answer);
        return;
      }
      // 429 (every place taken) or the admin listener not ready yet: try again later.
      resp.body()
          .onComplete(
              ar -> {
                if (ready == null) {
                  retry(null);
                } else if (!waitAgain(
                    ready, "every place on the proxy's record feed is taken (it answered 429)")) {
                  ready.tryFail(
                      answer
                          + " (Too Many Requests)"
                          + forTheWait()
                          + ": every place on its feed is held by another subscriber, and one"
                          + " that never reads keeps its place while no records wait for it;"
                          + " end those subscribers, or run without --admin");
                }
              });
      return;
    }
    connected = true;
    pendingStart = null;
    backoffMs = FIRST_BACKOFF_MS;
    connectionBase = -1;
    if (ready == null) {
      reconnects.incrementAndGet();
      reconnectUntold = true;
    }
    SseParser events = new SseParser(MAX_RECORD_BYTES);
    SseParser.EventSink handler =
        new SseParser.EventSink() {
          @Override
          public void event(String type, String data) {
            onRecord(data, events.lastEventId());
          }

          @Override
          public void idOnly(String id) {
            onArrival(number(id));
          }
        };
    boolean[] ended = {false};
    resp.handler(
        b -> {
          try {
            events.feedEvents(b, handler);
          } catch (IllegalStateException tooLong) {
            lastError = "a feed event exceeded " + MAX_RECORD_BYTES + " bytes";
            resp.request().reset();
          }
        });
    resp.endHandler(v -> dropped(ended, "the proxy ended the feed"));
    resp.exceptionHandler(t -> dropped(ended, String.valueOf(t.getMessage())));
    if (ready != null) {
      ready.tryComplete();
    }
  }

  /** The proxy's {@code id: N} on arrival: the number of the last record published before. */
  private void onArrival(long base) {
    if (base < 0) {
      return;
    }
    boolean restarted = lastId >= 0 && base < lastId;
    if (reconnectUntold) {
      reconnectUntold = false;
      long gap = lastId < 0 ? 0 : restarted ? base : base - lastId;
      missed.addAndGet(gap);
      onReconnect.accept(
          new Reconnect((nanoTime.getAsLong() - droppedAt) / 1e9, gap, restarted, dropReason));
    }
    connectionBase = base;
    lastId = restarted ? base : Math.max(lastId, base);
  }

  /** A record numbered {@code idText} (its SSE id, or null). */
  private void onRecord(String data, String idText) {
    long n = number(idText);
    if (reconnectUntold) {
      if (n < 0) {
        reconnectUntold = false;
        onReconnect.accept(
            new Reconnect((nanoTime.getAsLong() - droppedAt) / 1e9, -1, false, dropReason));
      } else {
        // No number on arrival: the first record's tells where the sequence stood.
        onArrival(n - 1);
      }
    }
    if (n >= 0) {
      if (n > lastId) {
        if (lastId >= 0) {
          missed.addAndGet(n - lastId - 1);
        }
        lastId = n;
      } else if (n > connectionBase) {
        // Published after this subscription began but overtaken by a later one (two event
        // loops): it was counted as missed when the later one came.
        missed.updateAndGet(m -> Math.max(0, m - 1));
      }
    }
    ServerRecord r = parse(data);
    if (r != null) {
      sink.accept(r);
    }
  }

  private void dropped(boolean[] ended, String reason) {
    if (ended[0]) {
      return;
    }
    ended[0] = true;
    connected = false;
    if (closed) {
      return;
    }
    droppedAt = nanoTime.getAsLong();
    dropReason = reason;
    lastError = reason;
    retry(null);
  }

  /**
   * The first subscription was refused for now ({@code why}): tries again after the back-off, and
   * says so once, while the first wait lasts. Returns false when it is over.
   */
  private boolean waitAgain(Promise<Void> ready, String why) {
    if (closed || nanoTime.getAsLong() - firstAttemptAt >= firstWait.toNanos()) {
      return false;
    }
    if (!waitingTold) {
      waitingTold = true;
      onWaiting.accept("record feed: " + why + "; trying again for up to " + waitText());
    }
    retry(ready);
    return true;
  }

  private String forTheWait() {
    return firstWait.isZero() ? "" : " for " + waitText();
  }

  private String waitText() {
    return String.format(Locale.ROOT, "%.0f s", firstWait.toNanos() / 1e9);
  }

  /** The next attempt, after the back-off; {@code ready} as for {@link #connect}. */
  private void retry(Promise<Void> ready) {
    if (closed) {
      if (ready != null) {
        ready.tryFail("the record feed client was closed before the feed answered");
      }
      return;
    }
    long delay = backoffMs;
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
    vertx.setTimer(delay, t -> context.runOnContext(v -> connect(ready)));
  }

  private static long number(String id) {
    if (id == null || id.isEmpty() || id.length() > 18) {
      return -1;
    }
    for (int i = 0; i < id.length(); i++) {
      if (id.charAt(i) < '0' || id.charAt(i) > '9') {
        return -1;
      }
    }
    return Long.parseLong(id);
  }

  private String basePath() {
    String p = admin.getRawPath() == null ? "" : admin.getRawPath();
    return p.endsWith("/") ? p.substring(0, p.length() - 1) : p;
  }

  /** Parses one record; null (and counted) when it is not a v1 record. */
  public ServerRecord parse(String json) {
    try {
      JsonNode n = JSON.readTree(json);
      if (n == null || n.path("v").asInt() != 1 || !n.hasNonNull("trace_id")) {
        malformed.incrementAndGet();
        return null;
      }
      Map<String, Double> phases = new HashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = n.path("phases_ms").fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        phases.put(e.getKey(), e.getValue().asDouble());
      }
      return new ServerRecord(
          n.get("trace_id").asText(),
          n.path("model").asText(null),
          n.path("pool").asText(null),
          n.path("stream").asBoolean(),
          n.path("status").asInt(),
          n.path("outcome").asText(null),
          n.path("root_ms").asDouble(),
          n.hasNonNull("server_ttft_ms") ? n.get("server_ttft_ms").asDouble() : null,
          phases,
          n.hasNonNull("unattributed_ms") ? n.get("unattributed_ms").asDouble() : null,
          n.hasNonNull("tpot_ms") ? n.get("tpot_ms").asDouble() : null,
          n.path("tokens").hasNonNull("input") ? n.path("tokens").get("input").asLong() : null,
          n.path("tokens").hasNonNull("output") ? n.path("tokens").get("output").asLong() : null,
          n.path("sampled").asBoolean(true),
          n.hasNonNull("engine_status") ? n.get("engine_status").asText() : null,
          n.path("external").asBoolean(false),
          n.hasNonNull("route") ? n.get("route").asText() : null,
          n.hasNonNull("operation") ? n.get("operation").asText() : null,
          n.path("tenant").isTextual() ? canonical(n.get("tenant").asText()) : null,
          slo(n.path("slo")));
    } catch (Exception e) {
      malformed.incrementAndGet();
      return null;
    }
  }

  /**
   * The record's {@code slo}: null when absent, null or not a verdict ({@code result} neither
   * {@code met} nor {@code missed}). Kept once per distinct value: a run's verdicts repeat a few
   * budgets' objectives, and every record is kept until the report.
   */
  private ServerSlo slo(JsonNode o) {
    if (!o.isObject() || !o.path("result").isTextual()) {
      return null;
    }
    String result = o.get("result").asText();
    if (!result.equals("met") && !result.equals("missed")) {
      return null;
    }
    boolean met = result.equals("met");
    Map<String, Double> limits = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : o.path("objectives_ms").properties()) {
      if (e.getValue().isNumber() && limits.size() < MAX_OBJECTIVES) {
        limits.put(e.getKey(), e.getValue().asDouble());
      }
    }
    List<String> missed = texts(o.path("missed"));
    String objective =
        o.path("objective").isTextual()
            ? o.get("objective").asText()
            : met ? "none" : missed.isEmpty() ? ServerSlo.ERROR : missed.get(0);
    return canonical(
        new ServerSlo(
            met,
            objective,
            o.path("budget").isTextual() ? o.get("budget").asText() : null,
            Collections.unmodifiableMap(limits),
            missed,
            texts(o.path("overridden"))));
  }

  private static List<String> texts(JsonNode array) {
    List<String> out = new ArrayList<>();
    for (JsonNode e : array) {
      if (e.isTextual() && out.size() < MAX_OBJECTIVES) {
        out.add(e.asText());
      }
    }
    return out;
  }

  /**
   * The one kept instance equal to {@code v}, while fewer than {@value #MAX_CANONICAL} are kept.
   */
  @SuppressWarnings("unchecked")
  private <T> T canonical(T v) {
    Object kept = canonical.get(v);
    if (kept != null) {
      return (T) kept;
    }
    if (canonical.size() < MAX_CANONICAL) {
      kept = canonical.putIfAbsent(v, v);
    }
    return kept == null ? v : (T) kept;
  }

  /** Whether the feed is open now (it may be between a drop and a reconnect). */
  public boolean connected() {
    return connected;
  }

  /** Whether the client still follows the feed (until {@link #close()}), connected or not. */
  public boolean following() {
    return !closed;
  }

  /** Reconnects and records missed so far. */
  public Counts counts() {
    return new Counts(reconnects.get(), missed.get());
  }

  /** The last transport error, or null. */
  public String lastError() {
    return lastError;
  }

  /** Feed events that were not v1 records. */
  public long malformed() {
    return malformed.get();
  }

  /** Stops following the feed: no reconnect after this. */
  public Future<Void> close() {
    closed = true;
    connected = false;
    Promise<Void> waiting = pendingStart;
    if (waiting != null) {
      waiting.tryFail("the record feed client was closed before the feed answered");
    }
    return client == null ? Future.succeededFuture() : client.close();
  }
}
