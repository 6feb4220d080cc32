package io.phasemeter.load;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A {@code load run} command line for tests that are not about the client's warm-up or floor: adds
 * {@code --warmup 0 --client-floor off} unless the test sets either itself, so that each run does
 * not pay the seconds of warm-up, floor and JIT wait (CI time). Other commands pass unchanged.
 */
final class RunArgs {
  private RunArgs() {}

  static String[] quiet(String... args) {
    return quiet(Arrays.asList(args));
  }

  static String[] quiet(List<String> args) {
    List<String> out = new ArrayList<>(args);
    if (out.isEmpty() || !out.get(0).equals("run")) {
      return out.toArray(String[]::new);
    }
    if (!out.contains("--warmup")
        && !out.contains("--warmup-target")
        && !out.contains("--warmup-duration")) {
      out.addAll(List.of("--warmup", "0"));
    }
    if (!out.contains("--client-floor")) {
      out.addAll(List.of("--client-floor", "off"));
    }
    return out.toArray(String[]::new);
  }
}
