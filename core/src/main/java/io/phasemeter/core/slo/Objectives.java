package io.phasemeter.core.slo;

import io.phasemeter.core.Durations;
import io.phasemeter.core.Phases;
import io.phasemeter.core.budget.LatencyLimit;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * The per-request objectives of goodput (DistServe's definition, as vLLM's {@code --goodput}): a
 * request is <em>good</em> when it succeeded and every objective held for it. The one definition
 * that the load client judges its requests by and the proxy will judge its server-side objectives
 * by (docs/design.md, "Goodput").
 *
 * <p>Conventions of {@link #judge}:
 *
 * <ul>
 *   <li>A request that failed is never good; no objective is judged for it and its first missed
 *       objective is {@link Verdict#ERROR}.
 *   <li>An objective holds when the request's value is at or below its limit, compared in whole
 *       nanoseconds.
 *   <li>TPOT of a request with at most one output token is 0 (vLLM's convention), so it holds; a
 *       {@link Figures} gives 0 there, not an absent value.
 *   <li>An absent figure (a server-side or joined figure such as {@code queue}, {@code
 *       network_envelope} or {@code server_ttft} of a request that was not joined) is never taken
 *       as held: the request is not good, and the objective counts it as <em>unjudged</em>.
 * </ul>
 *
 * <p>Two spellings. On the command line and in a campaign plan ({@link #parse(String, String)},
 * {@link #parse(String, Map)}): vLLM's names {@code ttft} (= {@code client_ttft}), {@code tpot} and
 * {@code e2el} (= {@code client_total}) or any catalogue name, {@code =} or {@code :}, a limit with
 * a unit ({@code 500ms}, {@code 10s}) or a bare number of milliseconds ({@code ttft:500}, as
 * vLLM's). In a budget's {@code slo_ms} ({@link #fromSloMs}): catalogue names only, numbers of
 * milliseconds; {@code ttft} and {@code total} are refused there, since in {@code limits_ms} they
 * mean the server's figures.
 *
 * @param list the objectives in the order given: {@link Verdict#firstMissed()} follows it
 */
public record Objectives(List<Objective> list) {

  /** No objective: every request that succeeded is good. */
  public static final Objectives NONE = new Objectives(List.of());

  /** vLLM's names on the command line, and the catalogue figure each means. */
  private static final Map<String, Phases> VLLM_NAMES =
      Map.of("ttft", Phases.CLIENT_TTFT, "tpot", Phases.TPOT, "e2el", Phases.CLIENT_TOTAL);

  /** The largest limit: a day (a request that runs longer is not interactive anyway). */
  private static final long MAX_NANOS = Duration.ofDays(1).toNanos();

  private static final Pattern BARE_NUMBER = Pattern.compile("^\\s*\\d+(?:\\.\\d+)?\\s*$");

  public Objectives {
    list = List.copyOf(list);
    Set<Phases> seen = new HashSet<>();
    for (Objective o : list) {
      if (!seen.add(o.phase())) {
        throw new IllegalArgumentException(o.key() + ": given twice");
      }
    }
  }

  /** Whether an objective can be set on {@code phase}: one value per request, a service figure. */
  public static boolean accepts(Phases phase) {
    return phase.canonical() == phase
        && phase.reported()
        && phase != Phases.ITL
        && phase != Phases.SCHEDULE_LAG
        // transport_setup's parts exist only for the requests that opened a connection.
        && phase != Phases.DNS
        && phase != Phases.CONNECT
        && phase != Phases.TLS;
  }

  /** The catalogue names an objective can be set on, in report order. */
  public static List<String> catalogueNames() {
    return Arrays.stream(Phases.values())
        .filter(Objectives::accepts)
        .map(Phases::key)
        .collect(Collectors.toUnmodifiableList());
  }

  /**
   * Whether the proxy judges an objective on {@code phase} itself, on its own clock: its root and
   * time to first token ({@code server_root}, {@code server_ttft}), its TPOT, and its own phases
   * ({@code gateway}, {@code receive}, {@code queue}, {@code generation}, {@code write}, {@code
   * unattributed}). Client-side, joined and engine figures ({@code client_*}, {@code
   * network_envelope}, {@code transport_setup}, {@code engine_queue}, {@code prefill}, {@code
   * decode}, …) are left to the load client: the proxy either cannot see them or sees them only
   * when the engine's span arrives, after the request's record (docs/design.md, "Server-side
   * goodput").
   */
  public static boolean judgedByProxy(Phases phase) {
    if (!accepts(phase)) {
      return false;
    }
    return phase.source() == Phases.Source.PIPELINE
        || phase.source() == Phases.Source.PROXY
        || phase == Phases.TPOT;
  }

  /** The objectives {@link #judgedByProxy}, in order; this instance when that is all of them. */
  public Objectives judgedByProxy() {
    List<Objective> kept = list.stream().filter(o -> judgedByProxy(o.phase())).toList();
    return kept.size() == list.size() ? this : new Objectives(kept);
  }

  /**
   * These objectives without those on {@code phases}: the figures a request cannot have (a response
   * not streamed has no first token and no gaps between tokens to time).
   */
  public Objectives without(Phases... phases) {
    List<Phases> drop = List.of(phases);
    List<Objective> kept = list.stream().filter(o -> !drop.contains(o.phase())).toList();
    return kept.size() == list.size() ? this : new Objectives(kept);
  }

  /**
   * These objectives with {@code others} applied in their order: each one replaces the limit of the
   * objective on the same figure, in its place, or is added at the end.
   */
  public Objectives overriddenBy(Objectives others) {
    if (others.isEmpty()) {
      return this;
    }
    List<Objective> out = new ArrayList<>(list);
    for (Objective o : others.list) {
      int at = -1;
      for (int i = 0; i < out.size(); i++) {
        if (out.get(i).phase() == o.phase()) {
          at = i;
          break;
        }
      }
      if (at >= 0) {
        out.set(at, o);
      } else {
        out.add(o);
      }
    }
    return new Objectives(out);
  }

  /**
   * Parses the command-line form {@code ttft=500ms,tpot=50ms,e2el=10s} ({@code --slo}); the
   * objectives may also be separated by spaces, as vLLM's {@code --goodput ttft:500 tpot:50}.
   *
   * @param flag the flag or key, named in every error
   * @throws IllegalArgumentException one line naming {@code flag}, the objective and the known
   *     names
   */
  public static Objectives parse(String flag, String text) {
    if (text == null || text.isBlank()) {
      throw new IllegalArgumentException(
          flag + ": give objectives such as ttft=500ms,tpot=50ms,e2el=10s");
    }
    Map<String, Object> entries = new LinkedHashMap<>();
    String joined = text.trim().replaceAll("\\s*([=:])\\s*", "$1");
    for (String part : joined.split("\\s*,\\s*|\\s+", -1)) {
      String item = part.trim();
      int eq = firstOf(item, '=', ':');
      if (eq <= 0 || eq == item.length() - 1) {
        throw new IllegalArgumentException(
            flag
                + ": '"
                + item
                + "' is not name=limit (e.g. ttft=500ms, tpot:50, e2el=10s; a bare number is"
                + " milliseconds)");
      }
      String name = item.substring(0, eq).trim();
      if (entries.containsKey(name)) {
        throw new IllegalArgumentException(flag + ": " + name + ": given twice");
      }
      entries.put(name, item.substring(eq + 1).trim());
    }
    return build(entries, name -> flag + ": " + name);
  }

  /**
   * Parses the map form of a campaign plan ({@code slo: {ttft: 500ms, tpot: 50}}): the names and
   * values of {@link #parse(String, String)}, a number meaning milliseconds.
   *
   * @param where the file and key, named in every error
   */
  public static Objectives parse(String where, Map<String, ?> entries) {
    if (entries.isEmpty()) {
      throw new IllegalArgumentException(
          where + ": give objectives such as {ttft: 500ms, tpot: 50ms, e2el: 10s}");
    }
    return build(entries, name -> where + "." + name);
  }

  private static Objectives build(Map<String, ?> entries, Function<String, String> where) {
    List<Objective> out = new ArrayList<>();
    Map<Phases, String> given = new LinkedHashMap<>();
    for (Map.Entry<String, ?> e : entries.entrySet()) {
      String name = e.getKey().trim().toLowerCase(Locale.ROOT);
      String at = where.apply(e.getKey());
      Phases phase = VLLM_NAMES.get(name);
      if (phase == null) {
        phase = catalogue(name, at, cliKnown(), false);
      }
      String before = given.putIfAbsent(phase, e.getKey());
      if (before != null) {
        throw new IllegalArgumentException(
            at + ": " + phase.key() + " is already given (as " + before + ")");
      }
      out.add(new Objective(phase, limit(at, e.getValue(), true)));
    }
    return new Objectives(out);
  }

  /**
   * Builds a budget's {@code slo_ms} map: catalogue names only ({@code client_ttft}, {@code tpot},
   * {@code client_total}, {@code queue}, {@code server_ttft}, …), each a positive number of
   * milliseconds.
   *
   * @param where the file, budget and key ({@code budgets.yaml: budgets[0] (chat).slo_ms}), named
   *     in every error
   * @param entries name to value, in the file's order; a value that is not a {@link Number} is
   *     refused
   */
  public static Objectives fromSloMs(String where, Map<String, ?> entries) {
    List<Objective> out = new ArrayList<>();
    for (Map.Entry<String, ?> e : entries.entrySet()) {
      String at = where + "." + e.getKey();
      Phases phase = catalogue(e.getKey(), at, catalogueNames(), true);
      if (!(e.getValue() instanceof Number)) {
        throw new IllegalArgumentException(
            at + ": expected a number of milliseconds, got '" + e.getValue() + "'");
      }
      out.add(new Objective(phase, limit(at, e.getValue(), false)));
    }
    try {
      return new Objectives(out);
    } catch (IllegalArgumentException ex) {
      throw new IllegalArgumentException(where + "." + ex.getMessage());
    }
  }

  /**
   * Judges one request.
   *
   * @param succeeded whether it succeeded (a failure is never good)
   * @param figures its values, NaN where absent
   */
  public Verdict judge(boolean succeeded, Figures figures) {
    if (!succeeded) {
      return Verdict.FAILED;
    }
    List<Objective> missed = null;
    List<Objective> unjudged = null;
    String first = null;
    for (Objective o : list) {
      double v = figures.nanos(o.phase());
      if (Double.isNaN(v)) {
        unjudged = add(unjudged, o);
      } else if (!o.holds(v)) {
        missed = add(missed, o);
      } else {
        continue;
      }
      if (first == null) {
        first = o.key();
      }
    }
    if (first == null) {
      return Verdict.GOOD;
    }
    return new Verdict(
        false, first, missed == null ? List.of() : missed, unjudged == null ? List.of() : unjudged);
  }

  /** Whether there is no objective. */
  public boolean isEmpty() {
    return list.isEmpty();
  }

  /** The catalogue names, in order. */
  public List<String> keys() {
    return list.stream().map(Objective::key).toList();
  }

  /** Catalogue name to limit in milliseconds, in order (summary.json's {@code objectives_ms}). */
  public Map<String, Double> limitsMs() {
    Map<String, Double> out = new LinkedHashMap<>();
    list.forEach(o -> out.put(o.key(), o.limitMs()));
    return out;
  }

  /**
   * The command-line form with catalogue names, which {@link #parse(String, String)} reads back:
   * {@code client_ttft=500ms,tpot=50ms,client_total=10s}.
   */
  @Override
  public String toString() {
    return list.stream()
        .map(o -> o.key() + "=" + format(o.limitNanos()))
        .collect(Collectors.joining(","));
  }

  private static String format(long nanos) {
    if (nanos % 1_000_000 == 0) {
      return Durations.format(Duration.ofNanos(nanos));
    }
    return BigDecimal.valueOf(nanos).movePointLeft(6).stripTrailingZeros().toPlainString() + "ms";
  }

  /** The catalogue phase {@code name} names, or an error that says what to write instead. */
  private static Phases catalogue(String name, String at, List<String> known, boolean budgetFile) {
    if (name.equals("ttft") || name.equals("total")) {
      // Only the budgets file reaches here with ttft (the command line reads it as vLLM's).
      String client = name.equals("ttft") ? "client_ttft" : "client_total";
      String server = name.equals("ttft") ? "server_ttft" : "server_root";
      throw new IllegalArgumentException(
          at
              + ": ambiguous: in limits_ms '"
              + name
              + "' means the server's figure; write "
              + client
              + " (the client's) or "
              + server
              + " (the proxy's)");
    }
    if (budgetFile && VLLM_NAMES.containsKey(name) && !name.equals(VLLM_NAMES.get(name).key())) {
      throw new IllegalArgumentException(
          at
              + ": vLLM's name, for --slo; slo_ms takes the catalogue's names: "
              + VLLM_NAMES.get(name).key());
    }
    Phases p = Phases.fromKey(name).orElse(null);
    if (p == Phases.ITL) {
      throw new IllegalArgumentException(
          at + ": itl is one value per token, not per request; set the objective on tpot");
    }
    if (p == Phases.SCHEDULE_LAG) {
      throw new IllegalArgumentException(
          at + ": schedule_lag is the load client's own lateness, not the service's figure");
    }
    if (p == null || !accepts(p)) {
      throw new IllegalArgumentException(
          at + ": unknown objective (known: " + String.join(", ", known) + ")");
    }
    return p;
  }

  private static List<String> cliKnown() {
    List<String> known = new ArrayList<>(List.of("ttft", "tpot", "e2el"));
    for (String k : catalogueNames()) {
      if (!known.contains(k)) {
        known.add(k);
      }
    }
    return known;
  }

  /** A limit in whole nanoseconds: a number of ms, or (with units allowed) a duration. */
  private static long limit(String at, Object value, boolean unitsAllowed) {
    double nanos;
    String text = String.valueOf(value).trim();
    double ms = 0;
    boolean inMs = true;
    if (value instanceof Number n) {
      ms = n.doubleValue();
    } else if (BARE_NUMBER.matcher(text).matches()) {
      ms = Double.parseDouble(text);
    } else {
      inMs = false;
    }
    if (inMs) {
      nanos = ms * 1e6;
    } else if (unitsAllowed) {
      try {
        nanos = Durations.parse(text).toNanos();
      } catch (IllegalArgumentException | ArithmeticException e) {
        throw new IllegalArgumentException(
            at
                + ": '"
                + text
                + "' is not a limit (e.g. 500ms, 10s, or a bare number of milliseconds)");
      }
    } else {
      throw new IllegalArgumentException(
          at + ": expected a number of milliseconds, got '" + text + "'");
    }
    if (!Double.isFinite(nanos)) {
      throw new IllegalArgumentException(at + ": must be a finite limit, got '" + text + "'");
    }
    if (nanos > MAX_NANOS) {
      throw new IllegalArgumentException(at + ": must be at most a day, got '" + text + "'");
    }
    // Milliseconds are rounded as every latency limit is (LatencyLimit.nanos); a duration is whole
    // nanoseconds already.
    long rounded = inMs ? LatencyLimit.nanos(ms) : Math.round(nanos);
    if (rounded <= 0) {
      throw new IllegalArgumentException(at + ": must be above zero, got '" + text + "'");
    }
    return rounded;
  }

  private static int firstOf(String s, char a, char b) {
    int i = s.indexOf(a);
    int j = s.indexOf(b);
    if (i < 0) {
      return j;
    }
    return j < 0 ? i : Math.min(i, j);
  }

  private static <T> List<T> add(List<T> list, T item) {
    List<T> out = list == null ? new ArrayList<>() : list;
    out.add(item);
    return out;
  }
}
