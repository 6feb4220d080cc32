package io.phasemeter.load;

import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.report.PhaseStats;
import io.phasemeter.load.report.RunMerge;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code phasemeter load merge DIR… --out DIR}. */
@Command(
    name = "merge",
    mixinStandardHelpOptions = true,
    description = {
      "Merges the --out directories of load-client instances that ran at the same time (e.g. a"
          + " Kubernetes Job with parallelism) into one summary.json, pairs.csv and phases.hlog."
          + " Quantiles come from the instances' HdrHistograms added together, never from"
          + " averaging their percentiles. Every trace id must be unique across the inputs.",
      "",
      "Exit codes: 0 merged and every budget holds; 3 a budget is breached on the merged run; 2 bad"
          + " usage or an input that is not a run's output; 4 a trace id appears in two inputs"
          + " (nothing is written)."
    },
    exitCodeOnInvalidInput = 2)
final class MergeCommand implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Parameters(paramLabel = "DIR", arity = "2..*", description = "run directories to merge")
  List<Path> inputs;

  @Option(
      names = "--out",
      paramLabel = "DIR",
      description = "where the merged files go (default: phasemeter-out/merge-<time>)")
  Path out;

  @Option(
      names = "--budgets",
      paramLabel = "FILE",
      description = "judge the latency budgets on the merged run")
  Path budgets;

  @Override
  public Integer call() {
    PrintWriter stdout = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    Path dir = out == null ? LoadMain.defaultOut("merge") : out;
    RunMerge.Result r;
    try {
      ClientBudgets b = budgets == null ? null : ClientBudgets.load(budgets);
      r = RunMerge.merge(inputs, dir, b);
    } catch (RunMerge.MergeException e) {
      err.println("phasemeter load merge: " + e.getMessage());
      return e.exitCode();
    } catch (IOException | RuntimeException e) {
      err.println("phasemeter load merge: " + e.getMessage());
      return 2;
    }
    stdout.printf(
        Locale.ROOT,
        "merged %d runs: %d requests (%d ok), join coverage %.3f%n",
        inputs.size(),
        r.requests().getOrDefault("sent", 0L),
        r.requests().getOrDefault("ok", 0L),
        r.stats().joinCoverage());
    stdout.printf(
        Locale.ROOT, "%-18s %8s %10s %10s %10s%n", "phase", "count", "p50 ms", "p95 ms", "p99 ms");
    for (String name : PhaseStats.NAMES) {
      PhaseStats.Summary s = r.stats().summary(name);
      if (s.count() > 0) {
        stdout.printf(
            Locale.ROOT,
            "%-18s %8d %10.1f %10.1f %10.1f%n",
            name,
            s.count(),
            s.p50(),
            s.p95(),
            s.p99());
      }
    }
    for (BudgetResult b : r.budgets()) {
      if (b.breached()) {
        stdout.printf(
            Locale.ROOT,
            "BREACH %s: %s %.1f ms > %.1f ms%n",
            b.name(),
            b.phase(),
            b.observedMs(),
            b.limitMs());
      }
    }
    if (r.quantileFallback()) {
      for (int i = 0; i < r.budgets().size(); i++) {
        if (r.basis().get(i).equals(RunMerge.QUANTILE)) {
          stdout.printf(
              Locale.ROOT,
              "note: %s %s %s%n",
              r.budgets().get(i).name(),
              r.budgets().get(i).phase(),
              "judged by the merged quantile (no exact counts for this phase; see budgets_note)");
        }
      }
    }
    stdout.println("wrote " + dir);
    stdout.flush();
    return r.breached() ? 3 : 0;
  }
}
