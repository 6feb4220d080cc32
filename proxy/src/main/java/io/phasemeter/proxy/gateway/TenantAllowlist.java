package io.phasemeter.proxy.gateway;

import io.phasemeter.proxy.config.ProxyConfig;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tenants a proxy names (docs/design.md, "Tenants"): {@code tenants.names} with the names of
 * the keys marked {@code tenant_metrics: true}, at most {@link #MAX} values. Every other request is
 * {@link #OTHER}, so the {@code llm_tenant} label has at most {@code MAX + 1} values whatever
 * clients send. Immutable; the key store builds a new one with each keys file it takes.
 */
public final class TenantAllowlist {
  /** The tenant of every request outside the allowlist. */
  public static final String OTHER = ProxyConfig.Tenants.OTHER;

  /** The most values an allowlist holds. */
  public static final int MAX = ProxyConfig.Tenants.MAX_VALUES;

  /** No tenant: every request is {@link #OTHER}. */
  public static final TenantAllowlist EMPTY = new TenantAllowlist(new LinkedHashMap<>());

  // Each value mapped to itself: resolve() hands out the configured instance, never the caller's
  // string (a header's value), so what the metrics and records keep comes from configuration.
  private final Map<String, String> values;

  private TenantAllowlist(LinkedHashMap<String, String> values) {
    this.values = values;
  }

  /** The allowlist of {@code names} alone (auth off: no keys). */
  public static TenantAllowlist of(List<String> names) {
    return new Rules(names, Map.of()).allowlist(List.of());
  }

  /**
   * The configured value equal to {@code value}, or null when it is not allowlisted. Allocates
   * nothing.
   */
  public String resolve(String value) {
    return value == null ? null : values.get(value);
  }

  /** Whether {@code value} is allowlisted ({@link #OTHER} never is). */
  public boolean contains(String value) {
    return resolve(value) != null;
  }

  /** Whether no tenant is allowlisted (every request is {@link #OTHER}). */
  public boolean isEmpty() {
    return values.isEmpty();
  }

  /** The allowlisted values: {@code tenants.names} in order, then the marked keys' names. */
  public List<String> values() {
    return List.copyOf(values.keySet());
  }

  @Override
  public String toString() {
    return "TenantAllowlist" + values.keySet();
  }

  /**
   * What an allowlist is built from besides the keys: {@code tenants.names}, and the tenants that
   * must stay allowlisted ({@code neededBy}: tenant to who needs it, e.g. a budget) so that a keys
   * file that drops one is refused, as any bad keys file is.
   */
  public record Rules(List<String> names, Map<String, String> neededBy) {
    /** No names, nothing needed. */
    public static final Rules NONE = new Rules(List.of(), Map.of());

    public Rules {
      names = List.copyOf(names);
      neededBy = Collections.unmodifiableMap(new LinkedHashMap<>(neededBy));
    }

    /**
     * The allowlist of these names and {@code keys}' marked ones, in file order.
     *
     * @throws IllegalArgumentException naming the key ({@code keys[i].tenant_metrics: …}) past
     *     {@link #MAX} values, or the tenant a keys file would drop that {@code neededBy} names
     */
    public TenantAllowlist allowlist(List<ApiKey> keys) {
      LinkedHashMap<String, String> out = new LinkedHashMap<>();
      for (String n : names) {
        out.put(n, n);
      }
      int marked = 0;
      for (ApiKey k : keys) {
        marked += k.tenantMetrics() ? 1 : 0;
      }
      for (int i = 0; i < keys.size(); i++) {
        ApiKey k = keys.get(i);
        if (!k.tenantMetrics() || out.containsKey(k.name())) {
          continue;
        }
        if (out.size() == MAX) {
          throw new IllegalArgumentException(
              "keys["
                  + i
                  + "].tenant_metrics: '"
                  + k.name()
                  + "' would be tenant "
                  + (MAX + 1)
                  + "; at most "
                  + MAX
                  + " in all (tenants.names: "
                  + names.size()
                  + ", keys with tenant_metrics: true: "
                  + marked
                  + "), each a value of the llm_tenant label");
        }
        out.put(k.name(), k.name());
      }
      for (Map.Entry<String, String> e : neededBy.entrySet()) {
        if (!out.containsKey(e.getKey())) {
          throw new IllegalArgumentException(
              "no key named '"
                  + e.getKey()
                  + "' has tenant_metrics: true and tenants.names does not list it, yet "
                  + e.getValue()
                  + " names that tenant (its budget would judge nothing)");
        }
      }
      return new TenantAllowlist(out);
    }
  }
}
