package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.upstream.UpstreamHost;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientResponse;
import java.util.Locale;

/**
 * One request's generation (see {@link GeneratePhase}): what decides, as Envoy's router does beside
 * its upstream request. It starts the first token's deadline and the attempts ({@link
 * UpstreamAttempts}), judges the head of the upstream's answer and hands its body to the relay that
 * fits it ({@link RawRelay}, {@link EventStreamRelay}, {@link WholeBodyRelay}). It alone ends the
 * exchange, exactly once: {@link #complete} at the upstream's last byte, or {@link #fail}; every
 * part asks {@link #over} before it acts on a late event.
 */
final class UpstreamExchange {
  private final BodyBudget bodies;
  private final RequestContext ctx;
  private final PhaseTimer timer;
  private final Span span;
  private final Promise<Void> done = Promise.promise();
  private final GenerationTimers timers;
  private final UpstreamAttempts attempts;
  // Null unless the client's body goes upstream as it arrives (a streamed pass-through).
  private final StreamedUpload upload;
  private boolean over;
  // Non-null once the upstream reported an error in a 200 response (an error event mid-stream).
  private String upstreamErrorType;

  UpstreamExchange(GeneratePhase phase, RequestContext ctx, UpstreamPool pool, PhaseTimer timer) {
    Vertx vertx = phase.vertx();
    this.bodies = phase.bodies();
    this.ctx = ctx;
    this.timer = timer;
    this.span = timer.span();
    this.timers = new GenerationTimers(vertx, ctx, pool, this);
    this.upload =
        ctx.route().readsBody()
            ? null
            : new StreamedUpload(
                vertx,
                ctx,
                this,
                timers,
                bodies,
                phase.maxBodyBytes(),
                phase.receiveTimeoutNanos());
    this.attempts = new UpstreamAttempts(this, ctx, pool, phase.headers(), upload);
  }

  /** Starts generation; the future completes at its end, or fails with its {@link ProxyFailure}. */
  Future<Void> start() {
    span.setAttribute(SpanAttributes.STREAMING, ctx.streaming());
    if (ctx.maxTokens() >= 0) {
      span.setAttribute(SpanAttributes.GEN_AI_REQUEST_MAX_TOKENS, ctx.maxTokens());
    }
    ctx.onCancel(
        () ->
            fail(
                ctx.bodyFailure() != null
                    ? ctx.bodyFailure()
                    : ctx.cancelledByShutdown()
                        ? ProxyFailure.of(
                            ProxyFailure.Kind.SHUTTING_DOWN, "The proxy cancelled it at shutdown.")
                        : ProxyFailure.of(
                            ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away.")));
    timers.startFirstToken();
    attempts.start();
    return done.future();
  }

  /**
   * {@code host} answered: the head of its response is judged here and the body handed to the relay
   * that fits it.
   */
  void onResponse(UpstreamHost host, HttpClientResponse resp) {
    timers.activity(ctx.now());
    resp.exceptionHandler(
        t ->
            fail(
                ProxyFailure.of(
                    ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
                    "The upstream connection was lost mid-response.")));
    int status = resp.statusCode();
    if (ctx.relaysRaw()) {
      new RawRelay(this, ctx, timers).relay(resp);
      return;
    }
    if (status >= 400) {
      new WholeBodyRelay(this, ctx, timers, bodies)
          .collect(resp, WholeBodyRelay.MAX_ERROR_BODY)
          .onSuccess(body -> onUpstreamError(host, resp, status, body))
          .onFailure(t -> fail(ErrorResponder.classify(t)));
      return;
    }
    if (!plainCoding(resp)) {
      fail(
          ProxyFailure.of(
              ProxyFailure.Kind.UPSTREAM_MALFORMED,
              "The upstream answered with a Content-Encoding; the proxy asked for identity and"
                  + " reads only plain bodies."));
      return;
    }
    String type = resp.getHeader("content-type");
    if (ctx.streaming()) {
      if (type == null || !type.toLowerCase(Locale.ROOT).startsWith("text/event-stream")) {
        fail(
            ProxyFailure.of(
                ProxyFailure.Kind.UPSTREAM_MALFORMED,
                "The upstream answered a streamed request without an event stream."));
        return;
      }
      new EventStreamRelay(this, ctx, timers).relay(resp);
    } else {
      new WholeBodyRelay(this, ctx, timers, bodies).relay(resp);
    }
  }

  private void onUpstreamError(
      UpstreamHost host, HttpClientResponse resp, int status, Buffer body) {
    if (status < 500) {
      // The upstream judged the request itself: pass its answer through unchanged.
      // Its outcome (client_error, upstream_<status>) is the Verdict's to give.
      ctx.passedThrough(status, resp.getHeader("content-type"), body);
      complete(ctx.now());
      return;
    }
    ProxyFailure.Kind kind =
        switch (status) {
          case 503 -> ProxyFailure.Kind.UPSTREAM_OVERLOADED;
          case 504 -> ProxyFailure.Kind.UPSTREAM_TIMEOUT;
          default -> ProxyFailure.Kind.UPSTREAM_ERROR;
        };
    // 502 and 503 say "not now, not here": another upstream may serve it.
    attempts.failed(
        host,
        ProxyFailure.of(kind, "The upstream inference server answered " + status + "."),
        status == 502 || status == 503);
  }

  private void stopTimers() {
    timers.cancelFirstToken();
    if (upload != null) {
      upload.end();
    }
    timers.cancelIdle();
  }

  /**
   * Completes the exchange, once, at {@code lastByteAt}, the upstream's last byte: the attempt ends
   * as a success and the slot is given back.
   */
  void complete(long lastByteAt) {
    if (over) {
      return;
    }
    over = true;
    stopTimers();
    ctx.onCancel(null);
    attempts.completed(upload == null || upload.ended());
    // The upstream is done: its slot goes to the next request now, whatever the client's socket
    // does with the response (a client that never reads must not hold it).
    ctx.releaseSlot();
    if (upstreamErrorType != null) {
      span.setAttribute(SpanAttributes.ERROR_TYPE, ProxyFailure.Kind.UPSTREAM_ERROR.code());
      span.setAttribute(SpanAttributes.UPSTREAM_ERROR_TYPE, upstreamErrorType);
      span.setStatus(io.opentelemetry.api.trace.StatusCode.ERROR);
      ctx.upstreamReportedError(upstreamErrorType);
    }
    ctx.annotateGeneration();
    // The phase ends at the last byte, not when the pipeline hears of it.
    timer.endAt(lastByteAt);
    done.tryComplete();
  }

  /** The phase's span, {@code inference.generate}. */
  Span span() {
    return span;
  }

  /** The type of the error the upstream reported in a 200 response, or null. */
  String upstreamErrorType() {
    return upstreamErrorType;
  }

  /** The upstream reported an error of {@code type} in a 200 response: the request fails. */
  void upstreamErrorType(String type) {
    upstreamErrorType = type;
  }

  /** Whether the exchange has ended: every part checks it before it acts on a late event. */
  boolean over() {
    return over;
  }

  /**
   * Fails the exchange, once: the attempt is abandoned, the slot given back, the timers stopped.
   */
  void fail(ProxyFailure failure) {
    if (over) {
      return;
    }
    over = true;
    stopTimers();
    ctx.onCancel(null);
    attempts.end();
    ctx.releaseSlot();
    span.setAttribute(SpanAttributes.ERROR_TYPE, failure.kind().code());
    ctx.annotateGeneration();
    // Ended by the pipeline as this fails: a failure is the end of generation.
    done.tryFail(failure);
  }

  /** Whether {@code resp}'s body is sent as it is, without a content coding. */
  static boolean plainCoding(HttpClientResponse resp) {
    String coding = resp.getHeader("content-encoding");
    return coding == null || coding.isBlank() || "identity".equalsIgnoreCase(coding.trim());
  }
}
