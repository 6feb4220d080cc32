package io.phasemeter.proxy.budget;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The PromQL of a Grafana dashboard, with Grafana's template variables replaced so that each
 * expression can be parsed or evaluated by Prometheus itself.
 */
public final class DashboardQueries {
  /**
   * What each template variable becomes: every model, pool and tenant, one-minute rate windows, an
   * hour's time range.
   */
  public static final Map<String, String> SUBSTITUTIONS;

  static {
    Map<String, String> m = new LinkedHashMap<>();
    // Longer names first, so $__rate_interval is not read as $__rate.
    m.put("$__rate_interval", "1m");
    m.put("$__interval", "1m");
    m.put("$__range", "1h");
    m.put("$model", ".*");
    m.put("$pool", ".*");
    m.put("$tenant", ".*");
    SUBSTITUTIONS = Collections.unmodifiableMap(m);
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  private DashboardQueries() {}

  /** Every target {@code expr} of every panel (rows included), in order, substituted. */
  public static List<String> expressions(Path dashboardJson) throws IOException {
    List<String> out = new ArrayList<>();
    for (Target t : targets(JSON.readTree(dashboardJson.toFile()))) {
      out.add(substitute(t.expr()));
    }
    return out;
  }

  /** Replaces the template variables of {@link #SUBSTITUTIONS} (also in {@code ${name}} form). */
  public static String substitute(String expr) {
    String s = expr;
    for (Map.Entry<String, String> e : SUBSTITUTIONS.entrySet()) {
      String name = e.getKey().substring(1);
      s = s.replace("${" + name + "}", e.getValue()).replace(e.getKey(), e.getValue());
    }
    return s;
  }

  /**
   * One query target of a panel.
   *
   * @param panel the panel's title
   * @param target the target node itself
   * @param expr its PromQL, unsubstituted
   */
  public record Target(String panel, JsonNode target, String expr) {}

  /** Every target that has an {@code expr}, with its panel's title. */
  public static List<Target> targets(JsonNode dashboard) {
    List<Target> out = new ArrayList<>();
    collect(dashboard.path("panels"), out);
    return out;
  }

  private static void collect(JsonNode panels, List<Target> out) {
    for (JsonNode panel : panels) {
      for (JsonNode target : panel.path("targets")) {
        if (target.hasNonNull("expr")) {
          out.add(new Target(panel.path("title").asText(), target, target.get("expr").asText()));
        }
      }
      collect(panel.path("panels"), out);
    }
  }
}
