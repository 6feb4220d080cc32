package io.phasemeter.accuracy;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Starting, waiting for and stopping the separate JVM processes of the suite. */
final class Procs {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();

  private Procs() {}

  /**
   * A proxy config listening on {@code proxyPort} (admin on {@code adminPort}, no token, auth off),
   * followed by {@code rest}: the {@code pools:} key and whatever else the test needs.
   */
  static String proxyConfig(int proxyPort, int adminPort, String... rest) {
    return proxyConfig(proxyPort, "", adminPort, rest);
  }

  /** As above, {@code listenMore} added inside the {@code listen} block (", tls: {...}"). */
  static String proxyConfig(int proxyPort, String listenMore, int adminPort, String... rest) {
    List<String> lines = new ArrayList<>();
    lines.add("listen: {host: 127.0.0.1, port: " + proxyPort + listenMore + "}");
    lines.add("admin: {host: 127.0.0.1, port: " + adminPort + ", token: \"\"}");
    lines.add("auth: {enabled: false, keys_file: null}");
    lines.addAll(List.of(rest));
    return String.join("\n", lines);
  }

  static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    }
  }

  /**
   * Starts {@code java [jvmArgs] -jar jar [args]} with stdout and stderr appended to {@code
   * logBase}.out / .err.
   */
  static Process start(
      Path jar,
      List<String> jvmArgs,
      List<String> args,
      Map<String, String> env,
      Path workDir,
      String logBase)
      throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(java());
    cmd.add("-Xmx256m");
    cmd.addAll(jvmArgs);
    cmd.add("-jar");
    cmd.add(jar.toString());
    cmd.addAll(args);
    return start(cmd, env, workDir, logBase);
  }

  /**
   * Starts {@code cmd} in {@code workDir} with stdout and stderr appended to {@code logBase}.out /
   * .err, and the command line to {@code logBase}.cmd.
   */
  static Process start(List<String> cmd, Map<String, String> env, Path workDir, String logBase)
      throws IOException {
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(workDir.toFile());
    pb.environment().putAll(env);
    Files.writeString(
        workDir.resolve(logBase + ".cmd"),
        String.join(" ", cmd) + "\n",
        java.nio.file.StandardOpenOption.CREATE,
        java.nio.file.StandardOpenOption.APPEND);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(workDir.resolve(logBase + ".out").toFile()));
    pb.redirectError(ProcessBuilder.Redirect.appendTo(workDir.resolve(logBase + ".err").toFile()));
    return pb.start();
  }

  /** Polls {@code url} until it answers 200, the process dies, or the timeout passes. */
  static void awaitOk(String url, Process p, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!p.isAlive()) {
        throw new IllegalStateException("process exited (" + p.exitValue() + ") before " + url);
      }
      try {
        HttpResponse<Void> r =
            HTTP.send(
                HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(1)).build(),
                HttpResponse.BodyHandlers.discarding());
        if (r.statusCode() == 200) {
          return;
        }
      } catch (IOException e) {
        // not listening yet
      }
      Thread.sleep(100);
    }
    throw new IllegalStateException("not ready within " + timeout + ": " + url);
  }

  /**
   * Stops the process (TERM, then KILL after 10 s) and waits for it; then whatever it had started
   * and left behind (a load client's {@code --start-cmd} server) goes too.
   */
  static void stop(Process p) throws InterruptedException {
    if (p == null) {
      return;
    }
    List<ProcessHandle> children = p.descendants().toList();
    p.destroy();
    if (!p.waitFor(10, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      p.waitFor(10, TimeUnit.SECONDS);
    }
    for (ProcessHandle h : children) {
      if (h.isAlive()) {
        h.destroyForcibly();
        try {
          h.onExit().get(10, TimeUnit.SECONDS);
        } catch (ExecutionException | TimeoutException e) {
          // Stuck in the kernel: nothing more to do from here.
        }
      }
    }
  }

  /** Waits until nothing listens on {@code port} any more (so a restart can bind it again). */
  static void awaitPortFree(int port, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      try (ServerSocket s = new ServerSocket()) {
        s.setReuseAddress(true);
        s.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        return;
      } catch (IOException e) {
        Thread.sleep(100);
      }
    }
    throw new IllegalStateException("port " + port + " still taken after " + timeout);
  }

  static String run(Path dir, String... cmd) {
    try {
      Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes()).trim();
      return p.waitFor() == 0 ? out : "unknown";
    } catch (Exception e) {
      return "unknown";
    }
  }
}
