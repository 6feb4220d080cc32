package io.phasemeter.proxy.telemetry;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiFunction;

/**
 * One value per (model, pool), made on first use and then found with two map reads and no key
 * object: how the per-request observers reach their meters and series. Models and pools come from
 * configuration ({@code other} and {@code none} included), so the number of values is bounded; a
 * null pool is {@link ProxyMetrics#NO_POOL}.
 */
final class ByModelPool<T> {
  private final Map<String, Map<String, T>> values = new ConcurrentHashMap<>();
  private final BiFunction<String, String, T> make;

  /**
   * @param make the value of (model, pool)
   */
  ByModelPool(BiFunction<String, String, T> make) {
    this.make = make;
  }

  T get(String model, String pool) {
    String p = pool == null ? ProxyMetrics.NO_POOL : pool;
    Map<String, T> byPool = values.get(model);
    if (byPool == null) {
      byPool = values.computeIfAbsent(model, m -> new ConcurrentHashMap<>());
    }
    T v = byPool.get(p);
    return v != null ? v : byPool.computeIfAbsent(p, x -> make.apply(model, x));
  }
}
