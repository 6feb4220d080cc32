package io.phasemeter.proxy.deploy;

import static org.assertj.core.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A command-line tool a test runs (node, dockerfilelint). Missing, it skips the test on a laptop
 * but fails it in CI ({@code CI=true}), where .ci/run installs it.
 */
record ExternalTool(String exe, String install) {
  static final ExternalTool NODE = new ExternalTool("node", "apt-get install nodejs");
  static final ExternalTool DOCKERFILELINT =
      new ExternalTool("dockerfilelint", "npm install -g dockerfilelint@1.8.0");

  /** Skips (locally) or fails (CI) when the tool is not on PATH. */
  void require() {
    boolean present = onPath(exe);
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("%s is not on PATH but CI=true: .ci/run should have installed it (%s)", exe, install);
    }
    Assumptions.assumeTrue(present, exe + " is not on PATH (" + install + ")");
  }

  /** Runs the tool in {@code dir}; returns its exit code and its output, stderr included. */
  Result run(Path dir, String... args) {
    List<String> cmd = new java.util.ArrayList<>();
    cmd.add(exe);
    cmd.addAll(List.of(args));
    try {
      Path log = Files.createTempFile(exe, ".log");
      try {
        Process p =
            new ProcessBuilder(cmd)
                .directory(dir.toFile())
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          fail("%s did not finish within 60 s", String.join(" ", cmd));
        }
        return new Result(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
      } finally {
        Files.deleteIfExists(log);
      }
    } catch (IOException e) {
      throw new AssertionError("cannot run " + exe + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  record Result(int exit, String output) {}

  private static boolean onPath(String exe) {
    String path = System.getenv("PATH");
    if (path == null) {
      return false;
    }
    for (String dir : path.split(File.pathSeparator)) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, exe))) {
        return true;
      }
    }
    return false;
  }
}
