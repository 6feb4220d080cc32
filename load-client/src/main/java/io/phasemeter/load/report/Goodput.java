package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.workload.Api;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

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
   * proxy's record without {@code --admin}.
   *
   * @throws IllegalArgumentException one line naming the source and the objective
   */
  public void check(Api api, boolean stream, boolean joining) {
    for (Objective o : objectives.list()) {
      String at = where() + o.key() + ": ";
      if (api != null && api.notApplicable().contains(o.key())) {
        throw new IllegalArgumentException(
            at
                + "not applicable to --api "
                + api.key()
                + " ("
                + api.notApplicableReason()
                + "); set the objective on client_total (e2el)");
      }
      if (!stream && toFirstTokenOrTpot(o.phase())) {
        throw new IllegalArgumentException(
            at
                + "the responses are not streamed (--no-stream): the first token arrives with the"
                + " last byte and there is no TPOT; stream them, or set the objective on"
                + " client_total (e2el)");
      }
      if (!joining && needsTheJoin(o.phase())) {
        throw new IllegalArgumentException(
            at
                + "a figure of the proxy's record, joined per request: it needs --admin (without"
                + " the join no request could be judged on it)");
      }
    }
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
   * Judges one finished request. Its TPOT is 0 when it succeeded without one (at most one output
   * token: vLLM's convention), which {@link #check} makes sure only happens on streamed runs.
   */
  public Verdict judge(Pair pair) {
    ClientResult c = pair.client();
    if (!c.ok()) {
      return objectives.judge(false, p -> Double.NaN);
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
    v[Phases.TPOT.ordinal()] = c.tpotNanos() >= 0 ? c.tpotNanos() : 0;
    return objectives.judge(true, p -> v[p.ordinal()]);
  }

  private static void put(double[] v, Phases p, long nanos) {
    v[p.ordinal()] = nanos >= 0 ? nanos : Double.NaN;
  }
}
