package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;

/**
 * A finished streamed request with every phase timed, for the record-rendering benchmark. Lives in
 * the pipeline package because {@link RequestContext} is built only there; benchmark code, not
 * shipped in the proxy.
 */
public final class RecordFixture {
  private RecordFixture() {}

  /** A finished, successful streamed chat request traced with {@code tracer}. */
  public static RequestContext finished(Tracer tracer) {
    NanoClock clock = NanoClock.system();
    long t = clock.nanoTime();
    RequestContext ctx =
        new RequestContext(
            clock, tracer, new RequestObserver[0], null, ApiRoute.CHAT, Context.root(), t);
    long step = 1_000_000;
    for (Phase p : Phase.values()) {
      ctx.begin(p, t);
      t += step;
      ctx.end(p, t);
    }
    ctx.requested("sim-llama", true);
    ctx.routed("sim-llama", null);
    ctx.statusSent(200);
    ctx.usage(512, 64);
    ctx.finishedFor("length");
    ctx.contentSeen(t - 40 * step, t - step, 64);
    ctx.finish(t);
    return ctx;
  }
}
