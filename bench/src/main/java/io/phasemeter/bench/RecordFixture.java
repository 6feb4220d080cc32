package io.phasemeter.bench;

import io.opentelemetry.api.trace.Tracer;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.SyntheticRequest;

/**
 * A finished streamed request with every phase timed, for the record-rendering benchmark; built
 * through the proxy's {@link SyntheticRequest}.
 */
public final class RecordFixture {
  private RecordFixture() {}

  /** A finished, successful streamed chat request traced with {@code tracer}. */
  public static RequestContext finished(Tracer tracer) {
    NanoClock clock = NanoClock.system();
    long t = clock.nanoTime();
    SyntheticRequest request = SyntheticRequest.start(clock, tracer, null, t);
    long step = 1_000_000;
    for (Phase p : Phase.values()) {
      request.begin(p, t);
      t += step;
      request.end(p, t);
    }
    request.prepared("sim-llama", true, -1);
    request.routed("sim-llama", null);
    request.statusSent(200);
    request.usage(512, 64);
    request.finishedFor("length");
    request.contentSeen(t - 40 * step, t - step, 64);
    return request.finish(t);
  }
}
