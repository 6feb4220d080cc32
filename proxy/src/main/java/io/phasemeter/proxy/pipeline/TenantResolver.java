package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.ApiKey;
import io.phasemeter.proxy.gateway.KeyStore;
import io.phasemeter.proxy.gateway.TenantAllowlist;
import io.vertx.core.MultiMap;

/**
 * A request's tenant (docs/design.md, "Tenants"), decided once, in phase auth: a verified key whose
 * name is allowlisted names it; else {@code tenants.header}'s value when it is exactly an
 * allowlisted value; else {@link RequestContext#OTHER_TENANT}. The value is always the allowlist's
 * own string, so nothing a client sends reaches a label. Allocates nothing.
 */
final class TenantResolver {
  private final String header;
  private final KeyStore keys;
  private final TenantAllowlist fixed;

  /** {@code keys} null: auth is off, and the allowlist is {@code tenants.names} alone. */
  TenantResolver(ProxyConfig.Tenants tenants, KeyStore keys) {
    this.header = tenants.header();
    this.keys = keys;
    this.fixed = keys == null ? TenantAllowlist.of(tenants.names()) : null;
  }

  /**
   * The tenant {@code headers} name before any key is known: {@code tenants.header}'s value when
   * allowlisted, else {@link RequestContext#OTHER_TENANT}. A request refused for its key keeps it.
   */
  String fromHeaders(MultiMap headers) {
    if (header == null) {
      return RequestContext.OTHER_TENANT;
    }
    String named = allowlist().resolve(headers.get(header));
    return named != null ? named : RequestContext.OTHER_TENANT;
  }

  /** The tenant a verified {@code key} names (its name, when allowlisted), or null. */
  String ofKey(ApiKey key) {
    return allowlist().resolve(key.name());
  }

  private TenantAllowlist allowlist() {
    return keys == null ? fixed : keys.tenants();
  }
}
