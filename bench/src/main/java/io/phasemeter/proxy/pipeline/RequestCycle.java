package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;

/**
 * One non-streamed chat request's life as the pipeline records it, without the network: every phase
 * begun and ended with the attributes its phase class sets, the root finished, the observers told.
 * Run with the SDK tracer and the proxy's observers it is what measuring costs a request; with a
 * no-op tracer and no observers, what {@code telemetry.enabled: false} costs. Benchmark code, not
 * shipped in the proxy; lives here because {@link RequestContext} is built only here.
 */
public final class RequestCycle {
  private final NanoClock clock = NanoClock.system();
  private final Tracer tracer;
  private final RequestObserver[] observers;
  private final ProxyConfig.Pool pool;
  private final SpanDeferral deferral;

  /** Phase spans as SDK spans from the start (an embedder's SDK). */
  public RequestCycle(Tracer tracer, RequestObserver... observers) {
    this(tracer, null, observers);
  }

  /**
   * Phase spans deferred by {@code deferral} until the root ends, as the proxy does with its own
   * SDK; null: SDK spans from the start.
   */
  public RequestCycle(Tracer tracer, SpanDeferral deferral, RequestObserver... observers) {
    this.tracer = tracer;
    this.deferral = deferral;
    this.observers = observers;
    ProxyConfig config = ConfigLoader.defaults();
    this.pool = config.pools().get(0);
  }

  /** Runs one request through every phase and returns its finished context. */
  public RequestContext run() {
    long t = clock.nanoTime();
    RequestContext ctx =
        new RequestContext(
            clock, tracer, observers, null, ApiRoute.CHAT, Context.root(), t, deferral);
    Span auth = ctx.begin(Phase.AUTH, t);
    auth.setAttribute("llm.auth", "disabled");
    ctx.end(Phase.AUTH);
    ctx.begin(Phase.RECEIVE);
    ctx.end(Phase.RECEIVE);
    ctx.begin(Phase.PREPARE);
    ctx.requested("sim-llama", false);
    ctx.prepared(8, null, false);
    ctx.end(Phase.PREPARE);
    ctx.begin(Phase.ROUTE);
    ctx.routed("sim-llama", pool);
    ctx.end(Phase.ROUTE);
    Span queue = ctx.begin(Phase.QUEUE);
    queue.setAttribute("llm.model", ctx.modelLabel());
    queue.setAttribute("llm.pool", pool.name());
    queue.setAttribute("llm.priority", ctx.priority().label());
    queue.setAttribute("llm.queue.depth_at_entry", 0L);
    queue.setAttribute("llm.queue.outcome", "acquired");
    ctx.end(Phase.QUEUE);
    Span gen = ctx.begin(Phase.GENERATION);
    gen.setAttribute("llm.streaming", false);
    gen.setAttribute("gen_ai.request.max_tokens", ctx.maxTokens());
    gen.setAttribute("server.address", "127.0.0.1");
    gen.setAttribute("server.port", 8000L);
    ctx.attempting(1);
    ctx.usage(16, 8);
    ctx.finishedFor("stop");
    ctx.statusSent(200);
    ctx.annotateGeneration();
    ctx.end(Phase.GENERATION);
    ctx.begin(Phase.WRITE);
    ctx.end(Phase.WRITE);
    ctx.finish(clock.nanoTime());
    for (RequestObserver o : observers) {
      o.onFinished(ctx);
    }
    return ctx;
  }
}
