package io.phasemeter.proxy.budget;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Durations;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.YamlFiles;
import io.phasemeter.proxy.telemetry.BucketLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The budgets of config/budgets.yaml (docs/design.md §6). One file feeds the proxy, the load client
 * and the alert rules; every problem in it becomes a {@link ConfigException} of one line that names
 * the file, the budget and the key.
 */
public record Budgets(List<Budget> budgets) {

  private static final ObjectMapper YAML =
      new ObjectMapper(new YAMLFactory()).enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
  private static final Set<String> KEYS =
      Set.of(
          "name",
          "model",
          "quantile",
          "window",
          "limits_ms",
          "max_error_rate",
          "min_join_coverage",
          "slo_period",
          "slo_ms",
          "min_attainment",
          "tenant");

  public Budgets {
    budgets = List.copyOf(budgets);
    Map<String, Integer> names = new HashMap<>();
    Map<String, Integer> camel = new HashMap<>();
    for (int i = 0; i < budgets.size(); i++) {
      Budget b = budgets.get(i);
      Integer same = names.putIfAbsent(b.name(), i);
      if (same != null) {
        throw new IllegalArgumentException(
            where(i, b.name()) + ".name: already used by budgets[" + same + "]");
      }
      same = camel.putIfAbsent(b.camelName(), i);
      if (same != null) {
        throw new IllegalArgumentException(
            where(i, b.name())
                + ".name: gives the same alert names ("
                + b.camelName()
                + ") as budgets["
                + same
                + "] ("
                + budgets.get(same).name()
                + "); rename one");
      }
    }
    layout(budgets);
  }

  /**
   * The bucket boundaries the proxy's histograms need so that every server-side limit is one
   * (docs/design.md §4): the same budgets always give the same layout.
   */
  public BucketLayout bucketLayout() {
    return layout(budgets);
  }

  /**
   * Every limit in file order, refusing the one that would pass {@link BucketLayout#MAX_EXTRA}
   * extra boundaries on its histogram, naming its budget and key.
   */
  private static BucketLayout layout(List<Budget> budgets) {
    BucketLayout.Builder layout = BucketLayout.builder();
    for (int i = 0; i < budgets.size(); i++) {
      Budget b = budgets.get(i);
      for (BudgetPhase p : b.phases()) {
        if (!p.serverSide()) {
          continue;
        }
        try {
          layout.add(p.histogram(), p.key(), b.limitNanos(p));
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException(
              where(i, b.name()) + ".limits_ms." + p.key() + ": " + e.getMessage());
        }
      }
    }
    return layout.build();
  }

  /** Reads and validates {@code file}. */
  public static Budgets load(Path file) {
    return parse(YamlFiles.readText(file), file.toString());
  }

  /** Parses budgets YAML; {@code sourceName} names it in error messages. */
  public static Budgets parse(String yaml, String sourceName) {
    JsonNode root = YamlFiles.readTree(YAML, yaml, sourceName);
    if (root == null || root.isMissingNode() || root.isNull()) {
      throw new ConfigException(sourceName + ": empty; expected 'budgets:' with a list");
    }
    if (!root.isObject()) {
      throw new ConfigException(sourceName + ": the top level must be a mapping with 'budgets'");
    }
    Iterator<String> top = root.fieldNames();
    while (top.hasNext()) {
      String key = top.next();
      if (!key.equals("budgets")) {
        throw new ConfigException(sourceName + ": " + key + ": unknown key (known: budgets)");
      }
    }
    JsonNode list = root.get("budgets");
    if (list == null || !list.isArray()) {
      throw new ConfigException(sourceName + ": budgets: expected a list of budgets");
    }
    List<Budget> out = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      out.add(budget(list.get(i), i, sourceName));
    }
    try {
      return new Budgets(out);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(sourceName + ": " + e.getMessage());
    }
  }

  /** The budget called {@code name}, or null. */
  public Budget byName(String name) {
    return budgets.stream().filter(b -> b.name().equals(name)).findFirst().orElse(null);
  }

  private static Budget budget(JsonNode node, int index, String source) {
    JsonNode nameNode = node == null ? null : node.get("name");
    String label = nameNode != null && nameNode.isTextual() ? nameNode.asText() : null;
    String at = source + ": " + where(index, label);
    if (node == null || !node.isObject()) {
      throw new ConfigException(at + ": expected a mapping (name, quantile, window, limits_ms…)");
    }
    Iterator<String> fields = node.fieldNames();
    while (fields.hasNext()) {
      String key = fields.next();
      if (!KEYS.contains(key)) {
        throw new ConfigException(
            at + "." + key + ": unknown key (known: " + String.join(", ", sorted(KEYS)) + ")");
      }
    }
    String name = text(node, "name", at, null);
    String model = text(node, "model", at, Budget.ANY_MODEL);
    double quantile = number(node, "quantile", at);
    String windowText = text(node, "window", at, null);
    Duration window;
    try {
      window = Durations.parse(windowText);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(at + ".window: " + e.getMessage());
    }
    JsonNode limitsNode = node.get("limits_ms");
    if (limitsNode == null || limitsNode.isNull()) {
      throw new ConfigException(at + ".limits_ms: missing (e.g. {queue: 250, ttft: 1200})");
    }
    if (!limitsNode.isObject()) {
      throw new ConfigException(
          at + ".limits_ms: expected a mapping of phase to milliseconds, e.g. {queue: 250}");
    }
    Map<String, Double> limits = new LinkedHashMap<>();
    Iterator<Map.Entry<String, JsonNode>> it = limitsNode.fields();
    while (it.hasNext()) {
      Map.Entry<String, JsonNode> e = it.next();
      if (!e.getValue().isNumber()) {
        throw new ConfigException(
            at
                + ".limits_ms."
                + e.getKey()
                + ": expected a number of milliseconds, got '"
                + e.getValue().asText()
                + "'");
      }
      limits.put(e.getKey(), e.getValue().doubleValue());
    }
    Objectives slo = sloMs(node, at);
    String tenant = text(node, "tenant", at, Budget.ANY_TENANT);
    Double minAttainment = null;
    JsonNode attainmentNode = node.get("min_attainment");
    if (attainmentNode != null && !attainmentNode.isNull()) {
      minAttainment = number(node, "min_attainment", at);
    }
    double maxErrorRate = number(node, "max_error_rate", at);
    double minJoinCoverage = number(node, "min_join_coverage", at);
    Duration sloPeriod = null;
    JsonNode periodNode = node.get("slo_period");
    if (periodNode != null && !periodNode.isNull()) {
      sloPeriod = period(text(node, "slo_period", at, null), at);
    }
    try {
      return new Budget(
          name,
          model,
          quantile,
          window,
          limits,
          maxErrorRate,
          minJoinCoverage,
          sloPeriod,
          slo,
          minAttainment,
          tenant);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(at + "." + e.getMessage());
    }
  }

  /**
   * Reads {@code slo_ms}, goodput's per-request objectives, with the load client's parser: one file
   * feeds both ({@link Objectives#NONE} when absent).
   */
  static Objectives sloMs(JsonNode node, String at) {
    JsonNode slo = node.get("slo_ms");
    if (slo == null || slo.isNull()) {
      return Objectives.NONE;
    }
    if (!slo.isObject()) {
      throw new ConfigException(
          at + ".slo_ms: expected a mapping of phase to milliseconds, e.g. {client_ttft: 500}");
    }
    Map<String, Object> entries = new LinkedHashMap<>();
    slo.fields()
        .forEachRemaining(
            e ->
                entries.put(
                    e.getKey(),
                    e.getValue().isNumber() ? e.getValue().numberValue() : e.getValue().asText()));
    try {
      return Objectives.fromSloMs(at + ".slo_ms", entries);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(e.getMessage());
    }
  }

  /** {@code 30d}, or any duration of {@link Durations} ({@code 720h}). */
  private static Duration period(String text, String at) {
    Matcher days = DAYS.matcher(text);
    if (days.matches()) {
      return Duration.ofDays(Long.parseLong(days.group(1)));
    }
    try {
      return Durations.parse(text);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(
          at + ".slo_period: '" + text + "' is not a period (whole days like 30d, or e.g. 720h)");
    }
  }

  private static final Pattern DAYS = Pattern.compile("\\s*(\\d{1,3})\\s*d\\s*");

  private static String where(int index, String name) {
    return "budgets[" + index + "]" + (name == null ? "" : " (" + name + ")");
  }

  private static String text(JsonNode node, String key, String at, String fallback) {
    JsonNode v = node.get(key);
    if (v == null || v.isNull()) {
      if (fallback != null) {
        return fallback;
      }
      throw new ConfigException(at + "." + key + ": missing");
    }
    if (!v.isValueNode()) {
      throw new ConfigException(at + "." + key + ": expected a single value");
    }
    return v.asText();
  }

  private static double number(JsonNode node, String key, String at) {
    JsonNode v = node.get(key);
    if (v == null || v.isNull()) {
      throw new ConfigException(at + "." + key + ": missing");
    }
    if (!v.isNumber()) {
      throw new ConfigException(at + "." + key + ": expected a number, got '" + v.asText() + "'");
    }
    return v.doubleValue();
  }

  private static List<String> sorted(Set<String> keys) {
    return keys.stream().sorted().toList();
  }
}
