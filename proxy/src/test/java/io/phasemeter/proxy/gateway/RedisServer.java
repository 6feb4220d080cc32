package io.phasemeter.proxy.gateway;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A real {@code redis-server} (Debian's, which {@code .ci/run} installs) on a free loopback port,
 * in a directory of its own, persisting nothing. It can be paused (SIGSTOP: it answers nothing,
 * connections stay open), resumed, killed and started again on the same port. Missing, a test is
 * skipped on a laptop and fails under {@code CI=true}.
 */
public final class RedisServer implements AutoCloseable {
  private final Path dir;
  private final int port;
  private final List<String> extraArgs;
  private Process process;

  private RedisServer(Path dir, int port, List<String> extraArgs) {
    this.dir = dir;
    this.port = port;
    this.extraArgs = extraArgs;
  }

  /** Skips the test (or fails it under CI) when {@code redis-server} is not on the PATH. */
  public static void require() {
    boolean present =
        java.util.Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
            .anyMatch(d -> Files.isExecutable(Path.of(d, "redis-server")));
    if (!present && "true".equals(System.getenv("CI"))) {
      fail("redis-server is not on PATH but CI=true: .ci/run should have installed it");
    }
    Assumptions.assumeTrue(present, "redis-server is not on PATH (apt-get install redis-server)");
  }

  /** Starts one on a free port with its files under {@code dir}. */
  public static RedisServer start(Path dir) throws Exception {
    return start(dir, List.of());
  }

  /**
   * Starts one on a free port with {@code extraArgs} added to its command line (a TLS port, a
   * password: it is ready when its plain port answers PING, or asks for the password).
   */
  public static RedisServer start(Path dir, List<String> extraArgs) throws Exception {
    require();
    RedisServer r = new RedisServer(dir, freePort(), extraArgs);
    r.startProcess();
    return r;
  }

  /** A port free on loopback now. */
  public static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  public int port() {
    return port;
  }

  /** {@code redis://127.0.0.1:<port>}. */
  public String url() {
    return "redis://127.0.0.1:" + port;
  }

  /** The process, for what the test wants to do to it. */
  public Process process() {
    return process;
  }

  /** Starts it again on the same port (after {@link #kill}). */
  public void restart() throws Exception {
    startProcess();
  }

  private void startProcess() throws Exception {
    List<String> cmd =
        new ArrayList<>(
            List.of(
                "redis-server",
                "--port",
                Integer.toString(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.toString()));
    cmd.addAll(extraArgs);
    process =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("redis-" + port + ".log").toFile())
            .start();
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        fail("redis-server exited: " + Files.readString(dir.resolve("redis-" + port + ".log")));
      }
      try {
        String pong = command("PING");
        if ("+PONG".equals(pong) || pong.startsWith("-NOAUTH")) {
          return;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      Thread.sleep(20);
    }
    fail("redis-server did not answer PING within 20 s");
  }

  /** Sends one inline command and returns the first line of the reply (tests only). */
  public String command(String inline) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(5000);
      OutputStream out = s.getOutputStream();
      out.write((inline + "\r\n").getBytes(StandardCharsets.UTF_8));
      out.flush();
      InputStream in = s.getInputStream();
      StringBuilder line = new StringBuilder();
      int c;
      while ((c = in.read()) >= 0 && c != '\n') {
        if (c != '\r') {
          line.append((char) c);
        }
      }
      return line.toString();
    }
  }

  /** Every key, as {@code KEYS *} lists them (tests only; a handful of keys). */
  public List<String> keys() throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(5000);
      s.getOutputStream().write("KEYS *\r\n".getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      java.io.BufferedReader in =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
      String head = in.readLine();
      int n = Integer.parseInt(head.substring(1));
      List<String> keys = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        in.readLine(); // $len
        keys.add(in.readLine());
      }
      return keys;
    }
  }

  /** SIGSTOP: it holds its connections and answers nothing. */
  public void pause() throws Exception {
    signal("STOP");
  }

  /** SIGCONT. */
  public void resume() throws Exception {
    signal("CONT");
  }

  /** SIGKILL, and waits until it is gone. */
  public void kill() throws InterruptedException {
    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
  }

  private void signal(String sig) throws Exception {
    Process p =
        new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid()))
            .redirectErrorStream(true)
            .start();
    p.getInputStream().readAllBytes();
    p.waitFor(10, TimeUnit.SECONDS);
  }

  @Override
  public void close() throws InterruptedException {
    if (process != null && process.isAlive()) {
      signalQuietly("CONT");
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
  }

  private void signalQuietly(String sig) {
    try {
      signal(sig);
    } catch (Exception ignored) {
      // best effort: the process is killed next anyway
    }
  }
}
