package io.phasemeter.load.http;

import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpConnectOptions;
import java.net.URI;
import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.function.LongConsumer;

/**
 * Sends requests to an OpenAI-compatible server and measures each one on the client's monotonic
 * clock ({@link System#nanoTime()}), from its <em>intended</em> start.
 *
 * <p>What each {@link ClientResult} holds:
 *
 * <ul>
 *   <li>{@code transportSetupNanos}: from asking the connection pool for a request until the
 *       request is on a connection: wait + dns + connect + tls. Near 0 on a reused keep-alive
 *       connection. The request that is the first on a newly opened connection also carries the
 *       part of the connection's set-up it waited through, split: {@code dnsNanos} (resolving the
 *       name; none for an IP literal), {@code connectNanos} (from the pool asking for the connect
 *       to TCP up; plain http: to the connection ready) and {@code tlsNanos} (TCP up to the
 *       connection ready: the handshake, and over h2 the server's SETTINGS; https only); the rest
 *       of its {@code transport_setup} is its wait. A request handed a connection begun for another
 *       one before it asked (the other took one that came first) carries the parts after it asked.
 *   <li>{@code ttfbNanos}: intended start to the response headers.
 *   <li>{@code ttftNanos}: intended start to the first SSE event carrying generated content ({@code
 *       choices[].text}, {@code choices[].delta.content}, reasoning or tool calls; on {@code
 *       /v1/responses} a {@code *.delta} event with a non-empty {@code delta}), not the role-only
 *       chunk nor {@code response.created}. For a response that is not streamed this equals {@code
 *       totalNanos}: the first token is seen with the last byte. -1 for embeddings, which generate
 *       no token.
 *   <li>{@code tpotNanos}: {@code (t_last_token − t_first_token) / (n − 1)} with {@code n} the
 *       reported {@code usage.completion_tokens} when known, else the content events (vLLM's
 *       definition); -1 when {@code n ≤ 1} or the response is not streamed.
 *   <li>{@code totalNanos}: intended start to the last byte.
 * </ul>
 *
 * <p>Each gap between consecutive content events goes to the ITL sink, only once the request has
 * succeeded, so that failed streams stay out of the latency figures as DESIGN §2 asks; {@code
 * itlCount} is the number of gaps handed to the sink.
 *
 * <p>Classes: status ≥ 400 is {@code HTTP_4XX}/{@code HTTP_5XX}; no connection is {@code CONNECT};
 * the timeout (from the actual start) is {@code TIMEOUT}, and the request is reset; a connection
 * closed mid-response is {@code RESET} (but a request that failed on a reused connection before any
 * response byte is sent once more on a fresh connection first: {@link #staleConnectionRetries()});
 * an error event, an unparseable event or a stream that ends without {@code [DONE]} is {@code
 * STREAM_ERROR} (on {@code /v1/responses}: {@code response.failed}, an {@code error} event, or no
 * {@code response.completed} or {@code response.incomplete}, with the reason; see {@link
 * StreamReader}); a complete response whose usage differs from what was asked (when {@link
 * RequestSpec#exactLengths()}), a whole response that is an error (a Responses API object whose
 * {@code status} is not {@code completed} or {@code incomplete}), or an embeddings answer without
 * an embedding, is {@code INVALID}, with a reason.
 *
 * <p>The response text is parsed on the fly and dropped; no prompt or completion is kept, but for
 * the answer of a session's chat turn, which its next turn sends back ({@link AnswerText}).
 *
 * <p>Every request is issued from this runner's Vert.x context, whatever thread calls {@link #run}:
 * a request issued from a foreign thread can lose the start of its response body.
 */
public final class RequestRunner {
  /**
   * How far ahead of its intended start a paced request may be handed to the event loop (0.4 ms):
   * an event loop that sat idle for a quarter of a second takes 0.23-0.30 ms at the median to pick
   * up a task on a 2-core VM (measured), which would be schedule lag in every request of a low-rate
   * run. The exchange never leaves early: it checks again from a timer due at once, so that the
   * event loop polls for I/O between two checks and is never blocked, until its intended start
   * ({@code Exchange#leave}). The pacer's lead ({@code Pacer}) and the exchange's tolerance are
   * this one value.
   */
  public static final long HAND_OUT_LEAD_NANOS = 400_000;

  final Vertx vertx;
  final Context context;
  final HttpClientAgent client;
  final ConnectionPool pool;
  final String host;
  final int port;
  final boolean ssl;
  final String basePath;
  final long timeoutMs;
  final LongConsumer itlSink;
  // Written on the runner's context only; read by the reporter from another thread.
  volatile long staleRetries;
  // The run's distinct failure reasons, one String each; the runner's context only.
  final Reasons reasons = new Reasons();

  /**
   * @param vertx the Vert.x instance whose event loop runs the requests
   * @param baseUrl the server, e.g. {@code http://127.0.0.1:8080}; a path prefix is kept, a
   *     trailing {@code /v1} is not doubled
   * @param maxConnections keep-alive connections in the pool, at most
   * @param timeout the longest a request may take from its actual start
   * @param itlSink receives each inter-token gap, in nanoseconds, of successful streams
   */
  public RequestRunner(
      Vertx vertx, URI baseUrl, int maxConnections, Duration timeout, LongConsumer itlSink) {
    this(vertx, baseUrl, maxConnections, timeout, itlSink, true);
  }

  /**
   * Like {@link #RequestRunner(Vertx, URI, int, Duration, LongConsumer)}; with {@code
   * connectionReuse} false every request opens a connection of its own and closes it after (k6's
   * {@code noConnectionReuse}), and its cost shows in {@code transport_setup}.
   */
  public RequestRunner(
      Vertx vertx,
      URI baseUrl,
      int maxConnections,
      Duration timeout,
      LongConsumer itlSink,
      boolean connectionReuse) {
    this(vertx, baseUrl, maxConnections, timeout, itlSink, connectionReuse, Transport.DEFAULT);
  }

  /**
   * Like {@link #RequestRunner(Vertx, URI, int, Duration, LongConsumer, boolean)}, speaking as
   * {@code transport} says: its trust over https ({@code --ca-file}, {@code --insecure}) and its
   * version ({@code --http2}).
   */
  public RequestRunner(
      Vertx vertx,
      URI baseUrl,
      int maxConnections,
      Duration timeout,
      LongConsumer itlSink,
      boolean connectionReuse,
      Transport transport) {
    Objects.requireNonNull(transport, "transport");
    this.vertx = Objects.requireNonNull(vertx, "vertx");
    Objects.requireNonNull(baseUrl, "baseUrl");
    String scheme = baseUrl.getScheme() == null ? "" : baseUrl.getScheme().toLowerCase(Locale.ROOT);
    if (!scheme.equals("http") && !scheme.equals("https")) {
      throw new IllegalArgumentException("--url must be http:// or https://, got " + baseUrl);
    }
    if (baseUrl.getHost() == null) {
      throw new IllegalArgumentException("--url must name a host, got " + baseUrl);
    }
    if (maxConnections < 1) {
      throw new IllegalArgumentException(
          "max connections must be at least 1, got " + maxConnections);
    }
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    this.itlSink = Objects.requireNonNull(itlSink, "itlSink");
    this.ssl = scheme.equals("https");
    this.host = baseUrl.getHost();
    this.port = baseUrl.getPort() >= 0 ? baseUrl.getPort() : ssl ? 443 : 80;
    String path = baseUrl.getRawPath() == null ? "" : baseUrl.getRawPath();
    while (path.endsWith("/")) {
      path = path.substring(0, path.length() - 1);
    }
    this.basePath = path;
    this.timeoutMs = Math.max(1, timeout.toMillis());
    this.context = vertx.getOrCreateContext();
    HttpClientOptions options =
        new HttpClientOptions()
            .setKeepAlive(true)
            .setPipelining(false)
            .setSsl(ssl)
            .setConnectTimeout((int) Math.min(Integer.MAX_VALUE, timeoutMs))
            .setDecompressionSupported(false);
    transport.apply(options, true);
    TlsTiming timing = new TlsTiming();
    if (ssl) {
      options.setSslEngineOptions(timing.engineOptions());
    }
    this.client = vertx.createHttpClient(options);
    HttpConnectOptions connect =
        new HttpConnectOptions()
            .setHost(host)
            .setPort(port)
            .setSsl(ssl)
            .setConnectTimeout(timeoutMs);
    Promise<Void> warmed = Promise.promise();
    if (ssl) {
      context.runOnContext(v -> TlsWarmUp.run(vertx, client, connect).onComplete(warmed));
    } else {
      warmed.complete();
    }
    this.pool =
        new ConnectionPool(
            vertx,
            client,
            connect,
            transport.http2(),
            timing,
            warmed.future(),
            maxConnections,
            options.getKeepAliveTimeout(),
            connectionReuse);
  }

  /**
   * Requests that failed on a reused connection before any response byte arrived and were sent
   * again on a fresh one (the server had closed the connection; see {@code ConnectionPool}).
   */
  public long staleConnectionRetries() {
    return staleRetries;
  }

  /** Connections opened so far. */
  public long connectionsOpened() {
    return pool.opened();
  }

  /**
   * Connections the server closed while they were idle after a response that announced keep-alive.
   */
  public long connectionsClosedByServer() {
    return pool.closedByServer();
  }

  /**
   * The protocol the connections spoke ({@code h2}, {@code http/1.1}; both, comma-separated, when
   * they differed), or null before the first connection.
   */
  public String protocol() {
    return pool.protocol();
  }

  /**
   * The TLS version of the connections ({@code 1.3}, as OpenTelemetry spells it), or null over
   * plain http.
   */
  public String tlsVersion() {
    return pool.tlsVersion();
  }

  /** Whether connections are reused ({@code --connection-reuse}). */
  public boolean connectionReuse() {
    return pool.reuses();
  }

  /**
   * Starts a request now (on this runner's context) and measures it.
   *
   * @param seq the request's number in the run
   * @param spec what to send
   * @param traceId the W3C trace id in {@code traceparent}, kept in the result
   * @param traceparent sent as the {@code traceparent} header
   * @param step the arrival-rate step the request belongs to
   * @param intendedNanos the scheduled start, on the {@link System#nanoTime()} scale
   * @return the result; never fails (failures are classes of the result)
   */
  public Future<ClientResult> run(
      long seq,
      RequestSpec spec,
      String traceId,
      String traceparent,
      int step,
      long intendedNanos) {
    Promise<ClientResult> promise = Promise.promise();
    run(seq, spec, traceId, traceparent, step, intendedNanos, itlSink, promise::complete);
    return promise.future();
  }

  /**
   * Like {@link #run(long, RequestSpec, String, String, int, long)}, handing the result to {@code
   * done} on this runner's context. A handler added to the returned future instead runs on the
   * thread that adds it when the request has already finished, which for a fast server is often the
   * thread that scheduled it.
   *
   * @param itl receives this request's inter-token gaps (the warm-up's go elsewhere than the run's)
   */
  public void run(
      long seq,
      RequestSpec spec,
      String traceId,
      String traceparent,
      int step,
      long intendedNanos,
      LongConsumer itl,
      Handler<ClientResult> done) {
    run(seq, spec, traceId, traceparent, step, intendedNanos, itl, done, null);
  }

  /**
   * Like {@link #run(long, RequestSpec, String, String, int, long, LongConsumer, Handler)}, keeping
   * the answer's text in {@code answer} as it is read (a chat turn of a session, whose next turn
   * sends it back); null keeps nothing, as for every other request.
   */
  public void run(
      long seq,
      RequestSpec spec,
      String traceId,
      String traceparent,
      int step,
      long intendedNanos,
      LongConsumer itl,
      Handler<ClientResult> done,
      AnswerText answer) {
    Objects.requireNonNull(spec, "spec");
    Objects.requireNonNull(itl, "itl");
    Objects.requireNonNull(done, "done");
    Exchange exchange =
        new Exchange(this, seq, spec, traceId, traceparent, step, intendedNanos, itl, done, answer);
    context.runOnContext(v -> exchange.start());
  }

  /** Closes the connections; requests still running end as {@code RESET}. */
  public Future<Void> close() {
    pool.shutdown();
    return client.close();
  }

  String uri(String path) {
    if (basePath.endsWith("/v1") && path.startsWith("/v1/")) {
      return basePath + path.substring(3);
    }
    return basePath + path;
  }
}
