package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code phasemeter load compare A B}. */
@Command(
    name = "compare",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Compares two campaigns (their directories or campaign.json files) point by point and"
          + " metric by metric: B − A with Welch's 95 %% interval, '*' where it excludes 0.",
      "",
      "First it compares the recorded conditions. When a guarded one differs (model, proxy config,"
          + " pools, limits, slot capacity, any --label such as the GPU) the comparison would mix"
          + " causes and is refused, naming each difference; --vary KEY accepts the one you mean"
          + " to compare (e.g. --vary engine), --force compares anyway with warnings.",
      "",
      "Exit codes: 0 compared; 2 refused (conditions differ) or bad usage."
    },
    exitCodeOnInvalidInput = 2)
public final class CompareCommand implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Parameters(index = "0", paramLabel = "A", description = "the baseline campaign")
  Path a;

  @Parameters(index = "1", paramLabel = "B", description = "the campaign compared with it")
  Path b;

  @Option(
      names = "--vary",
      paramLabel = "KEY",
      split = ",",
      description =
          "a condition meant to differ, e.g. engine (a label) or proxy_config_sha256 (repeatable)")
  List<String> vary = new java.util.ArrayList<>();

  @Option(names = "--force", description = "compare even when guarded conditions differ")
  boolean force;

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    JsonNode ca;
    JsonNode cb;
    try {
      ca = CampaignReport.read(a);
      cb = CampaignReport.read(b);
    } catch (IllegalArgumentException | IOException e) {
      err.println("phasemeter load compare: " + e.getMessage());
      return 2;
    }
    return Compare.run(ca, cb, a.toString(), b.toString(), new LinkedHashSet<>(vary), force, out);
  }
}
