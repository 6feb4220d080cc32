package io.phasemeter.proxy.pipeline;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;

/**
 * Phase {@code receive}: reads the whole request body, bounded by {@code limits.max_body_bytes} (or
 * the route's {@code max_body_bytes}). A declared length over the limit is refused before a byte is
 * read; a chunked body is cut off the moment it crosses the limit. This phase is the client's
 * upload, so it is network-bound.
 *
 * <p>Memory follows the bytes that arrived, never the declared length: a head that promises 10 MB
 * and sends one byte holds a few hundred bytes. Every body counts against the proxy-wide {@link
 * BodyBudget} (bodies being received at once, body bytes held by all requests) and past it the
 * request gets 503 {@code overloaded}. With auth on, this phase runs only for a verified key.
 */
final class ReceivePhase {
  /** The first allocation for a body; it grows with what arrives. */
  static final int INITIAL_BUFFER = 4096;

  private final long maxBodyBytes;
  private final long timeoutMs;
  private final io.vertx.core.Vertx vertx;
  private final BodyBudget budget;

  ReceivePhase(
      io.vertx.core.Vertx vertx, long maxBodyBytes, java.time.Duration timeout, BodyBudget budget) {
    this.vertx = vertx;
    this.maxBodyBytes = maxBodyBytes;
    this.timeoutMs = Math.max(1, timeout.toMillis());
    this.budget = budget;
  }

  /** Reads the body; the phase ends when this completes (the pipeline times it). */
  Future<Void> receive(RequestContext ctx) {
    HttpServerRequest req = ctx.request();
    long maxBodyBytes = ctx.route().bodyLimit(this.maxBodyBytes);
    try {
      declaredLength(req, maxBodyBytes);
    } catch (ProxyFailure f) {
      return Future.failedFuture(f);
    }
    String encoding = req.getHeader("content-encoding");
    if (encoding != null && !encoding.isBlank() && !"identity".equalsIgnoreCase(encoding.trim())) {
      // The body is parsed as plain JSON and forwarded as parsed: a compressed one is neither.
      return Future.failedFuture(
          ProxyFailure.of(
              ProxyFailure.Kind.UNSUPPORTED_MEDIA_TYPE,
              "Content-Encoding is not supported; send the request body uncompressed."));
    }
    if (!budget.startUpload()) {
      return Future.failedFuture(overloaded("request bodies are being received"));
    }
    if ("100-continue".equalsIgnoreCase(req.getHeader("expect"))) {
      ctx.response().writeContinue();
    }
    Promise<Void> done = Promise.promise();
    done.future().onComplete(ar -> budget.endUpload());
    // A body that trickles or stops must not hold the request (and its spans) forever.
    long timer =
        vertx.setTimer(
            timeoutMs,
            id ->
                done.tryFail(
                    ProxyFailure.of(
                        ProxyFailure.Kind.REQUEST_TIMEOUT,
                        "The request body did not arrive within " + timeoutMs + " ms.")));
    done.future().onComplete(ar -> vertx.cancelTimer(timer));
    Buffer body = Buffer.buffer(INITIAL_BUFFER);
    req.handler(
        chunk -> {
          if (done.future().isComplete()) {
            return;
          }
          if (body.length() + chunk.length() > maxBodyBytes) {
            req.pause();
            done.tryFail(tooLarge(maxBodyBytes));
          } else if (!ctx.holdBody(budget, chunk.length())) {
            req.pause();
            done.tryFail(overloaded("bytes of request bodies are held"));
          } else {
            body.appendBuffer(chunk);
          }
        });
    req.endHandler(
        v -> {
          if (done.future().isComplete()) {
            return;
          }
          ctx.received(body);
          done.tryComplete();
        });
    req.exceptionHandler(
        t ->
            done.tryFail(
                ProxyFailure.of(
                    ProxyFailure.Kind.CLIENT_CANCELLED, "The request body was not received.")));
    ctx.onCancel(
        () ->
            done.tryFail(
                ctx.bodyFailure() != null
                    ? ctx.bodyFailure()
                    : ProxyFailure.of(
                        ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")));
    req.resume();
    return done.future();
  }

  private ProxyFailure overloaded(String what) {
    return ProxyFailure.retryAfter(
        ProxyFailure.Kind.OVERLOADED,
        "The proxy is overloaded: too many " + what + " at once. Please retry shortly.",
        1);
  }

  /**
   * The body length the head declares ({@code Content-Length}), or -1 when it declares none; a
   * length that is not a number, or is over {@code limit}, is refused before a byte is read.
   */
  static long declaredLength(HttpServerRequest req, long limit) {
    String header = req.getHeader("content-length");
    if (header == null) {
      return -1;
    }
    long declared;
    try {
      declared = Long.parseLong(header.trim());
    } catch (NumberFormatException e) {
      throw ProxyFailure.of(ProxyFailure.Kind.INVALID_REQUEST, "Invalid Content-Length header.");
    }
    if (declared > limit) {
      throw tooLarge(limit);
    }
    return declared;
  }

  /** The refusal of a body over {@code maxBodyBytes}, declared or arriving. */
  static ProxyFailure tooLarge(long maxBodyBytes) {
    return ProxyFailure.of(
        ProxyFailure.Kind.BODY_TOO_LARGE,
        "The request body exceeds the limit of " + maxBodyBytes + " bytes.");
  }
}
