package io.phasemeter.load.http;

import io.phasemeter.core.net.StaleConnections;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.AsyncResult;
import io.vertx.core.Handler;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.LongConsumer;

/**
 * One request in flight. Every method runs on the runner's context, so the state needs no locks;
 * {@link #done} makes the first ending win (a timeout and a late response, say).
 */
final class Exchange implements ConnectionPool.Waiter {
  private static final int MAX_SSE_LINE_BYTES = 16 * 1024 * 1024;
  private static final int MAX_BODY_BYTES = 64 * 1024 * 1024;
  // An error response's body is read for its message only; a longer one is not kept.
  private static final int MAX_ERROR_BODY_BYTES = 64 * 1024;

  private final RequestRunner runner;
  private final long seq;
  private final RequestSpec spec;
  private final String traceId;
  private final String traceparent;
  private final int step;
  private final long intended;
  private final LongConsumer itl;
  private final Handler<ClientResult> onResult;

  /** Where a session's chat answer goes (its next turn sends it back); null for other requests. */
  private final AnswerText answer;

  private boolean done;
  private boolean retried;
  // Whether options carries the connection: close this exchange put there.
  private boolean closeAsked;
  private long handedAt;

  private long timerId = -1;
  private RequestOptions options;
  private ConnectionPool.Conn conn;
  private HttpClientRequest request;
  private HttpClientResponse response;
  private boolean responseEnded;
  private long actual;
  private long transportSetup = -1;
  private long dns = -1;
  private long connect = -1;
  private long tls = -1;
  private long ttfb = -1;
  private long ttft = -1;
  private long lastByte = -1;
  private int status;
  private String serverTiming;

  private boolean sse;
  private SseParser parser;
  private StreamReader reader;
  private SseParser.EventSink sink;
  private long chunkAt;
  private String streamError;
  private Buffer body;
  private boolean bodyTooLarge;

  private long firstToken = -1;
  private long lastToken = -1;
  private int contentEvents;
  private long[] gaps = new long[0];
  private long usagePrompt = -1;
  private long usageCompletion = -1;

  Exchange(
      RequestRunner runner,
      long seq,
      RequestSpec spec,
      String traceId,
      String traceparent,
      int step,
      long intended,
      LongConsumer itl,
      Handler<ClientResult> onResult,
      AnswerText answer) {
    this.runner = runner;
    this.seq = seq;
    this.spec = spec;
    this.traceId = traceId;
    this.traceparent = traceparent;
    this.step = step;
    this.intended = intended;
    this.itl = itl;
    this.onResult = onResult;
    this.answer = answer;
  }

  void start() {
    options =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost(runner.host)
            .setPort(runner.port)
            .setSsl(runner.ssl)
            .setURI(runner.uri(spec.path()))
            .putHeader("content-type", "application/json")
            .putHeader("accept", spec.stream() ? "text/event-stream" : "application/json");
    if (traceparent != null) {
      options.putHeader("traceparent", traceparent);
    }
    for (Map.Entry<String, String> h : spec.headers().entrySet()) {
      options.putHeader(h.getKey(), h.getValue());
    }
    leave();
  }

  /**
   * Sends the request at its intended start, never before. One handed out ahead of its time (the
   * pacer's lead after a long gap, {@link RequestRunner#HAND_OUT_LEAD_NANOS}) checks again from a
   * timer due at once, without blocking the event loop: Netty fetches a due timer only after its
   * next poll for I/O (a non-blocking one, as the timer is due), so the other streams' reads run
   * between two checks and are stamped on time. A task posted with {@code runOnContext} instead
   * would run in the same batch of tasks, with no I/O in between: a spin by another name. Anything
   * further ahead than the lead, which the pacer does not do, waits on a timer for the rest first.
   */
  private void leave() {
    long now = System.nanoTime();
    long early = intended - now;
    if (early > 0) {
      long wait =
          early > RequestRunner.HAND_OUT_LEAD_NANOS ? early - RequestRunner.HAND_OUT_LEAD_NANOS : 1;
      runner.vertx.timer(wait, TimeUnit.NANOSECONDS).onComplete(v -> leave());
      return;
    }
    actual = now;
    timerId = runner.vertx.setTimer(runner.timeoutMs, id -> onTimeout());
    runner.pool.acquire(this);
  }

  @Override
  public void onConnection(ConnectionPool.Conn c) {
    if (done) {
      runner.pool.releaseUnused(c);
      return;
    }
    conn = c;
    handedAt = System.nanoTime();
    // This request's wait, then the part of its connection's set-up it waited through:
    // transport_setup's parts.
    ConnectionPool.SetUp setUp = c.fresh() ? c.setUpSince(actual) : ConnectionPool.SetUp.NONE;
    dns = setUp.dns();
    connect = setUp.connect();
    tls = setUp.tls();
    // One request per connection: an http/1.1 server need not keep it alive for nothing (h2 has
    // no such header; the pool closes the connection after its stream). Decided per connection:
    // --http2 may have ended on http/1.1 (ALPN), and a retry may land on another protocol.
    boolean close = !runner.pool.reuses() && "http/1.1".equals(c.protocol);
    if (close) {
      options.putHeader("connection", "close");
    } else if (closeAsked) {
      options.removeHeader("connection");
    }
    closeAsked = close;
    c.http.request(options).onComplete(this::onRequest);
  }

  @Override
  public void onConnectFailure(Throwable cause) {
    if (isTimeout(cause)) {
      finish(ErrorClass.TIMEOUT, FailureReason.TIMED_OUT_WAITING);
    } else {
      finish(ErrorClass.CONNECT, FailureReason.connect(cause));
    }
  }

  @Override
  public boolean gone() {
    return done;
  }

  private void onRequest(AsyncResult<HttpClientRequest> ar) {
    if (done) {
      return;
    }
    if (ar.failed()) {
      // The connection closed between being taken and carrying the request.
      if (!retryOnFreshConnection(ar.cause())) {
        onFailure(ar.cause());
      }
      return;
    }
    transportSetup = System.nanoTime() - actual;
    request = ar.result();
    if (conn.protocol == null) {
      runner.pool.learned(conn, request.version());
    }
    request.send(spec.body()).onComplete(this::onResponse);
  }

  private void onResponse(AsyncResult<HttpClientResponse> ar) {
    if (done) {
      return;
    }
    if (ar.failed()) {
      if (!retryOnFreshConnection(ar.cause())) {
        onFailure(ar.cause());
      }
      return;
    }
    ttfb = System.nanoTime() - intended;
    response = ar.result();
    status = response.statusCode();
    List<String> timing = response.headers().getAll("server-timing");
    serverTiming = timing.isEmpty() ? null : String.join(", ", timing);
    String type = response.getHeader("content-type");
    sse =
        status < 400
            && type != null
            && type.toLowerCase(Locale.ROOT).startsWith("text/event-stream");
    if (sse) {
      parser = new SseParser(MAX_SSE_LINE_BYTES);
      reader = StreamReader.of(spec.api());
      sink =
          new SseParser.EventSink() {
            @Override
            public void event(String type, String data) {
              onEvent(type, data, chunkAt);
            }

            @Override
            public void errorField(String value) {
              reader.errorField(value);
            }
          };
    } else {
      // An error response's body too: its message is the failure's reason.
      body = Buffer.buffer();
    }
    response.handler(this::onData);
    response.exceptionHandler(this::onFailure);
    response.endHandler(v -> onEnd());
  }

  private void onData(Buffer chunk) {
    if (done) {
      return;
    }
    if (sse) {
      chunkAt = System.nanoTime();
      try {
        parser.feedEvents(chunk, sink);
      } catch (IllegalStateException e) {
        // The parser's own message: the limit, never the line.
        streamError = e.getMessage();
        finish(ErrorClass.STREAM_ERROR, streamError);
        request.reset();
      }
    } else if (body != null) {
      if (body.length() + chunk.length()
          > (status >= 400 ? MAX_ERROR_BODY_BYTES : MAX_BODY_BYTES)) {
        bodyTooLarge = true;
        body = null;
      } else {
        body.appendBuffer(chunk);
      }
    }
  }

  private void onEvent(String type, String data, long now) {
    if (reader.event(type, data)) {
      if (answer != null) {
        answer.event(data);
      }
      if (firstToken < 0) {
        firstToken = now;
        ttft = now - intended;
      } else {
        if (contentEvents - 1 == gaps.length) {
          gaps = Arrays.copyOf(gaps, Math.max(16, gaps.length * 2));
        }
        gaps[contentEvents - 1] = now - lastToken;
      }
      lastToken = now;
      contentEvents++;
    }
    usagePrompt = reader.usagePrompt;
    usageCompletion = reader.usageCompletion;
  }

  private void onEnd() {
    if (done) {
      return;
    }
    lastByte = System.nanoTime();
    responseEnded = true;
    if (status >= 400) {
      byte[] bytes = body == null ? null : body.getBytes();
      body = null;
      finishQuoting(
          httpClass(),
          bodyTooLarge
              ? "HTTP "
                  + status
                  + " (error body over "
                  + MAX_ERROR_BODY_BYTES / 1024
                  + " KiB, not read)"
              : FailureReason.http(status, response.getHeader("content-type"), bytes));
    } else if (sse) {
      if (spec.api() == Api.EMBEDDINGS) {
        finish(ErrorClass.INVALID, "an event stream answered an embeddings request");
      } else if (streamError != null) {
        finish(ErrorClass.STREAM_ERROR, streamError);
      } else if (reader.failed()) {
        finishQuoting(ErrorClass.STREAM_ERROR, reader.reason());
      } else if (!reader.ended()) {
        finish(ErrorClass.STREAM_ERROR, reader.unfinishedReason());
      } else {
        validate();
      }
    } else {
      // A whole response's first token is seen with its last byte; embeddings have none.
      if (spec.api().generates()) {
        ttft = lastByte - intended;
      }
      byte[] bytes = body == null ? null : body.getBytes();
      body = null;
      if (bodyTooLarge) {
        finish(ErrorClass.INVALID, "response body larger than " + MAX_BODY_BYTES + " bytes");
      } else {
        switch (spec.api()) {
          case EMBEDDINGS -> embeddings(bytes);
          case RESPONSES -> response(bytes);
          default -> completion(bytes);
        }
      }
    }
  }

  /** A chat or completion body. */
  private void completion(byte[] bytes) {
    ResponseJson json = bytes == null ? null : ResponseJson.parse(bytes);
    if (json == null) {
      finish(ErrorClass.INVALID, "response body is not a JSON object");
    } else if (json.error) {
      finishQuoting(
          ErrorClass.INVALID,
          FailureReason.withMessage("response body carries an error", json.message));
    } else {
      if (json.hasUsage()) {
        usagePrompt = json.promptTokens;
        usageCompletion = json.completionTokens;
      }
      if (answer != null) {
        answer.body(bytes);
      }
      validate();
    }
  }

  /**
   * A Responses API object: a success only with {@code status} {@code completed} or {@code
   * incomplete} (stopped at {@code max_output_tokens}, say) and no error.
   */
  private void response(byte[] bytes) {
    ResponsesJson json = bytes == null ? null : ResponsesJson.parse(bytes);
    if (json == null) {
      finish(ErrorClass.INVALID, "response body is not a JSON object");
    } else if (json.error || "failed".equals(json.status)) {
      finishQuoting(
          ErrorClass.INVALID,
          FailureReason.withMessage(
              "response failed" + (json.errorCode == null ? "" : " (" + json.errorCode + ")"),
              json.errorMessage));
    } else if (!"completed".equals(json.status) && !"incomplete".equals(json.status)) {
      finishQuoting(
          ErrorClass.INVALID,
          json.status == null
              ? "response body has no status"
              : "response status " + json.status + ", not completed or incomplete");
    } else {
      if (json.hasUsage()) {
        usagePrompt = json.inputTokens;
        usageCompletion = json.outputTokens;
      }
      validate();
    }
  }

  /** An embeddings body: at least one embedding, no error; nothing was generated. */
  private void embeddings(byte[] bytes) {
    EmbeddingsJson json = bytes == null ? null : EmbeddingsJson.parse(bytes);
    if (json == null) {
      finish(ErrorClass.INVALID, "response body is not a JSON object");
    } else if (json.error) {
      finishQuoting(
          ErrorClass.INVALID,
          FailureReason.withMessage(
              "response body carries an error", FailureReason.errorMessage(bytes)));
    } else if (json.embeddings == 0) {
      finish(ErrorClass.INVALID, "no embedding in the response");
    } else {
      usagePrompt = json.promptTokens;
      validate();
    }
  }

  private void validate() {
    if (!spec.exactLengths() && !spec.exactOutput()) {
      finish(ErrorClass.NONE, null);
    } else if (!spec.api().generates()) {
      // Embeddings: the input is exact, and nothing is generated to check.
      if (usagePrompt < 0) {
        finish(ErrorClass.INVALID, "no usage in the response");
      } else if (usagePrompt != spec.promptTokens()) {
        finish(
            ErrorClass.INVALID,
            "prompt_tokens " + usagePrompt + " != prompt tokens sent " + spec.promptTokens());
      } else {
        finish(ErrorClass.NONE, null);
      }
    } else if (usageCompletion < 0 && usagePrompt < 0) {
      finish(ErrorClass.INVALID, "no usage in the response");
    } else if (spec.exactLengths() && usagePrompt != spec.promptTokens()) {
      finish(
          ErrorClass.INVALID,
          "prompt_tokens " + usagePrompt + " != prompt tokens sent " + spec.promptTokens());
    } else if (spec.exactOutput() && usageCompletion != spec.maxTokens()) {
      // A text prompt (a dataset's) is not exact, but its output is: an engine that stops early
      // is caught here all the same.
      finish(
          ErrorClass.INVALID,
          "completion_tokens " + usageCompletion + " != max_tokens " + spec.maxTokens());
    } else {
      finish(ErrorClass.NONE, null);
    }
  }

  private void onFailure(Throwable cause) {
    if (done) {
      return;
    }
    broke(isTimeout(cause), cause);
  }

  /**
   * The request timed out, or its connection broke. A stream that an error event already failed
   * (the engine may hold it open, or close it, after the event) is a stream error whose reason is
   * the engine's message: the timeout or the reset only followed it. An HTTP error whose body was
   * cut keeps its class and its status in the reason.
   */
  private void broke(boolean timeout, Throwable cause) {
    if (sse && reader != null && reader.failed()) {
      finishQuoting(ErrorClass.STREAM_ERROR, reader.reason());
      return;
    }
    String how =
        timeout
            ? FailureReason.timeout(conn != null, response != null, sse && firstToken >= 0)
            : FailureReason.reset(cause, request != null, response != null);
    if (status >= 400) {
      finish(httpClass(), FailureReason.httpCut(status, how));
    } else {
      finish(timeout ? ErrorClass.TIMEOUT : ErrorClass.RESET, how);
    }
  }

  private ErrorClass httpClass() {
    return status >= 500 ? ErrorClass.HTTP_5XX : ErrorClass.HTTP_4XX;
  }

  /**
   * A request that failed on a reused connection before any byte of a response arrived (reset, EOF:
   * the server had closed it, and the close was not seen in time) goes once more on a fresh
   * connection, keeping its intended start, so the lost time is in its latency, and its trace id.
   * Counted per run, never hidden. A failure on a fresh connection, a timeout, or a second failure
   * stays a failure.
   *
   * @return whether the request was sent again
   */
  private boolean retryOnFreshConnection(Throwable cause) {
    if (done
        || retried
        || conn == null
        || response != null
        || runner.pool.shuttingDown()
        || System.nanoTime() - handedAt > StaleConnections.WINDOW_NANOS
        || !StaleConnections.closedConnection(cause)
        || !ConnectionPool.reused(conn)) {
      return false;
    }
    retried = true;
    runner.staleRetries++;
    runner.pool.discardBroken(conn);
    conn = null;
    request = null;
    runner.pool.acquireFresh(this);
    return true;
  }

  private void onTimeout() {
    timerId = -1;
    if (done) {
      return;
    }
    broke(true, null);
    if (request != null) {
      request.reset();
    }
  }

  /**
   * Ends with a reason that quotes what the engine sent: cleaned, without this request's key and
   * without its prompt ({@link FailureReason#fromEngine}).
   */
  private void finishQuoting(ErrorClass error, String reason) {
    if (!done) {
      finish(
          error,
          FailureReason.fromEngine(reason, FailureReason.bearerToken(spec.headers()), spec.body()));
    }
  }

  /**
   * Ends the request. {@code reason} is the client's own text (a fixed phrase, numbers, class
   * names), or one {@link #finishQuoting} cleaned; identical reasons end up as one String.
   */
  private void finish(ErrorClass error, String reason) {
    if (done) {
      return;
    }
    done = true;
    if (reason == null && error != ErrorClass.NONE) {
      reason = error.name().toLowerCase(Locale.ROOT); // every failure says something
    }
    reason = runner.reasons.intern(reason);
    long total = (lastByte >= 0 ? lastByte : System.nanoTime()) - intended;
    if (timerId >= 0) {
      runner.vertx.cancelTimer(timerId);
      timerId = -1;
    }
    if (conn != null) {
      // Back to the pool after a complete response; closed after anything else.
      runner.pool.release(conn, responseEnded ? response : null);
      conn = null;
    }
    options = null;
    long tpot = -1;
    long itlCount = 0;
    if (sse && contentEvents > 0) {
      long n = usageCompletion > 0 ? usageCompletion : contentEvents;
      if (n > 1) {
        tpot = (lastToken - firstToken) / (n - 1);
      }
    }
    if (error == ErrorClass.NONE) {
      itlCount = Math.max(0, contentEvents - 1);
      for (int i = 0; i < itlCount; i++) {
        itl.accept(gaps[i]);
      }
    }
    gaps = null;
    onResult.handle(
        new ClientResult(
            seq,
            traceId,
            spec.bucket(),
            step,
            intended,
            actual,
            transportSetup,
            ttfb,
            ttft,
            total,
            tpot,
            itlCount,
            status,
            error,
            reason,
            spec.promptTokens(),
            spec.maxTokens(),
            usagePrompt,
            usageCompletion,
            serverTiming,
            retried,
            spec.turn(),
            spec.turn() == 0 ? null : spec.headers().get(Workload.SESSION_HEADER),
            dns,
            connect,
            tls));
  }

  /**
   * Whether a failure is a timeout of this request (the pool wait, say) rather than a failed
   * connection; a TCP connect timeout counts as a failed connection.
   */
  private static boolean isTimeout(Throwable cause) {
    for (Throwable t = cause; t != null; t = t.getCause()) {
      if (t instanceof ConnectException
          || t instanceof UnknownHostException
          || t instanceof NoRouteToHostException) {
        return false;
      }
      if (t instanceof TimeoutException
          || t.getClass().getSimpleName().endsWith("TimeoutException")) {
        return true;
      }
    }
    return false;
  }
}
