package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.upstream.ResponseEvent;
import io.phasemeter.proxy.upstream.StreamChunk;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientResponse;

/**
 * A response read whole before the client sees it: a non-streamed answer, checked to be JSON and
 * inspected for usage and for an error the upstream reported in a 200, then handed to the write
 * phase; or an upstream's error answer, for the exchange to judge. Either is bounded in size and
 * held against the proxy's {@link BodyBudget}: with the slot given back when generation ends, a
 * client that never reads could otherwise pile them up.
 */
final class WholeBodyRelay {
  /** The most of an upstream's error answer that is read. */
  static final int MAX_ERROR_BODY = 1 << 20;

  /** The most of a non-streamed answer that is read; a larger one is malformed. */
  static final int MAX_RESPONSE_BODY = 64 << 20;

  private final UpstreamExchange exchange;
  private final RequestContext ctx;
  private final GenerationTimers timers;
  private final BodyBudget bodies;

  WholeBodyRelay(
      UpstreamExchange exchange, RequestContext ctx, GenerationTimers timers, BodyBudget bodies) {
    this.exchange = exchange;
    this.ctx = ctx;
    this.timers = timers;
    this.bodies = bodies;
  }

  /** Reads {@code resp}, a 2xx or 3xx answer to a request that is not streamed, and answers it. */
  void relay(HttpClientResponse resp) {
    timers.cancelFirstToken();
    timers.armIdle();
    collect(resp, MAX_RESPONSE_BODY)
        .onSuccess(body -> onBody(resp, body))
        .onFailure(t -> exchange.fail(ErrorResponder.classify(t)));
  }

  private void onBody(HttpClientResponse resp, Buffer body) {
    long at = ctx.now();
    boolean malformed;
    if (ctx.route().api() == ApiRoute.Api.RESPONSES) {
      ResponseEvent r = ResponseEvent.inspectBody(body);
      malformed = r.kind() == ResponseEvent.Kind.MALFORMED;
      UpstreamUsage.take(ctx, r);
      if (r.kind() == ResponseEvent.Kind.FAILED) {
        exchange.upstreamErrorType(r.errorType());
      }
    } else {
      StreamChunk chunk = StreamChunk.inspect(body);
      malformed = chunk.kind() == StreamChunk.Kind.MALFORMED;
      UpstreamUsage.take(ctx, chunk);
      if (chunk.kind() == StreamChunk.Kind.ERROR) {
        exchange.upstreamErrorType(chunk.errorType());
      }
    }
    if (malformed) {
      exchange.fail(
          ProxyFailure.of(
              ProxyFailure.Kind.UPSTREAM_MALFORMED, "The upstream's response is not valid JSON."));
      return;
    }
    ctx.answered(body, resp.getHeader("content-type"));
    exchange.complete(at);
  }

  /**
   * {@code resp}'s body, whole, or a failure: {@code upstream_malformed} past {@code limit} bytes,
   * {@code overloaded} when the proxy holds too many bytes of bodies at once.
   */
  Future<Buffer> collect(HttpClientResponse resp, int limit) {
    Promise<Buffer> p = Promise.promise();
    Buffer acc = Buffer.buffer(1024);
    resp.handler(
        b -> {
          timers.activity(ctx.now());
          if (p.future().isComplete()) {
            return;
          }
          if (acc.length() + b.length() > limit) {
            p.tryFail(
                ProxyFailure.of(
                    ProxyFailure.Kind.UPSTREAM_MALFORMED,
                    "The upstream's response exceeds " + limit + " bytes."));
          } else if (!ctx.holdBody(bodies, b.length())) {
            p.tryFail(
                ProxyFailure.retryAfter(
                    ProxyFailure.Kind.OVERLOADED,
                    "The proxy is overloaded: too many bytes of bodies are held at once."
                        + " Please retry shortly.",
                    1));
          } else {
            acc.appendBuffer(b);
          }
        });
    resp.endHandler(v -> p.tryComplete(acc));
    return p.future();
  }
}
