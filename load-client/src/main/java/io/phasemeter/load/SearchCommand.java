package io.phasemeter.load;

import io.phasemeter.core.Durations;
import io.phasemeter.core.NanoClock;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.report.Goodput;
import io.phasemeter.load.search.CapacitySearch;
import io.phasemeter.load.search.SearchRunner;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;

/**
 * {@code phasemeter load search}: the highest load at which the deployment holds its budgets and
 * objectives. It takes every option of {@code load run} (inherited from {@link LoadMain.Run}: the
 * target, the workload, --budgets, --admin, …), reads {@code --rate}/{@code --concurrency} as the
 * start, {@code --duration} and {@code --warmup-duration} per probe, and adds its own.
 */
@Command(
    name = "search",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    modelTransformer = SearchCommand.Help.class,
    description = {
      "Finds the highest offered rate (open model; --concurrency for the closed model) at which"
          + " the deployment holds: every budget of --budgets and, where objectives are given,"
          + " an attainment of at least --min-attainment. Each probe is a measured run of its own"
          + " (warm-up at load, then --duration): doubling from the start until a probe fails,"
          + " halving if the start fails, then bisection between the last pass and the first"
          + " failure down to --resolution, then --repeats confirmation blocks of the last pass,"
          + " the first failure and one bracket width below and above, in a seeded random order; the"
          + " capacity is the mean of the blocks' crossings with a 95 %% Student-t interval. The"
          + " limiting phase is named from the join (--admin): the phase whose budget was"
          + " breached most at the first failing probe above the capacity, or, on objectives"
          + " alone, the server phase whose p95 grew most.",
      "",
      "A probe fails when the deployment did not hold (a budget breached, the attainment below"
          + " its minimum, errors above the limit, timeouts, iterations dropped at"
          + " --max-in-flight); it is invalid when the measurement cannot be trusted (nothing"
          + " sent, the client erroring, join coverage under the budgets' minimum, or the client"
          + " late on its own schedule while the deployment failed only on the client's own"
          + " phases, or passed): an invalid probe is repeated once, then counted as neither.",
      "",
      "With the defaults (probes of 10 s after 2 s at load, the first after 5 s, 3 blocks), a"
          + " search at the scale of the demo's simulator (phasemeter demo --search: capacity"
          + " about 8-10 req/s, from 1 req/s) runs about 21 probes of 13 s: 5 minutes; 35 when the"
          + " confirmation has to move the bracket that a noisy probe set (measured: 495 s on a"
          + " busy 2-core machine). A start --rate near the answer saves the doubling.",
      "",
      "Writes search.json, report.html and probes/NN-rate-R/ (each probe's own report and"
          + " run.log) into --out; one line per probe.",
      "",
      "Exit codes: 0 capacity found (or at least --max-rate); 3 the capacity is below"
          + " --min-capacity, or no load held down to the floor; 4 no probe was valid, or"
          + " nothing succeeded at the first probe (a wrong --model or --url); 5 --max-duration"
          + " ran out before the search ended (the bracket so far is reported); 2 bad usage."
          + " When several apply, 2 and 4 win, then 3 (out of time, but a load at or below"
          + " --min-capacity already failed), then 5.",
      ""
    },
    exitCodeOnInvalidInput = 2)
public final class SearchCommand extends LoadMain.Run {
  /** A probe's measured duration when --duration is not given. */
  static final String DEFAULT_PROBE = "10s";

  /** The first probe's warm-up at its load when --warmup-duration is not given. */
  static final String DEFAULT_WARMUP_AT_LOAD = "5s";

  /**
   * The later probes' warm-up at their load when --warmup-duration is not given: at the full rate
   * from its start, the JVM being warm.
   */
  static final String DEFAULT_LATER_WARMUP = "2s";

  @Option(
      names = "--max-rate",
      paramLabel = "R",
      description =
          "the highest load probed (req/s, or concurrency with --concurrency); when it holds, the"
              + " capacity is reported as at least R (default: none)")
  Double maxRate;

  @Option(
      names = "--min-capacity",
      paramLabel = "R",
      defaultValue = "0",
      description =
          "exit 3 when the capacity is below R; the halving stops at R (default: ${DEFAULT-VALUE},"
              + " never)")
  double minCapacity;

  @Option(
      names = "--resolution",
      paramLabel = "SHARE",
      defaultValue = "5%",
      description =
          "the bisection stops when (fail - pass) / fail is at or below this, as a share (0.05) or"
              + " a percentage (5%%); closed model: when they differ by 1 (default:"
              + " ${DEFAULT-VALUE})")
  String resolution;

  @Option(
      names = "--repeats",
      paramLabel = "N",
      defaultValue = "3",
      description = "confirmation blocks, at least 3 (default: ${DEFAULT-VALUE})")
  int repeats;

  @Option(
      names = "--min-attainment",
      paramLabel = "SHARE",
      defaultValue = "0.95",
      description =
          "with objectives (--slo, or a budget's slo_ms), the share of requests sent that must"
              + " meet every objective for a probe to pass, as a share or a percentage (default:"
              + " ${DEFAULT-VALUE})")
  String minAttainment;

  @Option(
      names = "--max-duration",
      paramLabel = "D",
      defaultValue = "30m",
      description =
          "the whole search's time: no probe starts that would end after it (its warm-up,"
              + " duration and the largest overhead seen so far); then the search"
              + " stops and reports the bracket so far (exit 5) (default: ${DEFAULT-VALUE})")
  String maxDuration;

  private final NanoClock clock;

  public SearchCommand() {
    this(NanoClock.system());
  }

  SearchCommand(NanoClock clock) {
    this.clock = clock;
  }

  /** Whether objectives are given on the command line ({@code --slo}). */
  boolean objectivesGiven() {
    return slo != null;
  }

  @Override
  public Integer call() {
    PrintWriter err = spec.commandLine().getErr();
    try {
      return search(spec.commandLine().getOut());
    } catch (IllegalArgumentException e) {
      err.println("phasemeter load search: " + e.getMessage());
      return 2;
    } catch (java.io.IOException e) {
      err.println("phasemeter load search: " + e.getMessage());
      return 2;
    }
  }

  private int search(PrintWriter stdout) throws java.io.IOException {
    if (replay != null) {
      throw new IllegalArgumentException(
          "--replay cannot go with search: a search sets its own rates (replay a trace with load"
              + " run --replay)");
    }
    if (!steps.isEmpty() || stepDuration != null) {
      throw new IllegalArgumentException(
          "--steps and --step-duration cannot go with search: the search chooses the rates (give"
              + " --rate R as the start)");
    }
    if (sessionFlags()) {
      throw new IllegalArgumentException(
          "--sessions, --turns, --think-time and --session-max-tokens cannot go with search: a"
              + " search moves a rate or a concurrency (run sessions with phasemeter load run)");
    }
    if (rate > 0 && concurrency > 0) {
      throw new IllegalArgumentException(
          "give --rate R (open model) or --concurrency N (closed model) as the start, not both");
    }
    boolean closed = concurrency > 0;
    double start = closed ? concurrency : rate > 0 ? rate : 1;
    if (!closed && rate < 0) {
      throw new IllegalArgumentException("--rate must be positive");
    }
    if (!closed) {
      rate = start;
    }
    Duration probe =
        Durations.parsePositive("--duration", duration == null ? DEFAULT_PROBE : duration);
    duration = duration == null ? DEFAULT_PROBE : duration;
    boolean warmGiven = warmupDuration != null;
    if (!warmGiven) {
      warmupDuration = DEFAULT_WARMUP_AT_LOAD;
    }
    Duration warm;
    try {
      warm = Durations.parse(warmupDuration);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--warmup-duration: " + e.getMessage());
    }
    Duration laterWarm = warmGiven ? warm : Durations.parse(DEFAULT_LATER_WARMUP);
    // 0 is allowed here: no warm-up at load (the run's own flag takes only a positive one).
    warmupDuration = warm.isZero() ? null : warmupDuration;
    if (out == null) {
      out = LoadMain.defaultOut("search");
    }
    LoadOptions base = options();
    ClientBudgets budgets =
        base.budgets() == null ? ClientBudgets.none() : ClientBudgets.load(base.budgets());
    if (budgets.forModel(base.model()).isEmpty() && !objectivesGiven()) {
      throw new IllegalArgumentException(
          "nothing to hold: give --budgets FILE (with a budget for model "
              + base.model()
              + ") or --slo");
    }
    Goodput goodput = objectivesGiven() ? Goodput.of(base.slo(), budgets, base.model()) : null;
    if (goodput != null) {
      // What every probe's run would refuse (exit 2), refused before the first probe and its
      // warm-up: an objective no request could be judged on, such as a proxy phase without --admin.
      goodput.check(base.api(), base.stream(), base.admin() != null, base.joinSampledOnly());
    }
    if (maxRate != null && !(maxRate > 0)) {
      throw new IllegalArgumentException("--max-rate must be positive");
    }
    if (maxRate != null && closed && maxRate != Math.rint(maxRate)) {
      throw new IllegalArgumentException(
          "--max-rate must be a whole concurrency with --concurrency");
    }
    if (!(minCapacity >= 0)) {
      throw new IllegalArgumentException("--min-capacity must be 0 or more");
    }
    if (repeats < 3) {
      throw new IllegalArgumentException(
          "--repeats must be at least 3: the answer is confirmed in 3 or more blocks, as a"
              + " campaign's points are (n = 3 gives a 95 % t of 4.30)");
    }
    double res = LoadMain.share("--resolution", resolution);
    double floor =
        closed ? Math.max(1, Math.ceil(minCapacity)) : minCapacity > 0 ? minCapacity : start / 64;
    CapacitySearch.Settings settings =
        new CapacitySearch.Settings(
            closed,
            start,
            maxRate == null ? Double.POSITIVE_INFINITY : maxRate,
            Math.min(floor, start),
            res,
            repeats,
            seed);
    SearchRunner.Options options =
        new SearchRunner.Options(
            base,
            settings,
            probe,
            warm,
            laterWarm,
            LoadMain.share("--min-attainment", minAttainment),
            minCapacity,
            Durations.parsePositive("--max-duration", maxDuration),
            budgets);
    return new SearchRunner(options, stdout, clock).run();
  }

  /**
   * The inherited options' help, in the search's words: the load is the start, the duration and the
   * warm-up at load are each probe's, and the report goes to search-&lt;time&gt;.
   */
  static final class Help implements CommandLine.IModelTransformer {
    private static final Map<String, String> WORDS =
        Map.of(
            "--rate",
            "open model: the start rate in req/s (default: 1)",
            "--concurrency",
            "closed model: the start concurrency; the search then moves in whole numbers",
            "--duration",
            "each probe's measured duration (default: "
                + DEFAULT_PROBE
                + "); an open-model probe offers at least "
                + SearchRunner.MIN_REQUESTS
                + " requests, so it lasts longer at a lower rate",
            "--warmup-duration",
            "each probe's warm-up at its load before its clock, not counted: the first probe's"
                + " rising from 0, the later ones' at the full rate from the start, the JVM being"
                + " warm (default: "
                + DEFAULT_WARMUP_AT_LOAD
                + " for the first probe, "
                + DEFAULT_LATER_WARMUP
                + " for the later ones); --warmup and --client-floor apply to the first probe"
                + " only",
            "--out",
            "where search.json, report.html and probes/ go (default:"
                + " phasemeter-out/search-<time>)",
            "--steps",
            "not with search: the search chooses the rates",
            "--step-duration",
            "not with search",
            "--replay",
            "not with search: a search sets its own rates (load run --replay replays a trace)",
            "--seed",
            "seed of the confirmation blocks' order; probe N's arrivals and prompts take S + N"
                + " (default: 1)",
            "--prompt-salt",
            "mixed into every probe's prompt token ids (and chat's text), not their lengths: up to"
                + " 16 hex digits for every probe, or none (0) for the seed's prompts alone"
                + " (default: a fresh random salt per probe, in its conditions' prompt_salt)");

    /** The multi-turn shape's flags, which a search refuses. */
    private static final Map<String, String> SESSION_WORDS =
        Map.of(
            "--sessions",
            "not with search: a search moves a rate or a concurrency",
            "--turns",
            "not with search",
            "--think-time",
            "not with search",
            "--session-max-tokens",
            "not with search");

    @Override
    public CommandSpec transform(CommandSpec spec) {
      // Removed and added again in their order: an option spec's description is fixed.
      List<OptionSpec> options = List.copyOf(spec.options());
      options.forEach(spec::remove);
      for (OptionSpec o : options) {
        String words = WORDS.getOrDefault(o.longestName(), SESSION_WORDS.get(o.longestName()));
        spec.addOption(words == null ? o : o.toBuilder().description(words).build());
      }
      return spec;
    }
  }
}
