package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;

/**
 * Finished requests built without a server, for tests of what is made of them (records, metrics):
 * every phase ran for a known time on a hand clock, under a known trace id.
 */
public final class FinishedRequests {
  private FinishedRequests() {}

  /** A context whose span is a sampled remote parent in trace {@code traceId}, as traceparent. */
  public static Context remoteParent(String traceId) {
    return Context.root()
        .with(
            Span.wrap(
                SpanContext.createFromRemoteParent(
                    traceId,
                    "00f067aa0ba902b7",
                    TraceFlags.getSampled(),
                    TraceState.getDefault())));
  }

  /**
   * A successful streamed chat request under {@code traceId} (32 hex digits) whose phases took
   * {@code phaseMillis} each, in pipeline order, one after another; {@code outputTokens} tokens.
   */
  public static RequestContext streamed(
      Tracer tracer, String traceId, long outputTokens, long... phaseMillis) {
    Phase[] phases = Phase.all();
    if (phaseMillis.length != phases.length) {
      throw new IllegalArgumentException("one duration per phase: " + phases.length);
    }
    NanoClock clock = NanoClock.system();
    Context parent = remoteParent(traceId);
    long t = 1_000_000_000L;
    RequestContext ctx =
        new RequestContext(clock, tracer, new RequestObserver[0], null, ApiRoute.CHAT, parent, t);
    for (int i = 0; i < phases.length; i++) {
      ctx.begin(phases[i], t);
      t += phaseMillis[i] * 1_000_000L;
      ctx.end(phases[i], t);
    }
    ctx.requested("sim-llama", true);
    ctx.routed("sim-llama", null);
    ctx.statusSent(200);
    ctx.usage(16, outputTokens);
    ctx.finishedFor("length");
    ctx.contentSeen(t - phaseMillis[phases.length - 1] * 1_000_000L, t, outputTokens);
    ctx.finish(t);
    return ctx;
  }
}
