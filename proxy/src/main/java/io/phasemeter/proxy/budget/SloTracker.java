package io.phasemeter.proxy.budget;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.NanoClock;
import io.phasemeter.core.Phases;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SloJudgement;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Counts the proxy's verdicts on requests' objectives ({@link ServerObjectives}): {@code
 * llm_slo_requests_total{llm_pool, llm_tenant, budget, result, objective}} and, per budget with
 * {@code slo_ms} and tenant, the attainment over the budget's own window for {@code /admin/stats},
 * counted exactly from the verdicts (no histogram).
 *
 * <p>Every label is bounded: pools and budgets by the configuration, tenants by the allowlist
 * ({@code other} beyond it), objectives by the catalogue. Counters are registered on first use and
 * then found with two map reads and an array index: counting a request allocates nothing.
 */
public final class SloTracker implements RequestObserver, MeterBinder {
  /** The {@code budget} label of a request whose objectives came from its headers only. */
  public static final String NO_BUDGET = "none";

  /** More tenants than this per pool or budget are counted as {@code other}: a guard only. */
  static final int MAX_TENANTS = 256;

  // Objective slots: 0 none (met), 1 error, 2 + Phases ordinal for a missed objective.
  private static final int NONE_SLOT = 0;
  private static final int ERROR_SLOT = 1;
  private static final int SLOTS = 2 + Phases.values().length;

  private final List<ServerObjectives.Entry> entries;
  private final AttainmentWindow[] windows;
  private final int budgetSlots;
  private final Map<String, Map<String, AtomicReferenceArray<Counter>>> counters =
      new ConcurrentHashMap<>();
  private volatile MeterRegistry registry;

  /**
   * @param budgetCount how many budgets the file has (the index of {@link
   *     SloJudgement#budgetIndex()} ranges over them)
   */
  public SloTracker(ServerObjectives objectives, int budgetCount, NanoClock clock) {
    this.entries = objectives.entries();
    this.budgetSlots = budgetCount + 1;
    this.windows = new AttainmentWindow[budgetCount];
    for (ServerObjectives.Entry e : entries) {
      windows[e.index()] = new AttainmentWindow(e.budget().window(), clock::nanoTime, MAX_TENANTS);
    }
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    this.registry = registry;
  }

  @Override
  public void onFinished(RequestContext ctx) {
    SloJudgement j = ctx.slo();
    if (j == null) {
      return;
    }
    String pool = ctx.poolName() == null ? ProxyMetrics.NO_POOL : ctx.poolName();
    String tenant = ctx.tenant();
    int slot = slot(j.objective());
    MeterRegistry r = registry;
    if (r != null) {
      counter(r, pool, tenant, j, slot).increment();
    }
    if (j.budgetIndex() >= 0 && windows[j.budgetIndex()] != null) {
      windows[j.budgetIndex()].record(
          tenant, j.met(), j.met() ? -1 : AttainmentWindow.column(j.objective()));
    }
  }

  private static JsonObject limitsMs(io.phasemeter.core.slo.Objectives objectives) {
    JsonObject out = new JsonObject();
    objectives.limitsMs().forEach(out::put);
    return out;
  }

  // Objective to slot, read without allocating (Phases.fromKey copies the enum's values).
  private static final Map<String, Integer> SLOT_OF;

  static {
    Map<String, Integer> m = new java.util.HashMap<>();
    m.put(SloJudgement.NONE, NONE_SLOT);
    m.put(SloJudgement.ERROR, ERROR_SLOT);
    for (Phases p : Phases.values()) {
      m.put(p.key(), 2 + p.ordinal());
    }
    SLOT_OF = Map.copyOf(m);
  }

  private static int slot(String objective) {
    return SLOT_OF.get(objective);
  }

  private static String objectiveOf(int slot) {
    return switch (slot) {
      case NONE_SLOT -> SloJudgement.NONE;
      case ERROR_SLOT -> SloJudgement.ERROR;
      default -> Phases.values()[slot - 2].key();
    };
  }

  private Counter counter(
      MeterRegistry registry, String pool, String tenant, SloJudgement j, int slot) {
    Map<String, AtomicReferenceArray<Counter>> byTenant = counters.get(pool);
    if (byTenant == null) {
      byTenant = counters.computeIfAbsent(pool, p -> new ConcurrentHashMap<>());
    }
    AtomicReferenceArray<Counter> array = byTenant.get(tenant);
    if (array == null) {
      if (byTenant.size() >= MAX_TENANTS) {
        tenant = RequestContext.OTHER_TENANT;
      }
      array =
          byTenant.computeIfAbsent(tenant, t -> new AtomicReferenceArray<>(budgetSlots * SLOTS));
    }
    int i = (j.budgetIndex() + 1) * SLOTS + slot;
    Counter c = array.get(i);
    if (c == null) {
      // Registering twice returns the same meter, so a race between two threads is harmless.
      c =
          Counter.builder("llm.slo.requests")
              .description(
                  "Requests judged against their per-request objectives: met, or missed and the"
                      + " first objective missed (error for a failure)")
              .tags(
                  "llm.pool",
                  pool,
                  "llm.tenant",
                  tenant,
                  "budget",
                  j.budget() == null ? NO_BUDGET : j.budget(),
                  "result",
                  j.result(),
                  "objective",
                  objectiveOf(slot))
              .register(registry);
      array.set(i, c);
    }
    return c;
  }

  /**
   * Every budget with {@code slo_ms}, for {@code /admin/stats}: per tenant that had a request
   * judged in the budget's window, how many were judged and met, the attainment, the first missed
   * objectives and, with {@code min_attainment}, whether the attainment is below it.
   */
  public JsonArray status() {
    JsonArray out = new JsonArray();
    for (ServerObjectives.Entry e : entries) {
      Budget b = e.budget();
      JsonObject row =
          new JsonObject()
              .put("budget", b.name())
              .put("model", b.model())
              .put("tenant", b.tenant())
              .put("window_s", b.window().toSeconds())
              .put("min_attainment", b.minAttainment())
              .put("objectives_ms", limitsMs(e.objectives()));
      if (e.objectives().isEmpty()) {
        row.put("note", "its objectives are client-side: judged by the load client");
      }
      JsonArray tenants = new JsonArray();
      for (Map.Entry<String, long[]> t : new TreeMap<>(windows[e.index()].sums()).entrySet()) {
        long[] c = t.getValue();
        long judged = c[AttainmentWindow.JUDGED];
        long met = c[AttainmentWindow.MET];
        if (judged == 0) {
          continue;
        }
        double attainment = (double) met / judged;
        JsonObject firstMissed = new JsonObject();
        for (int k = AttainmentWindow.ERROR; k < AttainmentWindow.WIDTH; k++) {
          if (c[k] > 0) {
            firstMissed.put(AttainmentWindow.objective(k), c[k]);
          }
        }
        tenants.add(
            new JsonObject()
                .put("tenant", t.getKey())
                .put("judged", judged)
                .put("met", met)
                .put("attainment", attainment)
                .put("first_missed", firstMissed)
                .put(
                    "attainment_breached",
                    b.minAttainment() == null ? null : attainment < b.minAttainment()));
      }
      out.add(row.put("tenants", tenants));
    }
    return out;
  }
}
