package io.phasemeter.load.budget;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Phases;
import io.phasemeter.core.budget.LatencyLimit;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.load.report.PhaseStats;
import io.phasemeter.load.workload.Api;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The budgets file (docs/design.md §6) as the load client judges it: every limited phase,
 * client-side ones included, over the whole run at the budget's quantile, plus the error-rate and
 * join-coverage gates. (The proxy judges the same file live, Prometheus through the rules; this
 * reader is the load client's own because it talks to the proxy only over HTTP.)
 *
 * <p>A latency budget is judged as the proxy and the generated rules judge it: breached when more
 * than {@code 1 − quantile} of the phase's values were above the limit, counted exactly against the
 * limit in whole nanoseconds ({@link #limitsNanos}, {@link PhaseStats#withLimits}) and decided by
 * {@link LatencyLimit#breached}, the proxy's rule too. The quantile is shown beside the verdict; it
 * decides only where no exact counts exist (a merge of runs that had only histograms for the
 * phase).
 */
public final class ClientBudgets {
  /** The keys limits_ms may name, for the error message. */
  private static final List<String> KNOWN_KEYS =
      Arrays.stream(Phases.values())
          .filter(p -> p.canonical().reported())
          .map(Phases::key)
          .toList();

  /**
   * One budget.
   *
   * @param maxErrorRate NaN when the file gives none (then {@code --max-error-rate} judges the run)
   * @param slo goodput's per-request objectives ({@code slo_ms}), {@link Objectives#NONE} when none
   * @param tenant {@code "*"}, or the one tenant the budget covers: the proxy judges such a budget
   *     on that tenant's requests; the load client leaves it out ({@link #tenantBudgets})
   */
  public record Budget(
      String name,
      String model,
      double quantile,
      Map<String, Double> limitsMs,
      double maxErrorRate,
      double minJoinCoverage,
      Objectives slo,
      String tenant) {

    /** Whether the budget covers every tenant's requests (the only ones the load client judges). */
    public boolean anyTenant() {
      return tenant.equals("*");
    }
  }

  private final List<Budget> budgets;
  private final String sha256;

  private ClientBudgets(List<Budget> budgets, String sha256) {
    this.budgets = budgets;
    this.sha256 = sha256;
  }

  /** No budgets. */
  public static ClientBudgets none() {
    return new ClientBudgets(List.of(), null);
  }

  /**
   * Reads {@code file}.
   *
   * @throws IllegalArgumentException with one line naming the file and key
   */
  public static ClientBudgets load(Path file) {
    byte[] bytes;
    try {
      bytes = Files.readAllBytes(file);
    } catch (NoSuchFileException e) {
      throw new IllegalArgumentException(file + ": file not found");
    } catch (IOException e) {
      throw new IllegalArgumentException(file + ": cannot read (" + e.getMessage() + ")");
    }
    JsonNode root;
    try {
      root = new ObjectMapper(new YAMLFactory()).readTree(bytes);
    } catch (IOException e) {
      throw new IllegalArgumentException(file + ": not valid YAML");
    }
    JsonNode list = root == null ? null : root.get("budgets");
    if (list == null || !list.isArray()) {
      throw new IllegalArgumentException(file + ": budgets: a list is required");
    }
    List<Budget> out = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      JsonNode b = list.get(i);
      String where = file + ": budgets[" + i + "]";
      String name = b.path("name").asText("");
      if (name.isBlank()) {
        throw new IllegalArgumentException(where + ".name: required");
      }
      where = where + " (" + name + ")";
      JsonNode qNode = b.get("quantile");
      double q = 0.95;
      if (qNode != null && !qNode.isNull()) {
        q = qNode.isNumber() ? qNode.asDouble() : Double.NaN;
      }
      if (!(q > 0 && q < 1)) {
        throw new IllegalArgumentException(
            where
                + ".quantile: must be a number in (0, 1), e.g. 0.95, got '"
                + qNode.asText()
                + "'");
      }
      Map<String, Double> limits = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = b.path("limits_ms").fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        if (budgetPhase(e.getKey()) == null) {
          throw new IllegalArgumentException(
              where + ".limits_ms." + e.getKey() + ": unknown phase (known: " + KNOWN_KEYS + ")");
        }
        if (!e.getValue().isNumber() || e.getValue().asDouble() <= 0) {
          throw new IllegalArgumentException(
              where + ".limits_ms." + e.getKey() + ": must be a positive number of ms");
        }
        limits.put(e.getKey(), e.getValue().asDouble());
      }
      out.add(
          new Budget(
              name,
              b.path("model").asText("*"),
              q,
              limits,
              share(b, "max_error_rate", where, Double.NaN),
              share(b, "min_join_coverage", where, 0.0),
              sloMs(b, where),
              b.path("tenant").asText("*")));
    }
    return new ClientBudgets(List.copyOf(out), sha256(bytes));
  }

  /**
   * The share (0 to 1) a budget gives at {@code key}, or {@code absent} when it gives none. A
   * number only, as the proxy reads the same file: {@code 5%} is for {@code --max-error-rate}.
   */
  private static double share(JsonNode budget, String key, String where, double absent) {
    JsonNode v = budget.get(key);
    if (v == null || v.isNull()) {
      return absent;
    }
    if (!v.isNumber() || !(v.asDouble() >= 0 && v.asDouble() <= 1)) {
      throw new IllegalArgumentException(
          where
              + "."
              + key
              + ": must be a number from 0 to 1, e.g. 0.05 (the proxy reads this file too: 5% is"
              + " only for --max-error-rate), got '"
              + v.asText()
              + "'");
    }
    return v.asDouble();
  }

  /** A budget's {@code slo_ms}, read by the one parser the proxy's reader uses too. */
  private static Objectives sloMs(JsonNode budget, String where) {
    JsonNode slo = budget.get("slo_ms");
    if (slo == null || slo.isNull()) {
      return Objectives.NONE;
    }
    if (!slo.isObject()) {
      throw new IllegalArgumentException(
          where + ".slo_ms: expected a mapping of phase to milliseconds, e.g. {client_ttft: 500}");
    }
    Map<String, Object> entries = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = slo.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      entries.put(
          e.getKey(), e.getValue().isNumber() ? e.getValue().numberValue() : e.getValue().asText());
    }
    return Objectives.fromSloMs(where + ".slo_ms", entries);
  }

  /**
   * The budget whose {@code slo_ms} gives goodput's objectives for {@code model}, or null when none
   * does: one naming the model exactly before one for every model ({@code "*"}), and the first in
   * the file among those.
   */
  public Budget sloBudget(String model) {
    List<Budget> withSlo = sloBudgets(model);
    return withSlo.stream()
        .filter(b -> b.model().equals(model))
        .findFirst()
        .orElse(withSlo.isEmpty() ? null : withSlo.get(0));
  }

  /**
   * Every budget that applies to {@code model} and gives {@code slo_ms}, in the file's order: more
   * than one, and {@link #sloBudget} takes one and ignores the others (a note names them).
   */
  public List<Budget> sloBudgets(String model) {
    return forModel(model).stream().filter(b -> !b.slo().isEmpty()).toList();
  }

  /**
   * The budgets that apply to {@code model}, of every tenant: a budget of one tenant is the proxy's
   * to judge on that tenant's requests, while a run's requests may be any tenant's.
   */
  public List<Budget> forModel(String model) {
    return budgets.stream()
        .filter(Budget::anyTenant)
        .filter(b -> b.model().equals("*") || b.model().equals(model))
        .toList();
  }

  /** The budgets of one tenant that apply to {@code model}, which the run leaves out. */
  public List<Budget> tenantBudgets(String model) {
    return budgets.stream()
        .filter(b -> !b.anyTenant())
        .filter(b -> b.model().equals("*") || b.model().equals(model))
        .toList();
  }

  /** SHA-256 of the file, for the report's conditions; null without a file. */
  public String sha256() {
    return sha256;
  }

  /**
   * The limits, in whole nanoseconds ({@link LatencyLimit#nanos}), that the budgets for {@code
   * model} put on each phase, by canonical phase key ({@code ttft} counts as {@code server_ttft},
   * {@code total} as {@code server_root}): what {@link PhaseStats#withLimits} must count.
   */
  public Map<String, Set<Long>> limitsNanos(String model) {
    Map<String, Set<Long>> out = new LinkedHashMap<>();
    for (Budget b : forModel(model)) {
      for (Map.Entry<String, Double> e : b.limitsMs().entrySet()) {
        out.computeIfAbsent(canonicalKey(e.getKey()), k -> new TreeSet<>())
            .add(LatencyLimit.nanos(e.getValue()));
      }
    }
    return out;
  }

  /** Where exact counts come from: {@code {atOrBelow, total}}, or null where there are none. */
  @FunctionalInterface
  public interface ExactCounts {
    long[] counts(String phase, long limitNanos);
  }

  /** The latency budgets judged on {@code stats} (exit code 3 territory). */
  public List<BudgetResult> judgeLatency(String model, PhaseStats stats) {
    return judgeLatency(model, stats, stats::limitCounts);
  }

  /**
   * Like {@link #judgeLatency(String, PhaseStats)}, for a run whose API has no such phases as
   * {@code api.notApplicable()} (embeddings: TTFT, TPOT, ITL): a budget on one of them is reported
   * as not applicable, neither held nor breached.
   */
  public List<BudgetResult> judgeLatency(String model, PhaseStats stats, Api api) {
    return notApplicable(judgeLatency(model, stats), api);
  }

  /**
   * {@code results} with every budget on a phase {@code api} does not have replaced by a result
   * that says so.
   */
  public static List<BudgetResult> notApplicable(List<BudgetResult> results, Api api) {
    if (api == null || api.notApplicable().isEmpty()) {
      return results;
    }
    List<BudgetResult> out = new ArrayList<>(results.size());
    for (BudgetResult r : results) {
      boolean gate = r.phase().equals("error_rate") || r.phase().equals("join_coverage");
      out.add(
          !gate && api.notApplicable().contains(canonicalKey(r.phase()))
              ? BudgetResult.notApplicable(
                  r.name(), r.phase(), r.limitMs(), api.notApplicableReason())
              : r);
    }
    return out;
  }

  /**
   * The latency budgets judged on {@code exact} where it has the phase's counts for the limit (the
   * one rule, {@link LatencyLimit#breached}: more than {@code 1 − quantile} of the values above the
   * limit), else on the quantile of {@code stats} compared with the limit; {@code observed} is
   * always the quantile of {@code stats}.
   */
  public List<BudgetResult> judgeLatency(String model, PhaseStats stats, ExactCounts exact) {
    List<BudgetResult> out = new ArrayList<>();
    for (Budget b : forModel(model)) {
      for (Map.Entry<String, Double> e : b.limitsMs().entrySet()) {
        String phase = canonicalKey(e.getKey());
        double observed = stats.quantileMs(phase, b.quantile());
        long[] c = exact.counts(phase, LatencyLimit.nanos(e.getValue()));
        if (c != null) {
          out.add(
              new BudgetResult(
                  b.name(),
                  e.getKey(),
                  e.getValue(),
                  observed,
                  LatencyLimit.breached(b.quantile(), c[0], c[1]),
                  new BudgetResult.Counts(c[0], c[1])));
        } else {
          boolean breached = !Double.isNaN(observed) && observed > e.getValue();
          out.add(new BudgetResult(b.name(), e.getKey(), e.getValue(), observed, breached));
        }
      }
    }
    return out;
  }

  /** The canonical phase key a {@code limits_ms} key names ({@code ttft}: server_ttft). */
  public static String canonicalKey(String key) {
    return budgetPhase(key).canonical().key();
  }

  /**
   * The one definition of a run's error rate: the share of the requests sent that did not succeed
   * (errors, invalid responses and any request that never finished alike); 0 when none was sent.
   */
  public static double errorRate(long sent, long ok) {
    return sent <= 0 ? 0 : (double) Math.max(0, sent - ok) / sent;
  }

  /**
   * Whether a budget for {@code model} gives {@code max_error_rate}: its gates then judge the error
   * rate, and {@code --max-error-rate} does not.
   */
  public boolean limitsErrorRate(String model) {
    return forModel(model).stream().anyMatch(b -> !Double.isNaN(b.maxErrorRate()));
  }

  /**
   * The run's validity gates: error rate (where the budget gives {@code max_error_rate}) and join
   * coverage (exit code 4 territory).
   */
  public List<BudgetResult> judgeGates(
      String model, double errorRate, double joinCoverage, boolean joining) {
    List<BudgetResult> out = new ArrayList<>();
    for (Budget b : forModel(model)) {
      if (!Double.isNaN(b.maxErrorRate())) {
        out.add(
            new BudgetResult(
                b.name(), "error_rate", b.maxErrorRate(), errorRate, errorRate > b.maxErrorRate()));
      }
      if (joining) {
        out.add(
            new BudgetResult(
                b.name(),
                "join_coverage",
                b.minJoinCoverage(),
                joinCoverage,
                joinCoverage < b.minJoinCoverage()));
      }
    }
    return out;
  }

  /**
   * The phase that broke a budget: the phase itself, or for a sum (total, TTFT) the part with the
   * largest value at the same quantile. TTFT's generation part is the time to the first token, so
   * it is bounded by server TTFT minus the other parts.
   */
  public static String culprit(String phase, double quantile, PhaseStats stats) {
    Phases sum = budgetPhase(phase);
    if (sum == null || sum.parts().isEmpty()) {
      return phase;
    }
    String best = phase;
    double bestMs = -1;
    for (Phases part : sum.parts()) {
      double ms = sum.partMs(part, p -> stats.quantileMs(p.key(), quantile));
      if (!Double.isNaN(ms) && ms > bestMs) {
        bestMs = ms;
        best = part.key();
      }
    }
    return best;
  }

  /** Who to page for a breach of {@code phase}: the catalogue's owner. */
  public static String owner(String phase) {
    Phases p = Phases.fromKey(phase).orElse(null);
    return p == null ? "inference pool / model server" : p.owner();
  }

  /**
   * The catalogue entry a {@code limits_ms} key names, or null: every reported phase and the two
   * older names (ttft, total), not the gateway's parts (the load client sees only their sum).
   */
  private static Phases budgetPhase(String key) {
    Phases p = Phases.fromKey(key).orElse(null);
    return p != null && p.canonical().reported() ? p : null;
  }

  private static String sha256(byte[] bytes) {
    try {
      byte[] d = java.security.MessageDigest.getInstance("SHA-256").digest(bytes);
      StringBuilder sb = new StringBuilder();
      for (byte x : d) {
        sb.append(String.format("%02x", x));
      }
      return sb.toString();
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
