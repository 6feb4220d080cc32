package io.phasemeter.proxy.pipeline;

import io.vertx.core.Future;
import io.vertx.core.http.HttpServerResponse;

/**
 * Phase {@code write}: from the upstream's last byte until the response's {@code end()} completed.
 * For a stream this is only the tail (chunks were relayed during generation); for a whole response
 * it is the response itself, with {@code Server-Timing} carrying every phase before it.
 */
final class WritePhase {
  Future<Void> write(RequestContext ctx) {
    ctx.begin(Phase.WRITE);
    HttpServerResponse out = ctx.response();
    Future<Void> ended;
    if (ctx.stream && ctx.passthroughStatus == 0) {
      ended = out.end();
    } else {
      int status = ctx.passthroughStatus > 0 ? ctx.passthroughStatus : 200;
      ctx.status = status;
      out.setStatusCode(status);
      out.putHeader(
          "content-type",
          ctx.passthroughContentType != null ? ctx.passthroughContentType : "application/json");
      out.putHeader("server-timing", ServerTiming.upTo(ctx, Phase.GENERATION));
      ended = out.end(ctx.responseBody);
    }
    return ended
        .recover(
            err ->
                Future.failedFuture(
                    ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")))
        .andThen(ar -> ctx.end(Phase.WRITE));
  }
}
