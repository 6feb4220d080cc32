package io.phasemeter.proxy.upstream;

import java.util.Locale;

/**
 * Why a pool chose the upstream it sent a request to: the {@code llm.route.reason} span attribute,
 * the record's {@code route_reason} and the {@code reason} label of {@code
 * llm_route_decisions_total}. A closed set, so every label stays bounded.
 */
public enum RouteReason {
  /** {@code routing: least_loaded}: fewest requests in flight relative to the upstream's slots. */
  LEAST_LOADED,
  /** {@code routing: engine_load}: the lowest score from the engine's own {@code /metrics}. */
  ENGINE_LOAD,
  /**
   * {@code routing: engine_load}, but the chosen upstream had no fresh scrape (it failed, timed out
   * or is older than three intervals): it was scored as {@code least_loaded} would score it.
   */
  ENGINE_LOAD_FALLBACK,
  /** One upstream could take the request (the others down, ejected or already tried): no choice. */
  ONLY_AVAILABLE;

  private static final RouteReason[] ALL = values();

  private final String word = name().toLowerCase(Locale.ROOT);

  /** The lower_snake word used in spans, records and labels. */
  public String word() {
    return word;
  }

  /** Every reason, in declaration order (a shared array: do not modify). */
  static RouteReason[] all() {
    return ALL;
  }
}
