package io.phasemeter.load;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine;

/** {@code phasemeter load run}'s options from a command line, for tests in other packages. */
public final class TestLoadOptions {
  private TestLoadOptions() {}

  /** The options of {@code run} with {@code args}. */
  public static LoadOptions parse(String... args) {
    List<String> a = new ArrayList<>(List.of("run"));
    a.addAll(List.of(args));
    CommandLine cl =
        LoadMain.commandLine(
            new PrintWriter(new StringWriter(), true), new PrintWriter(new StringWriter(), true));
    CommandLine.ParseResult parsed = cl.parseArgs(a.toArray(String[]::new));
    LoadMain.Run run = parsed.subcommand().commandSpec().commandLine().getCommand();
    return run.options();
  }
}
