package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Vertx;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A request's model label is the configured name, not the string parsed from its body: the record
 * store keeps labels by reference for minutes, and a string of each request's own would outlive
 * every young collection (docs/performance.md: it doubled the collector's pauses).
 */
class RoutePhaseLabelTest {
  @Test
  void theLabelIsTheConfiguredStringItself() {
    Vertx vertx = Vertx.vertx();
    try {
      ProxyConfig.Pool config = ConfigLoader.defaults().pools().get(0);
      UpstreamPool pool = new UpstreamPool(vertx, config, NanoClock.system(), null);
      RoutePhase route = new RoutePhase(List.of(pool), Map.of());
      NanoClock clock = NanoClock.system();
      RequestContext ctx =
          new RequestContext(
              clock,
              OpenTelemetry.noop().getTracer("test"),
              new RequestObserver[0],
              null,
              ApiRoute.CHAT,
              Context.root(),
              clock.nanoTime());
      String configured = config.models().get(0);
      // What PreparePhase hands over: an equal string of the request's own.
      ctx.requested(new String(configured.toCharArray()), false);
      try {
        route.select(ctx);
      } catch (ProxyFailure f) {
        // No upstream is up in this test; the label is set before that check.
      }
      assertThat(ctx.modelLabel()).isEqualTo(configured).isSameAs(configured);
      assertThat(ctx.modelLabel()).isNotSameAs(ctx.model());
    } finally {
      vertx.close().await();
    }
  }
}
