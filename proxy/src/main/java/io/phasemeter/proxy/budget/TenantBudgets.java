package io.phasemeter.proxy.budget;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.gateway.TenantAllowlist;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The proxy's start-up checks on budgets that name a tenant (docs/design.md, "Tenants"): the tenant
 * must be one of the proxy's (allowlisted, or {@code other}), and every server-side phase the
 * budget limits must have a histogram with the {@code llm_tenant} label, or its alert rule could
 * not select the tenant's requests. {@code phasemeter alerts} checks only the syntax ({@link
 * Budget}): it does not know the proxy's tenants.
 */
public final class TenantBudgets {
  private TenantBudgets() {}

  /**
   * Whether the histogram of {@code phase} carries {@code llm_tenant}: TTFT, TPOT and the request
   * duration always; the phase histogram only with {@code tenants.phase_histograms}; ITL never.
   */
  public static boolean labelled(BudgetPhase phase, boolean phaseHistograms) {
    return switch (phase.histogram()) {
      case TTFT, TPOT, REQUEST -> true;
      case PHASE -> phaseHistograms;
      case ITL -> false;
    };
  }

  /**
   * The tenants {@code budgets} name besides {@code other}, each with where it is named ({@code
   * budget 'x' (file: budgets[i].tenant)}), for the keys store: a keys file that would drop one is
   * refused.
   */
  public static Map<String, String> needed(Budgets budgets, String source) {
    Map<String, String> out = new LinkedHashMap<>();
    List<Budget> all = budgets.budgets();
    for (int i = 0; i < all.size(); i++) {
      Budget b = all.get(i);
      if (!b.anyTenant() && !b.tenant().equals(TenantAllowlist.OTHER)) {
        out.putIfAbsent(b.tenant(), where(source, i, b) + ".tenant");
      }
    }
    return out;
  }

  /**
   * Refuses a budget whose tenant is not in {@code allowlist} (nor {@code other}), and a tenant
   * budget that limits a server-side phase whose histogram lacks {@code llm_tenant}.
   *
   * @throws ConfigException naming the file, the budget and the key
   */
  public static void check(
      Budgets budgets, String source, TenantAllowlist allowlist, boolean phaseHistograms) {
    List<Budget> all = budgets.budgets();
    for (int i = 0; i < all.size(); i++) {
      Budget b = all.get(i);
      if (b.anyTenant()) {
        continue;
      }
      if (!b.tenant().equals(TenantAllowlist.OTHER) && !allowlist.contains(b.tenant())) {
        throw new ConfigException(
            where(source, i, b)
                + ".tenant: '"
                + b.tenant()
                + "' is not a tenant of this proxy (tenants.names, the keys with"
                + " tenant_metrics: true, or other; allowlisted: "
                + (allowlist.isEmpty() ? "none" : String.join(", ", allowlist.values()))
                + ")");
      }
      for (BudgetPhase p : b.phases()) {
        if (p.serverSide() && !labelled(p, phaseHistograms)) {
          throw new ConfigException(
              where(source, i, b)
                  + ".limits_ms."
                  + p.key()
                  + ": a budget of one tenant can limit "
                  + p.key()
                  + " only where its histogram ("
                  + p.metric()
                  + ") has the llm_tenant label"
                  + (p.histogram() == io.phasemeter.proxy.telemetry.BucketLayout.Metric.ITL
                      ? ", which it never has (limit tpot instead)"
                      : ": set tenants.phase_histograms: true in proxy.yaml (a series per phase"
                          + " and tenant), or limit ttft, tpot or total"));
        }
      }
    }
  }

  private static String where(String source, int i, Budget b) {
    return source + ": budgets[" + i + "] (" + b.name() + ")";
  }
}
