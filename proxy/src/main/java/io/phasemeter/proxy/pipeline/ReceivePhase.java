package io.phasemeter.proxy.pipeline;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;

/**
 * Phase {@code receive}: reads the whole request body, bounded by {@code limits.max_body_bytes}. A
 * declared length over the limit is refused before a byte is read; a chunked body is cut off the
 * moment it crosses the limit. This phase is the client's upload, so it is network-bound.
 */
final class ReceivePhase {
  private final long maxBodyBytes;
  private final long timeoutMs;
  private final io.vertx.core.Vertx vertx;

  ReceivePhase(io.vertx.core.Vertx vertx, long maxBodyBytes, java.time.Duration timeout) {
    this.vertx = vertx;
    this.maxBodyBytes = maxBodyBytes;
    this.timeoutMs = Math.max(1, timeout.toMillis());
  }

  Future<Void> receive(RequestContext ctx) {
    ctx.begin(Phase.RECEIVE);
    HttpServerRequest req = ctx.request();
    String declaredHeader = req.getHeader("content-length");
    long declared = -1;
    if (declaredHeader != null) {
      try {
        declared = Long.parseLong(declaredHeader.trim());
      } catch (NumberFormatException e) {
        return Future.failedFuture(
            ProxyFailure.of(ProxyFailure.Kind.INVALID_REQUEST, "Invalid Content-Length header."));
      }
      if (declared > maxBodyBytes) {
        return Future.failedFuture(tooLarge());
      }
    }
    if ("100-continue".equalsIgnoreCase(req.getHeader("expect"))) {
      ctx.response().writeContinue();
    }
    Promise<Void> done = Promise.promise();
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
    Buffer body = Buffer.buffer((int) Math.max(256, Math.min(declared, 1 << 20)));
    req.handler(
        chunk -> {
          if (body.length() + chunk.length() > maxBodyBytes) {
            req.pause();
            done.tryFail(tooLarge());
          } else {
            body.appendBuffer(chunk);
          }
        });
    req.endHandler(
        v -> {
          if (done.future().isComplete()) {
            return;
          }
          ctx.body = body;
          ctx.end(Phase.RECEIVE);
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
                ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")));
    req.resume();
    return done.future();
  }

  private ProxyFailure tooLarge() {
    return ProxyFailure.of(
        ProxyFailure.Kind.BODY_TOO_LARGE,
        "The request body exceeds the limit of " + maxBodyBytes + " bytes.");
  }
}
