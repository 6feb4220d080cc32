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
  private final Map<String, UpstreamPool> byName = new HashMap<>();
  private final UpstreamPool first;
  private final Map<String, SlotPool> slotsByPool;

  RoutePhase(List<UpstreamPool> pools, Map<String, SlotPool> slotsByPool) {
    for (UpstreamPool p : pools) {
      byName.put(p.config().name(), p);
      for (String m : p.config().models()) {
        byModel.put(m, new Target(m, p));
      }
    }
    this.first = pools.get(0);
    this.slotsByPool = slotsByPool;
  }

  /**
   * The pool for the request: the route's own, or the first pool for a pass-through that names no
   * model, else the pool of the model its body names. Throws when there is none, or none of it is
   * up.
   */
  UpstreamPool select(RequestContext ctx) {
    ApiRoute route = ctx.route();
    if (route.pool() != null || ctx.model() == null) {
      UpstreamPool pool = route.pool() != null ? byName.get(route.pool()) : first;
      Target known = ctx.model() == null ? null : byModel.get(ctx.model());
      return available(ctx, known != null && known.pool() == pool ? known.label() : "other", pool);
    }
    Target target = byModel.get(ctx.model());
    if (target == null) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.MODEL_NOT_FOUND,
          "The model `"
              + truncate(ctx.model())
              + "` does not exist or you do not have access to it.",
          "model");
    }
    return available(ctx, target.label(), target.pool());
  }

  private static UpstreamPool available(RequestContext ctx, String label, UpstreamPool pool) {
    ctx.routed(label, pool.config());
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
