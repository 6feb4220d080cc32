package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Runs Prometheus's {@code promtool}. Missing promtool skips the test on a laptop but fails it in
 * CI ({@code CI=true}), where .ci/run installs it.
 */
final class Promtool {
  private static final long TIMEOUT_S = 60;

  private Promtool() {}

  /** Skips (locally) or fails (CI) when promtool is not on PATH. */
  static void require() {
    boolean present = onPath("promtool");
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("promtool is not on PATH but CI=true: .ci/run should have installed it (prometheus)");
    }
    Assumptions.assumeTrue(present, "promtool is not on PATH (apt-get install prometheus)");
  }

  /** Runs promtool with {@code args} and asserts it exits 0, showing its output if not. */
  static String runOk(String... args) {
    Result r = run(args);
    assertThat(r.exit())
        .as("promtool %s exited %d:%n%s", String.join(" ", args), r.exit(), r.output())
        .isZero();
    return r.output();
  }

  static Result run(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add("promtool");
    cmd.addAll(List.of(args));
    try {
      Path log = Files.createTempFile("promtool", ".log");
      try {
        Process p =
            new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(TIMEOUT_S, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          fail("promtool %s did not finish within %ds", String.join(" ", args), TIMEOUT_S);
        }
        return new Result(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
      } finally {
        Files.deleteIfExists(log);
      }
    } catch (IOException e) {
      throw new AssertionError("cannot run promtool: " + e.getMessage(), e);
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
