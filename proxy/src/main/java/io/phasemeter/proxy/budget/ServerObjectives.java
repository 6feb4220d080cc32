package io.phasemeter.proxy.budget;

import io.phasemeter.core.Phases;
import io.phasemeter.core.slo.Figures;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.proxy.pipeline.Outcome;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.ProxyFailure;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.SloJudge;
import io.phasemeter.proxy.pipeline.SloJudgement;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import java.util.ArrayList;
import java.util.List;

/**
 * The proxy's judgement of each request against its per-request objectives: server-side goodput
 * (docs/design.md, "Server-side goodput"), with the one definition the load client judges by
 * ({@link Objectives#judge}).
 *
 * <p>A request's objectives are the {@code slo_ms} of the first budget, in file order, that matches
 * its model and tenant and gives {@code slo_ms}, keeping those the proxy measures itself ({@link
 * Objectives#judgedByProxy()}); then its {@code x-slo-*} headers override or add. It is counted
 * when it has at least one objective and it ended {@code success}, {@code upstream_error}, {@code
 * timeout}, or {@code rejected} by the service; a counted failure missed with objective {@code
 * error}.
 */
public final class ServerObjectives implements SloJudge {
  private static final Phase[] PIPELINE_PHASE = new Phase[Phases.values().length];

  static {
    for (Phase p : Phase.all()) {
      PIPELINE_PHASE[p.entry().ordinal()] = p;
    }
  }

  private static final String RATE_LIMIT_EXCEEDED = ProxyFailure.Kind.RATE_LIMIT_REQUESTS.code();

  private final Entry[] entries;

  /**
   * One budget with {@code slo_ms}: its objectives the proxy judges, and the verdicts every request
   * that met them, or failed, shares.
   */
  record Entry(int index, Budget budget, Kind streamed, Kind unstreamed) {
    static Entry of(int index, Budget b) {
      Objectives o = b.slo().judgedByProxy();
      return new Entry(index, b, Kind.of(b, index, o), Kind.of(b, index, withoutStreamFigures(o)));
    }

    /** The objectives the proxy judges a streamed request by (a response not streamed: fewer). */
    Objectives objectives() {
      return streamed.objectives();
    }

    /** The objectives of a request streamed or not, and their shared verdicts. */
    Kind of(RequestContext ctx) {
      return ctx.streaming() ? streamed : unstreamed;
    }
  }

  /** One budget's objectives for one kind of response, and the verdicts shared by its requests. */
  record Kind(Objectives objectives, SloJudgement met, SloJudgement error) {
    static Kind of(Budget b, int index, Objectives o) {
      return new Kind(
          o,
          new SloJudgement(b.name(), index, true, SloJudgement.NONE, o, List.of(), List.of()),
          new SloJudgement(b.name(), index, false, SloJudgement.ERROR, o, List.of(), List.of()));
    }
  }

  /**
   * The objectives a response not streamed can be judged on: it has no first token and no gaps
   * between tokens ({@code server_ttft}, {@code tpot}), as the load client refuses them for a
   * {@code --no-stream} run. Judging them absent would make every such request missed.
   */
  static Objectives withoutStreamFigures(Objectives o) {
    return o.without(Phases.SERVER_TTFT, Phases.TPOT);
  }

  public ServerObjectives(Budgets budgets) {
    List<Entry> out = new ArrayList<>();
    List<Budget> all = budgets.budgets();
    for (int i = 0; i < all.size(); i++) {
      if (all.get(i).hasSlo()) {
        out.add(Entry.of(i, all.get(i)));
      }
    }
    this.entries = out.toArray(new Entry[0]);
  }

  /** The budgets with {@code slo_ms}, in file order. */
  List<Entry> entries() {
    return List.of(entries);
  }

  /**
   * Whether a request that ended so is judged: its outcome says something about the service. Client
   * errors and cancellations do not, nor a key's own rate limit (the key's contract, not the
   * service's capacity); every other refusal (queue full, overloaded, shutting down, the shared
   * limiter unavailable, the upstream busy) does.
   */
  public static boolean counted(Outcome outcome, String errorType) {
    return switch (outcome) {
      case SUCCESS, UPSTREAM_ERROR, TIMEOUT -> true;
      case REJECTED -> !RATE_LIMIT_EXCEEDED.equals(errorType);
      case CLIENT_ERROR, CANCELLED -> false;
    };
  }

  /**
   * The budget whose {@code slo_ms} gives a request for {@code model} from {@code tenant} its
   * objectives: the first in file order that matches both; null when none does.
   */
  Entry select(String model, String tenant) {
    for (Entry e : entries) {
      if (e.budget.matches(model, tenant)) {
        return e;
      }
    }
    return null;
  }

  @Override
  public SloJudgement judge(RequestContext ctx) {
    if (!counted(ctx.outcome(), ctx.errorType())) {
      return null;
    }
    Entry e = select(ctx.modelLabel(), ctx.tenant());
    Kind k = e == null ? null : e.of(ctx);
    Objectives headers =
        ctx.streaming() ? ctx.sloHeaders() : withoutStreamFigures(ctx.sloHeaders());
    boolean succeeded = ctx.outcome() == Outcome.SUCCESS;
    if (headers.isEmpty()) {
      if (k == null || k.objectives().isEmpty()) {
        return null;
      }
      if (!succeeded) {
        return k.error();
      }
      Verdict v = k.objectives().judge(true, figures(ctx));
      return v.good() ? k.met() : judgement(e, k.objectives(), v, List.of());
    }
    // Only headers gave objectives when the budget gives none the proxy judges.
    Entry used = k == null || k.objectives().isEmpty() ? null : e;
    Objectives objectives = used == null ? headers : k.objectives().overriddenBy(headers);
    Verdict v = objectives.judge(succeeded, figures(ctx));
    return judgement(used, objectives, v, headers.keys());
  }

  private static SloJudgement judgement(
      Entry e, Objectives objectives, Verdict v, List<String> overridden) {
    List<String> missed = List.of();
    if (!v.good() && !SloJudgement.ERROR.equals(v.firstMissed())) {
      missed = new ArrayList<>(v.missed().size() + v.unjudged().size());
      for (Objective o : objectives.list()) {
        if (v.missed().contains(o) || v.unjudged().contains(o)) {
          missed.add(o.key());
        }
      }
    }
    return new SloJudgement(
        e == null ? null : e.budget.name(),
        e == null ? -1 : e.index,
        v.good(),
        v.good() ? SloJudgement.NONE : v.firstMissed(),
        objectives,
        missed,
        overridden);
  }

  /** The request's figures as its record gives them, NaN where absent. */
  static Figures figures(RequestContext ctx) {
    return phase -> nanos(ctx, phase);
  }

  /**
   * The request's value of {@code phase} in nanoseconds, on the proxy's clock: the same figures its
   * record carries. TPOT of a request with at most one output token is 0 (vLLM's convention); a
   * phase the request did not pass through, a first token never written, or a TPOT the stream gave
   * no gap for are absent (NaN).
   */
  static double nanos(RequestContext ctx, Phases phase) {
    long v =
        switch (phase) {
          case SERVER_ROOT, TOTAL -> ctx.rootNanos();
          case SERVER_TTFT, TTFT -> ctx.serverTtftNanos();
          case TPOT -> tpotNanos(ctx);
          case GATEWAY -> ProxyMetrics.gatewayNanos(ctx);
          case UNATTRIBUTED -> {
            // May be a little below zero (clock reads in between); it is a measured value.
            yield ctx.rootNanos() < 0 ? -1 : Math.max(0, ctx.unattributedNanos());
          }
          default -> {
            Phase p = PIPELINE_PHASE[phase.ordinal()];
            yield p == null ? -1 : ctx.phaseNanos(p);
          }
        };
    return v < 0 ? Double.NaN : v;
  }

  private static long tpotNanos(RequestContext ctx) {
    long tpot = ctx.tpotNanos();
    if (tpot >= 0) {
      return tpot;
    }
    long n = ctx.outputTokens() > 0 ? ctx.outputTokens() : ctx.contentChunks();
    return n <= 1 ? 0 : -1;
  }
}
