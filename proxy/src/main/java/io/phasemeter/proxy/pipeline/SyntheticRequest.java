package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;

/**
 * For benchmarks and tests only; the proxy never uses it. A chat request driven through the phases
 * by hand, with no server and no network, so that what is made of a request (spans, records,
 * metrics) can be measured or checked in another module: each method does what the pipeline's chain
 * or the named phase does to a {@link RequestContext}, nothing more.
 */
public final class SyntheticRequest {
  private final RequestContext ctx;

  private SyntheticRequest(RequestContext ctx) {
    this.ctx = ctx;
  }

  /**
   * A chat request started at {@code at} on {@code clock}, traced with {@code tracer}; {@code
   * deferral} null: phase spans are SDK spans from the start, else deferred as the proxy does.
   */
  public static SyntheticRequest start(
      NanoClock clock,
      Tracer tracer,
      SpanDeferral deferral,
      long at,
      RequestObserver... observers) {
    return new SyntheticRequest(
        new RequestContext(
            clock, tracer, observers, null, ApiRoute.CHAT, Context.root(), at, deferral));
  }

  /** Opens {@code phase}'s span at {@code at}, as the chain does. */
  public Span begin(Phase phase, long at) {
    return ctx.begin(phase, at);
  }

  /** Opens {@code phase}'s span now. */
  public Span begin(Phase phase) {
    return ctx.begin(phase);
  }

  /** Ends {@code phase}'s span at {@code at}, as the chain does. */
  public void end(Phase phase, long at) {
    ctx.end(phase, at);
  }

  /** Ends {@code phase}'s span now. */
  public void end(Phase phase) {
    ctx.end(phase);
  }

  /** What prepare records: the model, streamed or not, and {@code max_tokens} (-1: none). */
  public void prepared(String model, boolean stream, long maxTokens) {
    ctx.requested(model, stream);
    ctx.prepared(maxTokens, null, false);
  }

  /** What route records: the configured model name and its pool ({@code pool} may be null). */
  public void routed(String label, ProxyConfig.Pool pool) {
    ctx.routed(label, pool);
  }

  /** What generation records: how many upstreams were tried. */
  public void attempting(int attempts) {
    ctx.attempting(attempts);
  }

  /** What generation records: the usage the upstream reported. */
  public void usage(long inputTokens, long outputTokens) {
    ctx.usage(inputTokens, outputTokens);
  }

  /** What generation records: why the upstream stopped. */
  public void finishedFor(String reason) {
    ctx.finishedFor(reason);
  }

  /** What generation does before it ends: its usage and finish reason onto its span. */
  public void annotateGeneration() {
    ctx.annotateGeneration();
  }

  /** Content chunks as a relay counts them: first and last at, and how many. */
  public void contentSeen(long firstAt, long lastAt, long chunks) {
    ctx.contentSeen(firstAt, lastAt, chunks);
  }

  /** The status the response went out with. */
  public void statusSent(int status) {
    ctx.statusSent(status);
  }

  /** The context, for what the phases read (its public accessors). */
  public RequestContext context() {
    return ctx;
  }

  /** Ends the request at {@code at} (root span, outcome) and returns it; observers not told. */
  public RequestContext finish(long at) {
    ctx.finish(at);
    return ctx;
  }

  /**
   * Ends the request at {@code at} as the pipeline does, its objectives judged by {@code judge}
   * (null: none), and returns it; observers not told.
   */
  public RequestContext finish(long at, SloJudge judge) {
    ctx.finish(at, judge);
    return ctx;
  }
}
