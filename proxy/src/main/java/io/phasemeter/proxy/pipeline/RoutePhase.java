package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.upstream.UpstreamPool;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Phase {@code route}: picks the pool that serves the requested model and checks that one of its
 * upstreams is available. Which upstream is decided when the slot is granted ({@link
 * GeneratePhase}), so least-in-flight sees the load at the moment the request leaves.
 */
final class RoutePhase {
  private final Map<String, Target> byModel = new HashMap<>();
  private final Map<String, SlotPool> slotsByPool;

  RoutePhase(List<UpstreamPool> pools, Map<String, SlotPool> slotsByPool) {
    for (UpstreamPool p : pools) {
      for (String m : p.config().models()) {
        byModel.put(m, new Target(m, p));
      }
    }
    this.slotsByPool = slotsByPool;
  }

  /** The pool for the request's model; throws when there is none, or none of it is up. */
  UpstreamPool select(RequestContext ctx) {
    Target target = byModel.get(ctx.model());
    if (target == null) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.MODEL_NOT_FOUND,
          "The model `"
              + truncate(ctx.model())
              + "` does not exist or you do not have access to it.",
          "model");
    }
    UpstreamPool pool = target.pool();
    ctx.routed(target.label(), pool.config());
    if (pool.availableCount() == 0) {
      // Queueing for a pool with no live upstream would only turn a fast 503 into a slow one.
      throw ProxyFailure.retryAfter(
          ProxyFailure.Kind.NO_HEALTHY_UPSTREAM,
          "No upstream of pool '" + pool.config().name() + "' is available; retry later.",
          1);
    }
    return pool;
  }

  SlotPool slots(RequestContext ctx) {
    return slotsByPool.get(ctx.poolName());
  }

  /**
   * A configured model and its pool. The label a request carries into metrics and its record is the
   * configured string, not the one parsed from its body, so a record kept for minutes holds nothing
   * of the request's own (the record store keeps labels by reference).
   */
  private record Target(String label, UpstreamPool pool) {}

  private static String truncate(String s) {
    return s.length() > 128 ? s.substring(0, 128) + "…" : s;
  }
}
