package io.phasemeter.proxy.pipeline;

import io.phasemeter.core.slo.Objectives;
import java.util.List;
import java.util.Objects;

/**
 * The proxy's verdict on one request's server-side objectives: the record's {@code slo}, the labels
 * of {@code llm_slo_requests_total} and the root span's {@code llm.slo.*}. Immutable; a request
 * that met its budget's objectives unchanged shares one instance with every other.
 *
 * @param budget the budget whose objectives were used, or null when only headers gave objectives
 * @param budgetIndex the budget's place in the budgets file, or -1 with {@code budget} null
 * @param met whether the request succeeded and every objective held
 * @param objective {@link #NONE} when met, {@link #ERROR} for a counted failure, else the catalogue
 *     key of the first objective that did not hold
 * @param objectives the objectives judged, in order: the budget's server-side ones, header-set
 *     limits in their place, header-added ones after
 * @param missed the keys of every objective that did not hold (above its limit, or with no figure),
 *     in order; empty when met or failed
 * @param overridden the keys a header set
 */
public record SloJudgement(
    String budget,
    int budgetIndex,
    boolean met,
    String objective,
    Objectives objectives,
    List<String> missed,
    List<String> overridden) {

  /** {@link #objective()} of a request that met every objective. */
  public static final String NONE = "none";

  /** {@link #objective()} of a counted failure: no objective was judged. */
  public static final String ERROR = io.phasemeter.core.slo.Verdict.ERROR;

  public SloJudgement {
    Objects.requireNonNull(objective, "objective");
    Objects.requireNonNull(objectives, "objectives");
    missed = List.copyOf(missed);
    overridden = List.copyOf(overridden);
  }

  /** {@code met} or {@code missed}: the {@code result} label and the record's field. */
  public String result() {
    return met ? "met" : "missed";
  }
}
