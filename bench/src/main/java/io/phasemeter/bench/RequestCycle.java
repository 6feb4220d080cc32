package io.phasemeter.bench;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SloJudge;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import io.phasemeter.proxy.pipeline.SyntheticRequest;

/**
 * One non-streamed chat request's life as the pipeline records it, without the network: every phase
 * begun and ended with the attributes its phase class sets, the root finished, the observers told.
 * Run with the SDK tracer and the proxy's observers it is what measuring costs a request; with a
 * no-op tracer and no observers, what {@code telemetry.enabled: false} costs. Driven through the
 * proxy's {@link SyntheticRequest}.
 */
public final class RequestCycle {
  private final NanoClock clock = NanoClock.system();
  private final Tracer tracer;
  private final RequestObserver[] observers;
  private final ProxyConfig.Pool pool;
  private final SpanDeferral deferral;
  private final SloJudge judge;

  /** Phase spans as SDK spans from the start (an embedder's SDK). */
  public RequestCycle(Tracer tracer, RequestObserver... observers) {
    this(tracer, null, observers);
  }

  /**
   * Phase spans deferred by {@code deferral} until the root ends, as the proxy does with its own
   * SDK; null: SDK spans from the start.
   */
  public RequestCycle(Tracer tracer, SpanDeferral deferral, RequestObserver... observers) {
    this(tracer, deferral, null, observers);
  }

  /**
   * As {@link #RequestCycle(Tracer, SpanDeferral, RequestObserver...)}, each request's objectives
   * judged by {@code judge} as the pipeline does (null: none judged).
   */
  public RequestCycle(
      Tracer tracer, SpanDeferral deferral, SloJudge judge, RequestObserver... observers) {
    this.tracer = tracer;
    this.deferral = deferral;
    this.judge = judge;
    this.observers = observers;
    ProxyConfig config = ConfigLoader.defaults();
    this.pool = config.pools().get(0);
  }

  /** Runs one request through every phase and returns its finished context. */
  public RequestContext run() {
    long t = clock.nanoTime();
    SyntheticRequest request = SyntheticRequest.start(clock, tracer, deferral, t, observers);
    RequestContext ctx = request.context();
    Span auth = request.begin(Phase.AUTH, t);
    auth.setAttribute("llm.auth", "disabled");
    request.end(Phase.AUTH);
    request.begin(Phase.RECEIVE);
    request.end(Phase.RECEIVE);
    request.begin(Phase.PREPARE);
    request.prepared("sim-llama", false, 8);
    request.end(Phase.PREPARE);
    request.begin(Phase.ROUTE);
    request.routed("sim-llama", pool);
    request.end(Phase.ROUTE);
    Span queue = request.begin(Phase.QUEUE);
    queue.setAttribute("llm.model", ctx.modelLabel());
    queue.setAttribute("llm.pool", pool.name());
    queue.setAttribute("llm.priority", ctx.priority().label());
    queue.setAttribute("llm.queue.depth_at_entry", 0L);
    queue.setAttribute("llm.queue.outcome", "acquired");
    request.end(Phase.QUEUE);
    Span gen = request.begin(Phase.GENERATION);
    gen.setAttribute("llm.streaming", false);
    gen.setAttribute("gen_ai.request.max_tokens", 8L);
    gen.setAttribute("server.address", "127.0.0.1");
    gen.setAttribute("server.port", 8000L);
    request.attempting(1);
    request.usage(16, 8);
    request.finishedFor("stop");
    request.statusSent(200);
    request.annotateGeneration();
    request.end(Phase.GENERATION);
    request.begin(Phase.WRITE);
    request.end(Phase.WRITE);
    request.finish(clock.nanoTime(), judge);
    for (RequestObserver o : observers) {
      o.onFinished(ctx);
    }
    return ctx;
  }
}
