package io.phasemeter.proxy.pipeline;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;

/**
 * Phase {@code write}: from the upstream's last byte until the response's {@code end()} completed.
 * For a stream this is only the tail (chunks were relayed during generation); for a whole response
 * it is the response itself, with {@code Server-Timing} carrying every phase before it.
 *
 * <p>A whole response is handed to the connection in pieces, each of which completes when the
 * socket took it: a write that makes no progress for the pool's {@code timeouts.client_write} (a
 * client that stopped reading) fails as {@code client_stalled} and its connection is closed at
 * once, the queued bytes with it. The slot was given back when generation ended; the response's
 * bytes stay counted against {@code limits.max_buffered_body_bytes} until the request ends.
 */
final class WritePhase {
  /** The size of the pieces a whole response is written in; progress is seen per piece. */
  static final int PIECE = 64 * 1024;

  private final Vertx vertx;

  WritePhase(Vertx vertx) {
    this.vertx = vertx;
  }

  /** Ends the response; the phase ends when this completes (the pipeline times it). */
  Future<Void> write(RequestContext ctx) {
    HttpServerResponse out = ctx.response();
    Progress progress = new Progress(ctx);
    // A client that leaves, or a drain's deadline, ends the write now rather than when its bytes
    // would have been flushed.
    ctx.onCancel(progress::cancel);
    Future<Void> ended;
    if (ctx.relaysRaw() || (ctx.streaming() && ctx.passthroughStatus() == 0)) {
      ended = out.end();
    } else {
      int status = ctx.passthroughStatus() > 0 ? ctx.passthroughStatus() : 200;
      ctx.statusSent(status);
      out.setStatusCode(status);
      String type = ctx.passthroughContentType();
      out.putHeader("content-type", type != null ? type : "application/json");
      out.putHeader("server-timing", ServerTiming.upTo(ctx, Phase.GENERATION));
      Buffer body = ctx.responseBody() == null ? Buffer.buffer() : ctx.responseBody();
      if (body.length() <= PIECE) {
        ended = out.end(body);
      } else {
        out.putHeader("content-length", Integer.toString(body.length()));
        for (int from = 0; from < body.length(); from += PIECE) {
          out.write(body.slice(from, Math.min(body.length(), from + PIECE)))
              .onSuccess(v -> progress.made());
        }
        ended = out.end();
      }
    }
    return progress
        .watch(ended)
        .recover(
            err ->
                Future.failedFuture(
                    err instanceof ProxyFailure pf
                        ? pf
                        : ProxyFailure.of(
                            ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")));
  }

  /** Watches a write: fails it as stalled when no piece completed for {@code client_write}. */
  private final class Progress {
    private final RequestContext ctx;
    private final long timeoutNanos;
    private final Promise<Void> done = Promise.promise();
    private long last;
    private long timer = -1;

    Progress(RequestContext ctx) {
      this.ctx = ctx;
      this.timeoutNanos =
          ctx.pool() == null ? Long.MAX_VALUE : ctx.pool().timeouts().clientWrite().toNanos();
      this.last = ctx.now();
    }

    void made() {
      last = ctx.now();
    }

    void cancel() {
      done.tryFail(
          ctx.cancelledByShutdown()
              ? ProxyFailure.of(
                  ProxyFailure.Kind.SHUTTING_DOWN, "The proxy cancelled it at shutdown.")
              : ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."));
    }

    Future<Void> watch(Future<Void> ended) {
      if (ended.isComplete()) {
        return ended;
      }
      ended.onComplete(
          ar -> {
            if (timer >= 0) {
              vertx.cancelTimer(timer);
            }
            if (ar.succeeded()) {
              done.tryComplete();
            } else {
              done.tryFail(ar.cause());
            }
          });
      if (timeoutNanos != Long.MAX_VALUE) {
        arm(timeoutNanos);
      }
      return done.future();
    }

    private void arm(long delayNanos) {
      timer = vertx.setTimer(Math.max(1, delayNanos / 1_000_000), id -> check());
    }

    private void check() {
      if (done.future().isComplete()) {
        return;
      }
      long quiet = ctx.now() - last;
      if (quiet >= timeoutNanos) {
        done.tryFail(
            ProxyFailure.of(
                ProxyFailure.Kind.CLIENT_STALLED,
                "The client read nothing for " + timeoutNanos / 1_000_000 + " ms."));
      } else {
        arm(timeoutNanos - quiet);
      }
    }
  }
}
