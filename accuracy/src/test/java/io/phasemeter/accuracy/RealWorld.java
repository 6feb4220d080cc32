package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Assumptions;

/**
 * The real components that {@code tools/realworld.sh} builds: llama.cpp's own {@code llama-server}
 * with a tiny random-weight model, and Grafana k6 v0.48.0. Their paths come from {@code
 * paths.properties} in {@code $PHASEMETER_REALWORLD} (default {@code
 * ~/.cache/phasemeter-realworld}). Missing, a test is skipped on a laptop (saying how to build
 * them) and fails in CI ({@code CI=true}), where {@code .ci/run} builds them.
 */
final class RealWorld {
  /** The model's alias, as clients name it. */
  static final String MODEL = "tiny-llama";

  final Path llamaServer;
  final Path llamaModel;
  final String llamaVersion;
  final Path k6;
  final String k6Version;

  private RealWorld(Properties p) {
    this.llamaServer = Path.of(p.getProperty("llama.server"));
    this.llamaModel = Path.of(p.getProperty("llama.model"));
    this.llamaVersion = p.getProperty("llama.version", "unknown");
    this.k6 = Path.of(p.getProperty("k6"));
    this.k6Version = p.getProperty("k6.version", "unknown");
  }

  /** The components, or a skip (laptop) / failure (CI) that says how to build them. */
  static RealWorld require() {
    String dir = System.getenv("PHASEMETER_REALWORLD");
    Path cache =
        dir != null && !dir.isBlank()
            ? Path.of(dir)
            : Path.of(System.getProperty("user.home"), ".cache", "phasemeter-realworld");
    Path file = cache.resolve("paths.properties");
    String why = null;
    RealWorld rw = null;
    if (!Files.isRegularFile(file)) {
      why = "no " + file;
    } else {
      Properties p = new Properties();
      try (InputStream in = Files.newInputStream(file)) {
        p.load(in);
        rw = new RealWorld(p);
        if (!Files.isExecutable(rw.llamaServer)
            || !Files.isRegularFile(rw.llamaModel)
            || !Files.isExecutable(rw.k6)) {
          why = file + " names files that are not there";
        }
      } catch (IOException | RuntimeException e) {
        why = "cannot read " + file + ": " + e;
      }
    }
    if (why != null) {
      String msg = "the real components are not built (" + why + "): run bash tools/realworld.sh";
      if ("true".equals(System.getenv("CI"))) {
        fail(msg + " (CI=true: .ci/run should have built them)");
      }
      Assumptions.assumeTrue(false, msg);
    }
    return rw;
  }

  /**
   * Starts {@code llama-server} on 127.0.0.1:{@code port} as the kit's start script does: one
   * thread, a 4,096-token context, {@code slots} parallel sequences, the byte-fallback tokens the
   * random model would emit as invalid UTF-8 banned, model alias {@value #MODEL}; logs to {@code
   * logBase}.log in {@code dir}. Returns once {@code /health} answers 200.
   */
  Process startLlama(int port, int slots, List<String> extraArgs, Path dir, String logBase)
      throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(llamaServer.toString());
    cmd.addAll(
        List.of(
            "-m",
            llamaModel.toString(),
            "--host",
            "127.0.0.1",
            "--port",
            Integer.toString(port),
            "-t",
            "1",
            "-c",
            "4096",
            "-np",
            Integer.toString(slots),
            "--alias",
            MODEL,
            "--no-jinja",
            "--chat-template",
            "llama2",
            "--reasoning-format",
            "none"));
    for (int t = 3; t <= 258; t++) {
      cmd.add("-l");
      cmd.add(t + "-inf");
    }
    cmd.addAll(extraArgs);
    Process p =
        new ProcessBuilder(cmd)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(
                ProcessBuilder.Redirect.appendTo(dir.resolve(logBase + ".log").toFile()))
            .start();
    try {
      Procs.awaitOk("http://127.0.0.1:" + port + "/health", p, Duration.ofSeconds(120));
    } catch (Exception | AssertionError e) {
      // Never left running: the caller has no handle on it yet.
      Procs.stop(p);
      throw e;
    }
    return p;
  }

  /**
   * Starts {@code k6 run --no-usage-report [args]} in {@code dir} (with {@code
   * K6_NO_USAGE_REPORT=true} as well: k6 must never phone home), output to {@code logBase}.out /
   * .err there, {@code env} added to its environment (SSL_CERT_FILE: the CA file it trusts, in
   * place of the system's). The caller waits for it and reads its exit code.
   */
  Process startK6(List<String> args, Map<String, String> env, Path dir, String logBase)
      throws IOException {
    List<String> cmd = new ArrayList<>(List.of(k6.toString(), "run", "--no-usage-report"));
    cmd.addAll(args);
    Map<String, String> all = new java.util.HashMap<>(env);
    all.put("K6_NO_USAGE_REPORT", "true");
    return Procs.start(cmd, all, dir, logBase);
  }

  /** The shell command that starts llama-server the same way, for {@code --start-cmd}. */
  String llamaCommand(int port, int slots) {
    StringBuilder s =
        new StringBuilder("exec '")
            .append(llamaServer)
            .append("' -m '")
            .append(llamaModel)
            .append("' --host 127.0.0.1 --port ")
            .append(port)
            .append(" -t 1 -c 4096 -np ")
            .append(slots)
            .append(" --alias ")
            .append(MODEL)
            .append(" --no-jinja --chat-template llama2 --reasoning-format none");
    for (int t = 3; t <= 258; t++) {
      s.append(" -l ").append(t).append("-inf");
    }
    return s.toString();
  }
}
