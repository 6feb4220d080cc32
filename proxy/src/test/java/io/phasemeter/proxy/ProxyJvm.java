package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;

/**
 * {@code phasemeter proxy} ({@link ProxyMain}) in a JVM of its own, as users run it, for the tests
 * where the process itself is at stake (signals, its heap). Its output goes to a file: {@code
 * Process.destroy()} closes the pipes, and lines written after it (the drain's) must not be lost.
 */
final class ProxyJvm implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening on http://[^:]+:(\\d+)");
  private static final Pattern ADMIN = Pattern.compile("^admin: http://[^:]+:(\\d+)");
  private static final Pattern HEAP =
      Pattern.compile("(?m)^jvm_memory_used_bytes\\{area=\"heap\"[^}]*\\} (\\S+)$");

  final Process process;
  final Path output;
  final int port;
  final int adminPort;

  private ProxyJvm(Process process, Path output, int port, int adminPort) {
    this.process = process;
    this.output = output;
    this.port = port;
    this.adminPort = adminPort;
  }

  /**
   * Starts {@code java [jvmArgs] -cp <this classpath> ProxyMain --config config}, its output into
   * {@code output}, and returns once it has printed both listeners' ports. Without {@code jvmArgs}
   * the JVM gets the shipped options, {@code @config/proxy.jvm}, as {@code ./phasemeter proxy}
   * gives them; a test that sizes the heap itself passes its own.
   */
  static ProxyJvm start(Path config, Path output, String... jvmArgs) throws Exception {
    return start(List.of(), config, output, java.util.Map.of(), jvmArgs);
  }

  /** {@link #start(Path, Path, String...)} with {@code env} added to its environment. */
  static ProxyJvm start(
      Path config, Path output, java.util.Map<String, String> env, String... jvmArgs)
      throws Exception {
    return start(List.of(), config, output, env, jvmArgs);
  }

  /**
   * As {@link #start(Path, Path, String...)}, under a file descriptor limit of {@code nofile} (soft
   * and hard, set by util-linux's {@code prlimit}, as a container runtime or {@code ulimit -n}
   * would).
   */
  static ProxyJvm startWithDescriptorLimit(int nofile, Path config, Path output, String... jvmArgs)
      throws Exception {
    return start(
        List.of("prlimit", "--nofile=" + nofile + ":" + nofile),
        config,
        output,
        java.util.Map.of(),
        jvmArgs);
  }

  private static ProxyJvm start(
      List<String> prefix,
      Path config,
      Path output,
      java.util.Map<String, String> env,
      String... jvmArgs)
      throws Exception {
    List<String> cmd = new ArrayList<>(prefix);
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    if (jvmArgs.length == 0) {
      cmd.add("@" + Path.of("..", "config", "proxy.jvm").toAbsolutePath().normalize());
    }
    cmd.addAll(List.of(jvmArgs));
    cmd.addAll(
        List.of(
            "-cp",
            System.getProperty("java.class.path"),
            "io.phasemeter.proxy.ProxyMain",
            "--config",
            config.toString()));
    ProcessBuilder pb =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
    pb.environment().putAll(env);
    Process p = pb.start();
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> port(output, ADMIN) > 0 && port(output, LISTENING) > 0 || !p.isAlive());
    assertThat(p.isAlive()).as("proxy started: %s", lines(output)).isTrue();
    return new ProxyJvm(p, output, port(output, LISTENING), port(output, ADMIN));
  }

  /**
   * A backend on a free loopback port that answers every request, once its body has arrived, with
   * {@link VllmScript#COMPLETION}; returns the port.
   */
  static int completionBackend(io.vertx.core.Vertx vertx) throws Exception {
    return vertx
        .createHttpServer()
        .requestHandler(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION)))
        .listen(0, "127.0.0.1")
        .await(10, TimeUnit.SECONDS)
        .actualPort();
  }

  /** The admin listener's {@code /metrics}, as Prometheus text. */
  String metrics() throws IOException {
    java.net.HttpURLConnection c =
        (java.net.HttpURLConnection)
            java.net
                .URI
                .create("http://127.0.0.1:" + adminPort + "/metrics")
                .toURL()
                .openConnection();
    c.setConnectTimeout(5000);
    c.setReadTimeout(10000);
    try (java.io.InputStream in = c.getInputStream()) {
      return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
  }

  /** The sum of every series of metric {@code name} on {@code /metrics} (0 when there is none). */
  double metricSum(String name) throws IOException {
    double sum = 0;
    Matcher m =
        Pattern.compile("(?m)^" + Pattern.quote(name) + "(\\{[^}]*})? ([0-9.eE+-]+)$")
            .matcher(metrics());
    while (m.find()) {
      sum += Double.parseDouble(m.group(2));
    }
    return sum;
  }

  /** Runs a full collection in the process ({@code jcmd GC.run}) and reads its heap in use. */
  long heapAfterGc() throws Exception {
    Process jcmd =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                Long.toString(process.pid()),
                "GC.run")
            .redirectErrorStream(true)
            .start();
    jcmd.getInputStream().readAllBytes();
    assertThat(jcmd.waitFor(30, TimeUnit.SECONDS)).isTrue();
    Matcher m = HEAP.matcher(metrics());
    double sum = 0;
    while (m.find()) {
      sum += Double.parseDouble(m.group(1));
    }
    assertThat(sum).as("heap gauges on /metrics").isPositive();
    return (long) sum;
  }

  /** What the process has printed so far. */
  List<String> stdout() throws IOException {
    return lines(output);
  }

  @Override
  public void close() throws InterruptedException {
    if (process.isAlive()) {
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
  }

  private static List<String> lines(Path output) throws IOException {
    return Files.exists(output) ? Files.readAllLines(output) : List.of();
  }

  private static int port(Path output, Pattern p) throws IOException {
    for (String line : lines(output)) {
      Matcher m = p.matcher(line);
      if (m.find()) {
        return Integer.parseInt(m.group(1));
      }
    }
    return -1;
  }
}
