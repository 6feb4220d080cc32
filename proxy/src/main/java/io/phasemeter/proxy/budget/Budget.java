package io.phasemeter.proxy.budget;

import io.phasemeter.core.budget.LatencyLimit;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.telemetry.BucketLayout;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * One budget from budgets.yaml: for requests to {@code model} ({@code "*"} = every model) from
 * {@code tenant} ({@code "*"} = every tenant), the {@code quantile} of each phase over {@code
 * window} must stay at or under its limit, the error rate under {@code maxErrorRate}, and (for the
 * load client) the share of joined requests at or above {@code minJoinCoverage}; with {@code slo},
 * each request is judged against goodput's per-request objectives, and the share that met them all
 * over {@code window} is its attainment, whose target is {@code minAttainment}.
 *
 * <p>The compact constructor rejects a bad value with an {@link IllegalArgumentException} whose
 * message starts with the key ({@code limits_ms.quue: unknown phase ...}); {@link Budgets} adds the
 * file and the budget in front of it.
 *
 * <p>A limit holds when at most {@code 1 − quantile} of the requests took longer than it; see
 * {@link LatencyLimit#breached}, the one definition that the live verdict, the alert rules and the
 * load client share.
 *
 * @param tenant {@code "*"} (every tenant) or one tenant value (docs/design.md, "Tenants")
 * @param limitsMs phase key to limit in milliseconds, in the order of the file; may be empty when
 *     {@code slo} is not (a budget of per-request objectives only)
 * @param sloPeriod the error budget period ({@code slo_period}), or null: with one, the alert rules
 *     are multi-window, multi-burn-rate ones over the period's budget; without, one rule over
 *     {@code window}
 * @param slo goodput's per-request objectives ({@code slo_ms}), {@link Objectives#NONE} when none:
 *     the proxy judges those it measures itself ({@link Objectives#judgedByProxy()}), the load
 *     client all of them
 * @param minAttainment the attainment target ({@code min_attainment}), a share in (0, 1), or null
 *     (no target: the attainment is shown without a verdict); only with {@code slo}
 */
public record Budget(
    String name,
    String model,
    String tenant,
    double quantile,
    Duration window,
    Map<String, Double> limitsMs,
    double maxErrorRate,
    double minJoinCoverage,
    Duration sloPeriod,
    Objectives slo,
    Double minAttainment) {

  /** The model value that means "every model". */
  public static final String ANY_MODEL = "*";

  /** The tenant value that means "every tenant". */
  public static final String ANY_TENANT = "*";

  // A tenant value: an allowlisted name (part of the tenants' contract) or "other".
  private static final Pattern TENANT = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

  /** The shortest error budget period: its scaled fast-burn windows stay a minute or longer. */
  public static final Duration MIN_SLO_PERIOD = Duration.ofDays(7);

  /** The longest error budget period. */
  public static final Duration MAX_SLO_PERIOD = Duration.ofDays(366);

  /** The fastest burn rate an alert uses (AlertRules): the allowed share times it must stay < 1. */
  static final BigDecimal FASTEST_BURN = new BigDecimal("14.4");

  private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9_.-]*");

  public Budget {
    if (name == null || !NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "name: '"
              + name
              + "' is not a budget name (lower-case letters, digits, _ . -; starting with a letter or digit)");
    }
    if (model == null || model.isBlank()) {
      throw new IllegalArgumentException("model: must be \"*\" or a configured model name");
    }
    if (model.chars().anyMatch(Character::isISOControl)) {
      throw new IllegalArgumentException("model: must not contain control characters");
    }
    if (tenant == null) {
      tenant = ANY_TENANT;
    }
    if (!tenant.equals(ANY_TENANT) && !TENANT.matcher(tenant).matches()) {
      throw new IllegalArgumentException(
          "tenant: '"
              + tenant
              + "' is not \"*\" (every tenant) or a tenant (1 to 64 letters, digits, _ . -)");
    }
    slo = slo == null ? Objectives.NONE : slo;
    if (!(quantile > 0 && quantile < 1)) {
      throw new IllegalArgumentException(
          "quantile: " + quantile + " is not between 0 and 1 (exclusive), e.g. 0.95");
    }
    Objects.requireNonNull(window, "window");
    if (window.compareTo(Duration.ofSeconds(1)) < 0) {
      throw new IllegalArgumentException(
          "window: must be at least 1s (a rate over a shorter window says nothing)");
    }
    if (window.toNanos() % 1_000_000 != 0) {
      throw new IllegalArgumentException("window: must be a whole number of milliseconds");
    }
    if ((limitsMs == null || limitsMs.isEmpty()) && slo.isEmpty()) {
      throw new IllegalArgumentException(
          "limits_ms: give at least one phase limit, e.g. {queue: 250, ttft: 1200}, or per-request"
              + " objectives in slo_ms, e.g. {server_ttft: 500}, or both");
    }
    Map<String, Double> copy = new LinkedHashMap<>();
    for (Map.Entry<String, Double> e :
        (limitsMs == null ? Map.<String, Double>of() : limitsMs).entrySet()) {
      String key = e.getKey();
      if (BudgetPhase.fromKey(key).isEmpty()) {
        throw new IllegalArgumentException(
            "limits_ms." + key + ": unknown phase (known: " + BudgetPhase.knownKeys() + ")");
      }
      Double v = e.getValue();
      if (v == null || !(v > 0) || v.isInfinite()) {
        throw new IllegalArgumentException(
            "limits_ms." + key + ": " + v + " is not a positive number of milliseconds");
      }
      copy.put(key, v);
    }
    limitsMs = Collections.unmodifiableMap(copy);
    if (!(maxErrorRate >= 0 && maxErrorRate <= 1)) {
      throw new IllegalArgumentException(
          "max_error_rate: " + maxErrorRate + " is not a share between 0 and 1, e.g. 0.01");
    }
    if (!(minJoinCoverage >= 0 && minJoinCoverage <= 1)) {
      throw new IllegalArgumentException(
          "min_join_coverage: " + minJoinCoverage + " is not a share between 0 and 1, e.g. 0.95");
    }
    for (Map.Entry<String, Double> e : limitsMs.entrySet()) {
      if (LatencyLimit.nanos(e.getValue()) < 1) {
        throw new IllegalArgumentException(
            "limits_ms." + e.getKey() + ": " + e.getValue() + " is under a nanosecond");
      }
    }
    if (minAttainment != null) {
      if (slo.isEmpty()) {
        throw new IllegalArgumentException(
            "min_attainment: needs slo_ms (the attainment is the share of requests that met every"
                + " objective of slo_ms)");
      }
      if (!(minAttainment > 0 && minAttainment < 1)) {
        throw new IllegalArgumentException(
            "min_attainment: "
                + minAttainment
                + " is not a share between 0 and 1 (exclusive), e.g. 0.99");
      }
    }
    if (sloPeriod != null) {
      if (sloPeriod.compareTo(MIN_SLO_PERIOD) < 0 || sloPeriod.compareTo(MAX_SLO_PERIOD) > 0) {
        throw new IllegalArgumentException(
            "slo_period: must be between 7d and 366d (the burn-rate windows scale with it: 30d"
                + " gives the SRE workbook's 5m/1h, 30m/6h and 6h/3d)");
      }
      if (sloPeriod.toMinutes() * 60_000_000_000L != sloPeriod.toNanos()) {
        throw new IllegalArgumentException("slo_period: must be a whole number of minutes");
      }
      if (!fastBurnCanFire(allowedShareAbove(quantile))) {
        throw new IllegalArgumentException(
            "slo_period: quantile "
                + quantile
                + " allows "
                + allowedShareAbove(quantile).movePointRight(2).stripTrailingZeros().toPlainString()
                + "% above a limit; the fast-burn alert (14.4 x that) could never fire: use a"
                + " quantile of at least 0.9306 or leave slo_period out");
      }
    }
    if (minAttainment != null && sloPeriod != null) {
      if (!fastBurnCanFire(BigDecimal.ONE.subtract(bd(minAttainment)))) {
        throw new IllegalArgumentException(
            "min_attainment: "
                + minAttainment
                + " allows "
                + BigDecimal.ONE
                    .subtract(bd(minAttainment))
                    .movePointRight(2)
                    .stripTrailingZeros()
                    .toPlainString()
                + "% of requests to miss; with slo_period the fast-burn alert (14.4 x that) could"
                + " never fire: use a min_attainment of at least 0.9306 or leave slo_period out");
      }
    }
  }

  /**
   * Whether the fast-burn alert can fire for a budget that allows {@code allowedShare} of the
   * requests to break it: the allowed share times the fastest burn rate must stay under 1.
   */
  private static boolean fastBurnCanFire(BigDecimal allowedShare) {
    return FASTEST_BURN.multiply(allowedShare).compareTo(BigDecimal.ONE) < 0;
  }

  private static BigDecimal bd(double v) {
    return BigDecimal.valueOf(v);
  }

  /**
   * The share of judged requests allowed to miss an objective, {@code 1 − min_attainment}, exactly
   * (0.99: 0.01): the error budget of the attainment alerts.
   *
   * @throws IllegalStateException when the budget has no {@code min_attainment}
   */
  public BigDecimal allowedMissedShare() {
    if (minAttainment == null) {
      throw new IllegalStateException(name + " has no min_attainment");
    }
    return BigDecimal.ONE.subtract(bd(minAttainment));
  }

  /**
   * A budget of phase limits only, for every tenant, without per-request objectives (the budgets
   * file before {@code tenant}, {@code slo_ms} and {@code min_attainment} reached this record).
   */
  public Budget(
      String name,
      String model,
      double quantile,
      Duration window,
      Map<String, Double> limitsMs,
      double maxErrorRate,
      double minJoinCoverage,
      Duration sloPeriod) {
    this(
        name,
        model,
        ANY_TENANT,
        quantile,
        window,
        limitsMs,
        maxErrorRate,
        minJoinCoverage,
        sloPeriod,
        Objectives.NONE,
        null);
  }

  /** The share of requests a limit allows above it, {@code 1 − quantile}, exactly (0.95: 0.05). */
  public BigDecimal allowedShareAbove() {
    return allowedShareAbove(quantile);
  }

  private static BigDecimal allowedShareAbove(double quantile) {
    return BigDecimal.ONE.subtract(BigDecimal.valueOf(quantile));
  }

  /**
   * The budget's verdict on one phase, from counts: breached when the share of values above the
   * limit is more than {@code 1 − quantile} ({@link LatencyLimit#breached}, the one definition,
   * which the generated rules and the load client's verdict share).
   */
  public boolean breached(long atOrBelow, long total) {
    return LatencyLimit.breached(quantile, atOrBelow, total);
  }

  /** Whether alerts for this budget burn an error budget ({@code slo_period} is set). */
  public boolean burnRates() {
    return sloPeriod != null;
  }

  /** The limit of {@code phase} in whole nanoseconds: its bucket boundary (BucketLayout). */
  public long limitNanos(BudgetPhase phase) {
    return LatencyLimit.nanos(limitMs(phase));
  }

  /** The {@code le} label of {@code phase}'s limit, as {@code /metrics} prints it. */
  public String le(BudgetPhase phase) {
    return BucketLayout.le(limitNanos(phase));
  }

  /** The PromQL matcher of {@code phase}'s limit bucket ({@link BucketLayout#leMatcher}). */
  public String leMatcher(BudgetPhase phase) {
    return BucketLayout.leMatcher(limitNanos(phase));
  }

  /** Whether this budget applies to every tenant. */
  public boolean anyTenant() {
    return ANY_TENANT.equals(tenant);
  }

  /** Whether this budget applies to a request for {@code model} from {@code tenant}. */
  public boolean matches(String model, String tenant) {
    return (anyModel() || this.model.equals(model)) && (anyTenant() || this.tenant.equals(tenant));
  }

  /** Whether this budget gives per-request objectives ({@code slo_ms}). */
  public boolean hasSlo() {
    return !slo.isEmpty();
  }

  /** Whether this budget applies to every model. */
  public boolean anyModel() {
    return ANY_MODEL.equals(model);
  }

  /** The limit of {@code phase} in milliseconds, or null when this budget does not limit it. */
  public Double limitMs(BudgetPhase phase) {
    return limitsMs.get(phase.key());
  }

  /** The limited phases in file order. */
  public List<BudgetPhase> phases() {
    List<BudgetPhase> out = new ArrayList<>();
    for (String key : limitsMs.keySet()) {
      out.add(BudgetPhase.fromKey(key).orElseThrow());
    }
    return out;
  }

  /** The budget name in CamelCase, for alert names ({@code chat-interactive}: ChatInteractive). */
  public String camelName() {
    return camelCase(name);
  }

  static String camelCase(String text) {
    StringBuilder sb = new StringBuilder();
    for (String part : text.split("[-_.]+")) {
      if (!part.isEmpty()) {
        sb.append(part.substring(0, 1).toUpperCase(Locale.ROOT)).append(part.substring(1));
      }
    }
    return sb.toString();
  }
}
