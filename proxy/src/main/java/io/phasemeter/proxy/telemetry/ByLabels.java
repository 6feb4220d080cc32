package io.phasemeter.proxy.telemetry;

import io.phasemeter.proxy.gateway.TenantAllowlist;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One value per (model, pool, tenant), made on first use and then found with three map reads and no
 * key object: how the per-request observers reach their meters and series. Models and pools come
 * from configuration ({@code other} and {@code none} included), tenants from the allowlist (at most
 * {@link TenantAllowlist#MAX} and {@code other}), so the number of values is bounded; a null pool
 * is {@link ProxyMetrics#NO_POOL}.
 *
 * <p>A keys file reload may allowlist new names; a tenant dropped from it keeps its values (and its
 * series on {@code /metrics}) until restart, as a Prometheus client keeps any series. So that
 * reloads cannot grow them without end, a (model, pool) holds at most {@link #MAX_TENANTS} tenants;
 * a further one is counted as {@code other}.
 */
final class ByLabels<T> {
  /** The most tenants one (model, pool) holds over the process's life: four allowlists' worth. */
  static final int MAX_TENANTS = 4 * TenantAllowlist.MAX + 1;

  /** Makes the value of one (model, pool, tenant). */
  @FunctionalInterface
  interface Make<T> {
    T make(String model, String pool, String tenant);
  }

  private final Map<String, Map<String, Map<String, T>>> values = new ConcurrentHashMap<>();
  private final Make<T> make;

  /**
   * @param make the value of (model, pool, tenant)
   */
  ByLabels(Make<T> make) {
    this.make = make;
  }

  T get(String model, String pool, String tenant) {
    String p = pool == null ? ProxyMetrics.NO_POOL : pool;
    Map<String, Map<String, T>> byPool = values.get(model);
    if (byPool == null) {
      byPool = values.computeIfAbsent(model, m -> new ConcurrentHashMap<>());
    }
    Map<String, T> byTenant = byPool.get(p);
    if (byTenant == null) {
      byTenant = byPool.computeIfAbsent(p, x -> new ConcurrentHashMap<>());
    }
    T v = byTenant.get(tenant);
    if (v != null) {
      return v;
    }
    String t =
        byTenant.size() < MAX_TENANTS || tenant.equals(TenantAllowlist.OTHER)
            ? tenant
            : TenantAllowlist.OTHER;
    Map<String, T> in = byTenant;
    return in.computeIfAbsent(t, x -> make.make(model, p, x));
  }
}
