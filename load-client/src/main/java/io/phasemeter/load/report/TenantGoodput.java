package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerSlo;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The client's goodput per tenant, the tenant read from each joined record ({@code tenant}), with
 * the proxy's attainment beside it. Bounded: the proxy allows at most {@value #MAX_NAMED} tenant
 * names and {@code other}; names past that (a proxy that does not bound them) count as {@code
 * other}. A request whose record did not join has no tenant. Thread-safe.
 */
final class TenantGoodput {
  /** Named tenants kept; the proxy's own bound on its allowlist. */
  static final int MAX_NAMED = 64;

  /** The proxy's tenant of everything not on its allowlist. */
  static final String OTHER = "other";

  /** One tenant's counts. */
  record Row(String tenant, long sent, long good, long serverJudged, long serverMet) {
    /** good ÷ sent; NaN when none. */
    double attainment() {
      return sent == 0 ? Double.NaN : (double) good / sent;
    }

    /** The proxy's met ÷ judged; NaN when it judged none. */
    double serverAttainment() {
      return serverJudged == 0 ? Double.NaN : (double) serverMet / serverJudged;
    }
  }

  private final Map<String, long[]> byTenant = new LinkedHashMap<>();
  private int named;
  private long folded;

  /** Counts one finished request the client judged {@code v}; nothing without a tenant. */
  synchronized void add(Pair p, Verdict v) {
    String tenant = p.joined() ? p.server().tenant() : null;
    if (tenant == null) {
      return;
    }
    long[] c = byTenant.get(tenant);
    if (c == null) {
      if (!tenant.equals(OTHER) && named >= MAX_NAMED) {
        folded++;
        tenant = OTHER;
        c = byTenant.get(OTHER);
      } else if (!tenant.equals(OTHER)) {
        named++;
      }
      if (c == null) {
        c = new long[4];
        byTenant.put(tenant, c);
      }
    }
    c[0]++;
    if (v.good()) {
      c[1]++;
    }
    ServerSlo s = p.server().slo();
    if (s != null) {
      c[2]++;
      if (s.met()) {
        c[3]++;
      }
    }
  }

  /** Whether any record carried a tenant. */
  synchronized boolean any() {
    return !byTenant.isEmpty();
  }

  /** Every tenant seen, by name, {@code other} last. */
  synchronized List<Row> rows() {
    Map<String, long[]> sorted = new TreeMap<>(byTenant);
    long[] other = sorted.remove(OTHER);
    List<Row> out = new ArrayList<>();
    sorted.forEach((k, c) -> out.add(new Row(k, c[0], c[1], c[2], c[3])));
    if (other != null) {
      out.add(new Row(OTHER, other[0], other[1], other[2], other[3]));
    }
    return out;
  }

  /** Requests whose tenant was past the bound and counted as {@code other}. */
  synchronized long folded() {
    return folded;
  }

  /**
   * summary.json's {@code goodput.by_tenant}, and {@code by_tenant_unattributed}: requests sent
   * that no joined record named a tenant for (not joined, or still in flight at the end).
   */
  void write(ObjectNode goodput, long sent) {
    ObjectNode o = goodput.putObject("by_tenant");
    long attributed = 0;
    for (Row r : rows()) {
      ObjectNode t = o.putObject(r.tenant());
      t.put("sent", r.sent());
      t.put("good", r.good());
      num(t, "attainment", r.attainment());
      t.put("server_judged", r.serverJudged());
      t.put("server_met", r.serverMet());
      num(t, "server_attainment", r.serverAttainment());
      attributed += r.sent();
    }
    goodput.put("by_tenant_unattributed", Math.max(0, sent - attributed));
    long f = folded();
    if (f > 0) {
      goodput.put(
          "by_tenant_note",
          f
              + " requests of tenants past the first "
              + MAX_NAMED
              + " named are counted under other");
    }
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }
}
