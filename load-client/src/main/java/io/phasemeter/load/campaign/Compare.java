package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Compares two campaigns point by point and metric by metric: B − A with Welch's 95 % interval.
 * Before any figure it compares the recorded conditions; a difference in a guarded one (model,
 * proxy config, pools and limits, slot capacity, any label such as the card) makes the comparison
 * meaningless, so it is refused unless the user names it with {@code --vary} (the thing being
 * compared, e.g. {@code engine}) or passes {@code --force}.
 */
public final class Compare {
  /** Conditions that differ from run to run by nature and say nothing about the setup. */
  private static final List<String> VOLATILE =
      List.of("started_at", "plan_file", "proxy_config_file", "upstream_models.headers.date");

  /**
   * A condition that differs.
   *
   * @param guarded whether it makes the comparison meaningless unless varied on purpose
   */
  record Difference(String key, String a, String b, boolean guarded) {}

  private Compare() {}

  /** Every differing condition, guarded ones first. */
  static List<Difference> differences(JsonNode a, JsonNode b) {
    Map<String, String> fa = new LinkedHashMap<>();
    Map<String, String> fb = new LinkedHashMap<>();
    flatten("", a, fa);
    flatten("", b, fb);
    Set<String> keys = new LinkedHashSet<>(fa.keySet());
    keys.addAll(fb.keySet());
    List<Difference> guarded = new ArrayList<>();
    List<Difference> other = new ArrayList<>();
    for (String k : keys) {
      if (VOLATILE.contains(k) || k.matches("upstream_models\\.body\\.data\\.\\d+\\.created")) {
        continue;
      }
      String va = fa.getOrDefault(k, "(absent)");
      String vb = fb.getOrDefault(k, "(absent)");
      if (!va.equals(vb)) {
        boolean g = Conditions.GUARDED_PREFIXES.stream().anyMatch(k::startsWith);
        (g ? guarded : other).add(new Difference(k, va, vb, g));
      }
    }
    guarded.addAll(other);
    return guarded;
  }

  /**
   * Prints the comparison; returns 0, or 2 when guarded conditions differ without {@code force} or
   * {@code vary} naming them.
   */
  static int run(
      JsonNode a,
      JsonNode b,
      String nameA,
      String nameB,
      Set<String> vary,
      boolean force,
      PrintWriter out) {
    List<Difference> diffs = differences(a.path("conditions"), b.path("conditions"));
    List<Difference> blocking = new ArrayList<>();
    for (Difference d : diffs) {
      boolean varied =
          vary.contains(d.key()) || vary.contains(d.key().replaceFirst("^labels\\.", ""));
      String tag = !d.guarded() ? "note" : varied ? "varied" : force ? "WARNING" : "DIFFERS";
      out.println("phasemeter compare: " + tag + ": " + d.key() + ": A=" + d.a() + "  B=" + d.b());
      if (d.guarded() && !varied) {
        blocking.add(d);
      }
    }
    if (!blocking.isEmpty() && !force) {
      out.println(
          "phasemeter compare: refused: "
              + blocking.size()
              + " guarded condition(s) differ ("
              + String.join(", ", blocking.stream().map(Difference::key).toList())
              + "), so the differences below would mix causes. Name the one you mean to compare"
              + " with --vary KEY (e.g. --vary engine), or pass --force.");
      out.flush();
      return 2;
    }
    out.println("A = " + nameA);
    out.println("B = " + nameB);
    out.println(
        "difference = B − A, Welch 95 % interval; '*' where the interval excludes 0 (n per side"
            + " in brackets)");
    Map<String, JsonNode> pa = points(a);
    Map<String, JsonNode> pb = points(b);
    List<String> metrics = new ArrayList<>();
    a.path("metrics").forEach(m -> metrics.add(m.asText()));
    for (Map.Entry<String, JsonNode> e : pa.entrySet()) {
      JsonNode other = pb.get(e.getKey());
      if (other == null) {
        out.println(e.getKey() + ": only in A");
        continue;
      }
      out.println(e.getKey() + ":");
      for (String m : metrics) {
        Stats.Interval ia = interval(e.getValue().path("metrics").path(m));
        Stats.Interval ib = interval(other.path("metrics").path(m));
        if (ia.n() == 0 || ib.n() == 0) {
          continue;
        }
        Stats.Interval d = Stats.welch(ia, ib);
        boolean sure = Double.isFinite(d.half()) && (d.low() > 0 || d.high() < 0);
        out.println(
            String.format(
                Locale.ROOT,
                "  %-38s A %s [%d]  B %s [%d]  diff %s%s  (%s)%s",
                m,
                CampaignHtml.format(ia),
                ia.n(),
                CampaignHtml.format(ib),
                ib.n(),
                d.mean() >= 0 ? "+" : "",
                CampaignHtml.format(d),
                ia.mean() != 0
                    ? String.format(Locale.ROOT, "%+.1f%%", 100 * d.mean() / ia.mean())
                    : "n/a",
                sure ? " *" : ""));
      }
    }
    for (String id : pb.keySet()) {
      if (!pa.containsKey(id)) {
        out.println(id + ": only in B");
      }
    }
    out.flush();
    return 0;
  }

  private static Map<String, JsonNode> points(JsonNode campaign) {
    Map<String, JsonNode> m = new LinkedHashMap<>();
    campaign.path("points").forEach(p -> m.put(p.path("id").asText(), p));
    return m;
  }

  private static Stats.Interval interval(JsonNode n) {
    double mean = n.path("mean").isNumber() ? n.path("mean").doubleValue() : Double.NaN;
    int count = Double.isFinite(mean) ? n.path("n").asInt(0) : 0;
    double sd = n.path("sd").isNumber() ? n.path("sd").doubleValue() : Double.NaN;
    double t = n.path("t").isNumber() ? n.path("t").doubleValue() : Double.NaN;
    double half =
        n.path("ci95_half_width").isNumber() ? n.path("ci95_half_width").doubleValue() : Double.NaN;
    return new Stats.Interval(count, mean, sd, t, half);
  }

  private static void flatten(String prefix, JsonNode n, Map<String, String> out) {
    if (n.isObject() && n.size() > 0) {
      n.fields()
          .forEachRemaining(
              e ->
                  flatten(
                      prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey(),
                      e.getValue(),
                      out));
    } else if (n.isArray() && n.size() > 0) {
      for (int i = 0; i < n.size(); i++) {
        flatten(prefix + "." + i, n.get(i), out);
      }
    } else {
      out.put(prefix, n.isTextual() ? n.asText() : n.toString());
    }
  }
}
