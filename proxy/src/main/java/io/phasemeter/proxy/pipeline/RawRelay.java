package io.phasemeter.proxy.pipeline;

import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerResponse;
import java.util.Locale;
import java.util.Map;

/**
 * A pass-through's response (or a plain one): status, headers and body relayed as they come, with
 * backpressure, uninspected. Generation ends at its last byte; the status decides the outcome
 * ({@link Verdict}).
 */
final class RawRelay {
  private final UpstreamExchange exchange;
  private final RequestContext ctx;
  private final GenerationTimers timers;

  RawRelay(UpstreamExchange exchange, RequestContext ctx, GenerationTimers timers) {
    this.exchange = exchange;
    this.ctx = ctx;
    this.timers = timers;
  }

  /** Relays {@code resp}, whatever its status, to the client. */
  void relay(HttpClientResponse resp) {
    HttpServerResponse out = ctx.response();
    timers.cancelFirstToken();
    int status = resp.statusCode();
    out.setStatusCode(status);
    if (!ctx.request().isEnded()) {
      // The upstream answered before the client's body was all read (an engine refusing an
      // upload early): what is left of it must not be read as the next request.
      out.putHeader("connection", "close");
    }
    for (Map.Entry<String, String> h : resp.headers()) {
      if (!UpstreamHeaders.RAW_HOP_BY_HOP.contains(h.getKey().toLowerCase(Locale.ROOT))) {
        out.headers().add(h.getKey(), h.getValue());
      }
    }
    String length = resp.getHeader("content-length");
    if (length != null) {
      out.putHeader("content-length", length);
    } else if (status >= 200
        && status != 204
        && status != 304
        && ctx.request().method() != HttpMethod.HEAD) {
      out.setChunked(true);
    }
    out.putHeader("server-timing", ServerTiming.upTo(ctx, Phase.QUEUE));
    ctx.relayed(status);
    timers.armIdle();
    resp.handler(
        chunk -> {
          if (exchange.over()) {
            return;
          }
          timers.activity(ctx.now());
          out.write(chunk);
          if (out.writeQueueFull()) {
            timers.waitForClient(resp, out);
          }
        });
    resp.endHandler(v -> exchange.complete(ctx.now()));
  }
}
