package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpServerRequest;

/**
 * A streamed pass-through's upload: the client's body sent upstream as it arrives, with
 * backpressure both ways (a slow upstream pauses the client) and the route's limit counted as it
 * goes. It holds a place among {@code limits.max_concurrent_uploads} while it runs, and fails as
 * {@code request_timeout} after {@code limits.receive_timeout} without a byte from the client.
 */
final class StreamedUpload {
  private static final AttributeKey<Long> REQUEST_BODY_BYTES =
      AttributeKey.longKey("http.request.body.size");

  private final Vertx vertx;
  private final RequestContext ctx;
  private final UpstreamExchange exchange;
  private final GenerationTimers timers;
  private final BodyBudget bodies;
  // limits.max_body_bytes: the bound when the route sets none.
  private final long maxBodyBytes;
  private final long receiveTimeoutNanos;
  // The first of the client's body bytes was taken: the request cannot be sent again.
  private boolean bodyTaken;
  private boolean ended;
  private boolean uploading;
  private long lastActivity;
  private long timer = -1;

  StreamedUpload(
      Vertx vertx,
      RequestContext ctx,
      UpstreamExchange exchange,
      GenerationTimers timers,
      BodyBudget bodies,
      long maxBodyBytes,
      long receiveTimeoutNanos) {
    this.vertx = vertx;
    this.ctx = ctx;
    this.exchange = exchange;
    this.timers = timers;
    this.bodies = bodies;
    this.maxBodyBytes = maxBodyBytes;
    this.receiveTimeoutNanos = receiveTimeoutNanos;
  }

  /**
   * Sends the client's body on {@code request} as it arrives: a body that crosses the route's limit
   * fails as {@code request_too_large}, its connection closed. Completes with the upstream's
   * response head.
   */
  Future<HttpClientResponse> send(HttpClientRequest request) {
    HttpServerRequest in = ctx.request();
    if (in.isEnded()) {
      // A resend (another upstream, or a fresh connection) of a request whose body had ended
      // before a byte of it was taken: there was none. (One that had sent bytes is never
      // resent.)
      return request.send();
    }
    if (!uploading) {
      if (!bodies.startUpload()) {
        ctx.response().putHeader("connection", "close");
        exchange.fail(
            ProxyFailure.retryAfter(
                ProxyFailure.Kind.OVERLOADED,
                "The proxy is overloaded: too many request bodies are being received at once."
                    + " Please retry shortly.",
                1));
        return Future.failedFuture(ProxyFailure.of(ProxyFailure.Kind.OVERLOADED, "overloaded"));
      }
      uploading = true;
      lastActivity = ctx.now();
      armIdle();
    }
    long declared = ctx.declaredBodyBytes();
    if (declared >= 0) {
      request.putHeader("content-length", Long.toString(declared));
    } else if (in.headers().contains("transfer-encoding")) {
      request.setChunked(true);
    }
    long limit = ctx.route().bodyLimit(maxBodyBytes);
    long[] sent = {0};
    if ("100-continue".equalsIgnoreCase(in.getHeader("expect"))) {
      ctx.response().writeContinue();
    }
    in.handler(
        chunk -> {
          if (exchange.over()) {
            return;
          }
          sent[0] += chunk.length();
          bodyTaken = true;
          long now = ctx.now();
          timers.activity(now);
          lastActivity = now;
          if (sent[0] > limit) {
            ctx.response().putHeader("connection", "close");
            exchange.fail(ReceivePhase.tooLarge(limit));
            return;
          }
          request.write(chunk);
          if (request.writeQueueFull()) {
            in.pause();
            request.drainHandler(v -> in.resume());
          }
        });
    in.endHandler(
        v -> {
          if (exchange.over()) {
            return;
          }
          ended = true;
          end();
          exchange.span().addEvent("request.body.sent", Attributes.of(REQUEST_BODY_BYTES, sent[0]));
          request.end();
        });
    in.exceptionHandler(
        t ->
            exchange.fail(
                ProxyFailure.of(
                    ProxyFailure.Kind.CLIENT_CANCELLED, "The request body was not received.")));
    in.resume();
    return request.response();
  }

  /** Whether a byte of the client's body went upstream: then the request is never sent again. */
  boolean bodyTaken() {
    return bodyTaken;
  }

  /** Whether the client's body was all sent upstream. */
  boolean ended() {
    return ended;
  }

  private void armIdle() {
    timer =
        vertx.setTimer(
            Math.max(1, (lastActivity + receiveTimeoutNanos - ctx.now()) / 1_000_000),
            id -> {
              timer = -1;
              if (exchange.over() || ended) {
                return;
              }
              if (ctx.now() - lastActivity >= receiveTimeoutNanos) {
                ctx.response().putHeader("connection", "close");
                exchange.fail(
                    ProxyFailure.of(
                        ProxyFailure.Kind.REQUEST_TIMEOUT,
                        "The request body sent nothing for "
                            + receiveTimeoutNanos / 1_000_000
                            + " ms."));
              } else {
                armIdle();
              }
            });
  }

  /** The upload is over (ended, or the exchange is): its place is given back once. */
  void end() {
    if (uploading) {
      uploading = false;
      bodies.endUpload();
    }
    if (timer >= 0) {
      vertx.cancelTimer(timer);
      timer = -1;
    }
  }
}
