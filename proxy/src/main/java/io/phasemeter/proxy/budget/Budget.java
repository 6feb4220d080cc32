package io.phasemeter.proxy.budget;

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
 * One budget from budgets.yaml: for requests to {@code model} ({@code "*"} = every model), the
 * {@code quantile} of each phase over {@code window} must stay at or under its limit, the error
 * rate under {@code maxErrorRate}, and (for the load client) the share of joined requests at or
 * above {@code minJoinCoverage}.
 *
 * <p>The compact constructor rejects a bad value with an {@link IllegalArgumentException} whose
 * message starts with the key ({@code limits_ms.quue: unknown phase ...}); {@link Budgets} adds the
 * file and the budget in front of it.
 *
 * @param limitsMs phase key to limit in milliseconds, in the order of the file
 */
public record Budget(
    String name,
    String model,
    double quantile,
    Duration window,
    Map<String, Double> limitsMs,
    double maxErrorRate,
    double minJoinCoverage) {

  /** The model value that means "every model". */
  public static final String ANY_MODEL = "*";

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
    if (limitsMs == null || limitsMs.isEmpty()) {
      throw new IllegalArgumentException(
          "limits_ms: give at least one phase limit, e.g. {queue: 250, ttft: 1200}");
    }
    Map<String, Double> copy = new LinkedHashMap<>();
    for (Map.Entry<String, Double> e : limitsMs.entrySet()) {
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
