package io.phasemeter.proxy.pipeline;

import io.netty.channel.ConnectTimeoutException;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import io.opentelemetry.context.propagation.TextMapSetter;
import io.phasemeter.proxy.upstream.SseEvent;
import io.phasemeter.proxy.upstream.SseParser;
import io.phasemeter.proxy.upstream.StreamChunk;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpServerResponse;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Phase {@code generation}: the upstream exchange, from the request being opened to the upstream's
 * last byte. A streamed response is relayed event by event while this phase runs, with backpressure
 * (a slow client pauses the upstream), and the first content event marks server TTFT. Timeouts:
 * connect, first token, and idle (no upstream byte for that long).
 */
final class GeneratePhase {
  static final int MAX_ERROR_BODY = 1 << 20;
  static final int MAX_RESPONSE_BODY = 64 << 20;
  static final int MAX_EVENT_BYTES = 4 << 20;

  private static final Set<String> HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "proxy-authenticate",
          "proxy-authorization",
          "proxy-connection",
          "te",
          "trailer",
          "transfer-encoding",
          "upgrade",
          "host",
          "content-length",
          "expect",
          "accept-encoding",
          "traceparent",
          "tracestate");

  private static final TextMapSetter<MultiMap> SETTER =
      (carrier, key, value) -> carrier.set(key, value);

  private final Vertx vertx;
  private final TextMapPropagator propagator;

  GeneratePhase(Vertx vertx, TextMapPropagator propagator) {
    this.vertx = vertx;
    this.propagator = propagator;
  }

  Future<Void> generate(RequestContext ctx, UpstreamPool pool) {
    return new Exchange(ctx, pool).start();
  }

  private final class Exchange {
    private final RequestContext ctx;
    private final UpstreamPool pool;
    private final Promise<Void> done = Promise.promise();
    private final long firstTokenMs;
    private final long idleNanos;
    private HttpClientRequest upstreamRequest;
    private HttpClientResponse upstreamResponse;
    private long firstTokenTimer = -1;
    private long idleTimer = -1;
    private long lastActivity;
    private long pausedSince = -1;
    private boolean over;
    private boolean sawDone;
    private SseParser parser;

    Exchange(RequestContext ctx, UpstreamPool pool) {
      this.ctx = ctx;
      this.pool = pool;
      this.firstTokenMs = pool.config().timeouts().firstToken().toMillis();
      this.idleNanos = pool.config().timeouts().idle().toNanos();
    }

    Future<Void> start() {
      Span span = ctx.begin(Phase.GENERATION);
      span.setAttribute("server.address", ctx.upstream.host());
      span.setAttribute("server.port", (long) ctx.upstream.port());
      span.setAttribute("llm.streaming", ctx.stream);
      if (ctx.maxTokens >= 0) {
        span.setAttribute("gen_ai.request.max_tokens", ctx.maxTokens);
      }
      ctx.onCancel(
          () -> fail(ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")));
      firstTokenTimer =
          vertx.setTimer(
              firstTokenMs,
              id ->
                  fail(
                      ProxyFailure.of(
                          ProxyFailure.Kind.UPSTREAM_TIMEOUT,
                          "The upstream did not produce a first token within "
                              + firstTokenMs
                              + " ms.")));
      pool.open(ctx.upstream, ctx.route().path())
          .onComplete(
              ar -> {
                if (ar.failed()) {
                  fail(connectFailure(ar.cause()));
                  return;
                }
                upstreamRequest = ar.result();
                if (over) {
                  upstreamRequest.reset();
                  return;
                }
                MultiMap headers = upstreamRequest.headers();
                for (Map.Entry<String, String> h : ctx.request().headers()) {
                  if (!HOP_BY_HOP.contains(h.getKey().toLowerCase(Locale.ROOT))) {
                    headers.add(h.getKey(), h.getValue());
                  }
                }
                headers.set("content-type", "application/json");
                propagator.inject(Context.root().with(span), headers, SETTER);
                upstreamRequest
                    .send(ctx.upstreamBody)
                    .onComplete(
                        rr -> {
                          if (rr.failed()) {
                            fail(connectFailure(rr.cause()));
                          } else {
                            onResponse(rr.result());
                          }
                        });
              });
      return done.future();
    }

    private void onResponse(HttpClientResponse resp) {
      if (over) {
        return;
      }
      upstreamResponse = resp;
      lastActivity = ctx.now();
      resp.exceptionHandler(
          t ->
              fail(
                  ProxyFailure.of(
                      ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
                      "The upstream connection was lost mid-response.")));
      int status = resp.statusCode();
      if (status >= 400) {
        collect(resp, MAX_ERROR_BODY)
            .onSuccess(body -> onUpstreamError(resp, status, body))
            .onFailure(t -> fail(ErrorResponder.classify(t)));
        return;
      }
      String type = resp.getHeader("content-type");
      if (ctx.stream) {
        if (type == null || !type.toLowerCase(Locale.ROOT).startsWith("text/event-stream")) {
          fail(
              ProxyFailure.of(
                  ProxyFailure.Kind.UPSTREAM_MALFORMED,
                  "The upstream answered a streamed request without an event stream."));
          return;
        }
        relay(resp);
      } else {
        cancelFirstTokenTimer();
        armIdle();
        collect(resp, MAX_RESPONSE_BODY)
            .onSuccess(this::onFullBody)
            .onFailure(t -> fail(ErrorResponder.classify(t)));
      }
    }

    private void onUpstreamError(HttpClientResponse resp, int status, Buffer body) {
      if (status < 500) {
        // The upstream judged the request itself: pass its answer through unchanged.
        ctx.passthroughStatus = status;
        ctx.passthroughContentType = resp.getHeader("content-type");
        ctx.responseBody = body;
        ctx.outcome = Outcome.CLIENT_ERROR;
        ctx.errorType = "upstream_" + status;
        complete(ctx.now());
        return;
      }
      ProxyFailure.Kind kind =
          switch (status) {
            case 503 -> ProxyFailure.Kind.UPSTREAM_OVERLOADED;
            case 504 -> ProxyFailure.Kind.UPSTREAM_TIMEOUT;
            default -> ProxyFailure.Kind.UPSTREAM_ERROR;
          };
      fail(ProxyFailure.of(kind, "The upstream inference server answered " + status + "."));
    }

    private void onFullBody(Buffer body) {
      long at = ctx.now();
      StreamChunk chunk = StreamChunk.inspect(body.toString(StandardCharsets.UTF_8));
      if (chunk.kind() == StreamChunk.Kind.MALFORMED) {
        fail(
            ProxyFailure.of(
                ProxyFailure.Kind.UPSTREAM_MALFORMED,
                "The upstream's response is not valid JSON."));
        return;
      }
      takeUsage(chunk);
      ctx.responseBody = body;
      ctx.passthroughContentType = upstreamResponse.getHeader("content-type");
      complete(at);
    }

    private void relay(HttpClientResponse resp) {
      HttpServerResponse out = ctx.response();
      out.setStatusCode(200);
      out.setChunked(true);
      String type = resp.getHeader("content-type");
      out.putHeader("content-type", type);
      out.putHeader("cache-control", "no-cache");
      out.putHeader("server-timing", ServerTiming.upTo(ctx, Phase.QUEUE));
      ctx.status = 200;
      parser = new SseParser(MAX_EVENT_BYTES);
      armIdle();
      resp.handler(
          chunk -> {
            if (over) {
              return;
            }
            lastActivity = ctx.now();
            try {
              parser.feed(chunk, this::onEvent);
            } catch (RuntimeException e) {
              fail(
                  ProxyFailure.of(
                      ProxyFailure.Kind.UPSTREAM_MALFORMED,
                      "The upstream sent an event stream the proxy could not parse."));
              return;
            }
            if (!over && out.writeQueueFull()) {
              // The client is slow, not the upstream: the idle clock now watches the client.
              resp.pause();
              pausedSince = ctx.now();
              out.drainHandler(
                  v -> {
                    pausedSince = -1;
                    lastActivity = ctx.now();
                    resp.resume();
                  });
            }
          });
      resp.endHandler(
          v -> {
            if (over) {
              return;
            }
            if (!parser.hasPending() && parser.pending().length() > 0) {
              // Only the "\n" of a final "\r\n" is left: it belongs to the client too.
              out.write(parser.pending());
            }
            if (parser.hasPending() || !sawDone) {
              fail(
                  ProxyFailure.of(
                      ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
                      "The upstream stream ended before [DONE]."));
              return;
            }
            complete(ctx.now());
          });
    }

    private void onEvent(SseEvent event) {
      if (over) {
        return;
      }
      HttpServerResponse out = ctx.response();
      String data = event.data();
      if (data == null) {
        out.write(event.raw());
        return;
      }
      StreamChunk chunk = StreamChunk.inspect(data);
      switch (chunk.kind()) {
        case MALFORMED -> {
          fail(
              ProxyFailure.of(
                  ProxyFailure.Kind.UPSTREAM_MALFORMED,
                  "The upstream sent an event that is not valid JSON."));
          return;
        }
        case DONE -> sawDone = true;
        case USAGE_ONLY -> {
          takeUsage(chunk);
          if (!ctx.clientWantsUsage) {
            return;
          }
        }
        default -> takeUsage(chunk);
      }
      // Read the clock before handing the chunk over: once written, a client on the same host
      // can read it before this call returns, and its TTFT must not come out shorter than ours.
      long handedAt = ctx.now();
      out.write(event.raw());
      if (chunk.kind() == StreamChunk.Kind.CONTENT) {
        ctx.onContentChunk(handedAt);
        cancelFirstTokenTimer();
      }
    }

    private void takeUsage(StreamChunk chunk) {
      if (chunk.hasUsage()) {
        ctx.inputTokens = chunk.promptTokens();
        ctx.outputTokens = chunk.completionTokens();
      }
      if (chunk.finishReason() != null) {
        ctx.finishReason = chunk.finishReason();
      }
    }

    private Future<Buffer> collect(HttpClientResponse resp, int limit) {
      Promise<Buffer> p = Promise.promise();
      Buffer acc = Buffer.buffer(1024);
      resp.handler(
          b -> {
            lastActivity = ctx.now();
            if (acc.length() + b.length() > limit) {
              p.tryFail(
                  ProxyFailure.of(
                      ProxyFailure.Kind.UPSTREAM_MALFORMED,
                      "The upstream's response exceeds " + limit + " bytes."));
            } else {
              acc.appendBuffer(b);
            }
          });
      resp.endHandler(v -> p.tryComplete(acc));
      return p.future();
    }

    private void armIdle() {
      long delayMs = Math.max(1, idleNanos / 1_000_000);
      idleTimer = vertx.setTimer(delayMs, id -> checkIdle());
    }

    private void checkIdle() {
      if (over) {
        return;
      }
      if (pausedSince >= 0) {
        long stalled = ctx.now() - pausedSince;
        if (stalled >= idleNanos) {
          fail(
              ProxyFailure.of(
                  ProxyFailure.Kind.CLIENT_STALLED,
                  "The client read nothing for " + idleNanos / 1_000_000 + " ms."));
        } else {
          idleTimer =
              vertx.setTimer(Math.max(1, (idleNanos - stalled) / 1_000_000), id -> checkIdle());
        }
        return;
      }
      long quiet = ctx.now() - lastActivity;
      if (quiet >= idleNanos) {
        fail(
            ProxyFailure.of(
                ProxyFailure.Kind.UPSTREAM_TIMEOUT,
                "The upstream sent nothing for " + idleNanos / 1_000_000 + " ms."));
      } else {
        idleTimer = vertx.setTimer(Math.max(1, (idleNanos - quiet) / 1_000_000), id -> checkIdle());
      }
    }

    private void cancelFirstTokenTimer() {
      if (firstTokenTimer >= 0) {
        vertx.cancelTimer(firstTokenTimer);
        firstTokenTimer = -1;
      }
    }

    private void stopTimers() {
      cancelFirstTokenTimer();
      if (idleTimer >= 0) {
        vertx.cancelTimer(idleTimer);
        idleTimer = -1;
      }
    }

    private void complete(long lastByteAt) {
      if (over) {
        return;
      }
      over = true;
      stopTimers();
      ctx.onCancel(null);
      ctx.annotateGeneration();
      ctx.end(Phase.GENERATION, lastByteAt);
      done.tryComplete();
    }

    private void fail(ProxyFailure failure) {
      if (over) {
        return;
      }
      over = true;
      stopTimers();
      ctx.onCancel(null);
      if (upstreamRequest != null) {
        // Cancels the upstream's work: on HTTP/1.1 this closes the connection vLLM is writing to.
        upstreamRequest.reset();
      }
      Span span = ctx.span(Phase.GENERATION);
      span.setAttribute(RequestContext.ERROR_TYPE, failure.kind().code());
      ctx.annotateGeneration();
      ctx.end(Phase.GENERATION);
      done.tryFail(failure);
    }
  }

  private static ProxyFailure connectFailure(Throwable t) {
    if (t instanceof ProxyFailure pf) {
      return pf;
    }
    if (t instanceof ConnectTimeoutException) {
      return ProxyFailure.of(
          ProxyFailure.Kind.UPSTREAM_TIMEOUT, "Timed out connecting to the upstream.");
    }
    if (t instanceof ConnectException) {
      return ProxyFailure.of(
          ProxyFailure.Kind.UPSTREAM_UNAVAILABLE, "The upstream refused the connection.");
    }
    return ProxyFailure.of(
        ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
        "The upstream closed the connection before answering.");
  }
}
