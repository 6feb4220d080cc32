package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.workload.Api;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * A run's goodput objectives ({@link Objectives}, the one definition in core) and where they came
 * from, with the load client's view of one request's figures: its own, and the proxy's record's
 * once joined (as {@link PhaseStats} takes them).
 *
 * @param objectives what a good request meets, never empty
 * @param source {@code --slo}, or {@code budgets: <budget name>} (summary.json's {@code source})
 */
public record Goodput(Objectives objectives, String source) {

  /** {@link #source()} of objectives given on the command line (or by a campaign plan). */
  public static final String FLAG = "--slo";

  private static final Phases[] PHASES = Phases.values();
  private static final Map<String, Phases> BY_KEY = new HashMap<>();

  static {
    for (Phases p : PHASES) {
      BY_KEY.put(p.key(), p);
    }
  }

  public Goodput {
    if (objectives == null || objectives.isEmpty()) {
      throw new IllegalArgumentException("goodput needs at least one objective");
    }
  }

  /**
   * The run's objectives: {@code --slo} when given (it wins over the file), else the {@code slo_ms}
   * of the budget for {@code model} ({@link ClientBudgets#sloBudget}); null when neither gives any.
   */
  public static Goodput of(Objectives flag, ClientBudgets budgets, String model) {
    if (flag != null && !flag.isEmpty()) {
      return new Goodput(flag, FLAG);
    }
    ClientBudgets.Budget b = budgets.sloBudget(model);
    return b == null ? null : new Goodput(b.slo(), "budgets: " + b.name());
  }

  /**
   * Refuses an objective no request of the run could be judged on: a figure the API does not have
   * (embeddings: TTFT, TPOT), a TTFT or TPOT of responses that are not streamed, a figure of the
   * proxy's record without {@code --admin} or with {@code --join-sampled-only} (only the sampled
   * requests would be joined: the others would count as not good).
   *
   * @throws IllegalArgumentException one line naming the source and the objective
   */
  public void check(Api api, boolean stream, boolean joining) {
    check(api, stream, joining, false);
  }

  /** {@link #check(Api, boolean, boolean)}, {@code sampledOnly} meaning --join-sampled-only. */
  public void check(Api api, boolean stream, boolean joining, boolean sampledOnly) {
    for (Objective o : objectives.list()) {
      String why = inapplicable(o, api, stream, joining, sampledOnly);
      if (why != null) {
        throw new IllegalArgumentException(where() + o.key() + ": " + why);
      }
    }
  }

  /**
   * The objectives this run can judge. Those given on the command line (or by a campaign plan) are
   * all checked ({@link #check(Api, boolean, boolean, boolean)}: one that cannot be judged is an
   * error); those of a budgets file's {@code slo_ms}, a file shared by the proxy and runs of every
   * kind, are dropped when they cannot be judged in this run, as the same file's {@code limits_ms}
   * on such a figure are "not applicable": each dropped one is given to {@code skipped} as {@code
   * key} and why.
   *
   * @return the objectives left, or null when none is left
   */
  public Goodput forRun(
      Api api,
      boolean stream,
      boolean joining,
      boolean sampledOnly,
      BiConsumer<String, String> skipped) {
    if (source.equals(FLAG)) {
      check(api, stream, joining, sampledOnly);
      return this;
    }
    List<Objective> kept = new ArrayList<>();
    for (Objective o : objectives.list()) {
      String why = inapplicable(o, api, stream, joining, sampledOnly);
      if (why == null) {
        kept.add(o);
      } else {
        skipped.accept(o.key(), why);
      }
    }
    if (kept.size() == objectives.list().size()) {
      return this;
    }
    return kept.isEmpty() ? null : new Goodput(new Objectives(kept), source);
  }

  /** Why no request of the run could be judged on {@code o}, or null when some could. */
  private static String inapplicable(
      Objective o, Api api, boolean stream, boolean joining, boolean sampledOnly) {
    if (api != null && api.notApplicable().contains(o.key())) {
      return "not applicable to --api "
          + api.key()
          + " ("
          + api.notApplicableReason()
          + "); set the objective on client_total (e2el)";
    }
    if (!stream && toFirstTokenOrTpot(o.phase())) {
      return "the responses are not streamed (--no-stream): the first token arrives with the"
          + " last byte and there is no TPOT; stream them, or set the objective on"
          + " client_total (e2el)";
    }
    if (!joining && needsTheJoin(o.phase())) {
      return "a figure of the proxy's record, joined per request: it needs --admin (without"
          + " the join no request could be judged on it)";
    }
    if (sampledOnly && needsTheJoin(o.phase())) {
      return "a figure of the proxy's record, joined per request: with --join-sampled-only only"
          + " the sampled requests are joined and every other one would count as not good;"
          + " join every request (drop --join-sampled-only), or set the objective on a client"
          + " figure";
    }
    return null;
  }

  private String where() {
    return source.equals(FLAG) ? FLAG + ": " : "slo_ms of budget '" + source.substring(9) + "': ";
  }

  private static boolean toFirstTokenOrTpot(Phases p) {
    return p.toFirstToken() || p == Phases.TTFT_ENVELOPE || p == Phases.TPOT;
  }

  /** Whether the figure comes from the proxy's record (the join), not the client alone. */
  static boolean needsTheJoin(Phases p) {
    return p.source() != Phases.Source.CLIENT && p.source() != Phases.Source.STREAM;
  }

  /**
   * Judges one finished request. Without a TPOT figure its TPOT is 0 when it had at most one output
   * token (usage.completion_tokens 0 or 1, or max_tokens 1: vLLM's convention, no gap to average)
   * and absent (unjudged, so not good) otherwise: a response not streamed as SSE, one whose content
   * events the client does not count, or all tokens in one chunk give no TPOT, however many tokens
   * they carried.
   */
  public Verdict judge(Pair pair) {
    double[] v = figures(pair);
    return v == null
        ? objectives.judge(false, p -> Double.NaN)
        : objectives.judge(true, p -> v[p.ordinal()]);
  }

  /**
   * The figures {@link #judge} judges a request on, in nanoseconds by {@link Phases#ordinal()}, NaN
   * where absent; null when the request failed.
   */
  static double[] figures(Pair pair) {
    ClientResult c = pair.client();
    if (!c.ok()) {
      return null;
    }
    double[] v = new double[PHASES.length];
    Arrays.fill(v, Double.NaN);
    PhaseStats.values(
        pair,
        (name, ms) -> {
          Phases p = BY_KEY.get(name);
          if (p != null) {
            v[p.ordinal()] = SignedHistogram.nanos(ms);
          }
        });
    // The client's own figures exactly, in nanoseconds.
    put(v, Phases.CLIENT_TOTAL, c.totalNanos());
    put(v, Phases.CLIENT_TTFT, c.ttftNanos());
    put(v, Phases.TRANSPORT_SETUP, c.transportSetupNanos());
    v[Phases.TPOT.ordinal()] =
        c.tpotNanos() >= 0 ? c.tpotNanos() : atMostOneToken(c) ? 0 : Double.NaN;
    return v;
  }

  /** The objective on {@code key}, or null when there is none. */
  Objective objective(String key) {
    for (Objective o : objectives.list()) {
      if (o.key().equals(key)) {
        return o;
      }
    }
    return null;
  }

  /** Whether the request produced at most one output token, as far as the client knows. */
  static boolean atMostOneToken(ClientResult c) {
    long usage = c.usageCompletionTokens();
    return usage >= 0 ? usage <= 1 : c.maxTokens() == 1;
  }

  private static void put(double[] v, Phases p, long nanos) {
    v[p.ordinal()] = nanos >= 0 ? nanos : Double.NaN;
  }
}
