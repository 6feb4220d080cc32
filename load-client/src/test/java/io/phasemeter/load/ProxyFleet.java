package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;

/**
 * A fleet as a Kubernetes Service sees it: {@code phasemeter proxy} processes (ProxyMain in JVMs of
 * their own, as users run it, from this worktree's classes), replica {@code i}'s admin listener on
 * {@code 127.0.0.(i+1)} and one port shared by all (as every pod of a headless Service has the same
 * admin port), and a real nginx in front that spreads requests round-robin over their public
 * listeners and logs, per request, the trace id, the replica that served it and the status: the
 * truth the join is checked against.
 */
final class ProxyFleet implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening on http://[^:]+:(\\d+)");
  private static final Pattern ADMIN = Pattern.compile("^admin: http://[^:]+:(\\d+)");
  static final String NGINX = "/usr/sbin/nginx";

  /** One proxy process. */
  record Replica(Process process, Path output, int port, String adminHost, int adminPort) {
    /** {@code host:port} of the admin listener: the replica's name in the load client's output. */
    String name() {
      return adminHost + ":" + adminPort;
    }

    String adminUrl() {
      return "http://" + name();
    }
  }

  /** One request nginx passed on: its trace id, the proxy port that answered last, the status. */
  record Logged(String traceId, int proxyPort, int status) {}

  private final Path dir;
  final List<Replica> replicas = new ArrayList<>();
  final int adminPort;
  private Process nginx;
  int frontPort;

  private ProxyFleet(Path dir, int adminPort) {
    this.dir = dir;
    this.adminPort = adminPort;
  }

  /** Whether nginx is installed here; under CI=true a missing one is a failure, not a skip. */
  static boolean nginxPresent() {
    boolean present = Files.isExecutable(Path.of(NGINX));
    assertThat(present || !"true".equals(System.getenv("CI")))
        .as("nginx is missing under CI=true (.ci/run installs it)")
        .isTrue();
    return present;
  }

  /** {@code n} proxies in front of {@code upstreamPort}, and nginx in front of them. */
  static ProxyFleet start(Path dir, int n, int upstreamPort) throws Exception {
    ProxyFleet f = new ProxyFleet(dir, freePortOnEvery(n));
    try {
      f.startProxies(n, upstreamPort);
      f.startNginx();
    } catch (Exception | Error e) {
      f.close();
      throw e;
    }
    return f;
  }

  /** A port free on 127.0.0.1 … 127.0.0.n at once (tried, then closed: a small race, retried). */
  private static int freePortOnEvery(int n) throws IOException {
    for (int attempt = 0; attempt < 20; attempt++) {
      int port;
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
        port = s.getLocalPort();
      }
      List<ServerSocket> held = new ArrayList<>();
      try {
        for (int i = 1; i <= n; i++) {
          ServerSocket s = new ServerSocket();
          held.add(s);
          s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0." + i), port));
        }
        return port;
      } catch (IOException taken) {
        // Someone has it on one of the addresses: another port.
      } finally {
        for (ServerSocket s : held) {
          s.close();
        }
      }
    }
    throw new IOException("no port free on every loopback address");
  }

  private void startProxies(int n, int upstreamPort) throws Exception {
    ExecutorService starting = Executors.newFixedThreadPool(n);
    try {
      List<Future<Replica>> started = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        String host = "127.0.0." + (i + 1);
        Path yaml = dir.resolve("proxy-" + i + ".yaml");
        Files.writeString(
            yaml,
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: "
                + host
                + ", port: "
                + adminPort
                + "}\n"
                + "pools:\n"
                + "  - name: default\n"
                + "    models: [sim-llama]\n"
                + "    upstreams: [http://127.0.0.1:"
                + upstreamPort
                + "]\n"
                + "    slots: 64\n"
                + "    health: {path: null}\n"
                + "telemetry: {sampling: {ratio: 0.0, keep_errors: false, keep_slower_than: 1h}}\n");
        Path out = dir.resolve("proxy-" + i + ".out");
        started.add(starting.submit(() -> startProxy(yaml, out, host)));
      }
      Throwable failed = null;
      for (Future<Replica> f : started) {
        try {
          replicas.add(f.get());
        } catch (ExecutionException e) {
          failed = failed == null ? e.getCause() : failed;
        }
      }
      if (failed instanceof Error e) {
        throw e;
      }
      if (failed != null) {
        throw (Exception) failed;
      }
    } finally {
      starting.shutdown();
    }
  }

  /**
   * {@code java -cp <this classpath> io.phasemeter.proxy.ProxyMain --config yaml}: the first JIT
   * tier and the serial collector, as SharedLimitsReplicasTest starts its three (what is at stake
   * is the join across processes, not their speed; a start then costs about 3 CPU-seconds).
   */
  private Replica startProxy(Path yaml, Path out, String adminHost) throws Exception {
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                System.getProperty("java.class.path"),
                "io.phasemeter.proxy.ProxyMain",
                "--config",
                yaml.toString())
            .redirectErrorStream(true)
            .redirectOutput(out.toFile())
            .start();
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> port(out, ADMIN) > 0 && port(out, LISTENING) > 0 || !p.isAlive());
    assertThat(p.isAlive()).as("proxy started: %s", lines(out)).isTrue();
    return new Replica(p, out, port(out, LISTENING), adminHost, port(out, ADMIN));
  }

  /** nginx on loopback, its own prefix, pid and logs in the temp dir, round-robin. */
  private void startNginx() throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
      frontPort = s.getLocalPort();
    }
    Path prefix = Files.createDirectories(dir.resolve("nginx"));
    Files.createDirectories(prefix.resolve("logs"));
    StringBuilder servers = new StringBuilder();
    for (Replica r : replicas) {
      // One failure takes a replica out for the rest of the test: a killed one is not tried again.
      servers
          .append("    server 127.0.0.1:")
          .append(r.port())
          .append(" max_fails=1 fail_timeout=60s;\n");
    }
    String tmp = Files.createDirectories(prefix.resolve("tmp")).toString();
    Path conf = prefix.resolve("nginx.conf");
    Files.writeString(
        conf,
        "worker_processes 1;\n"
            + "daemon off;\n"
            + "pid "
            + prefix.resolve("nginx.pid")
            + ";\n"
            + "error_log "
            + prefix.resolve("logs/error.log")
            + " warn;\n"
            + "events { worker_connections 1024; }\n"
            + "http {\n"
            + "  log_format fleet '$http_traceparent $upstream_addr $status';\n"
            + "  access_log "
            + prefix.resolve("logs/access.log")
            + " fleet;\n"
            + "  client_body_temp_path "
            + tmp
            + "/body;\n"
            + "  proxy_temp_path "
            + tmp
            + "/proxy;\n"
            + "  fastcgi_temp_path "
            + tmp
            + "/fastcgi;\n"
            + "  uwsgi_temp_path "
            + tmp
            + "/uwsgi;\n"
            + "  scgi_temp_path "
            + tmp
            + "/scgi;\n"
            + "  upstream proxies {\n"
            + servers
            + "    keepalive 32;\n"
            + "  }\n"
            + "  server {\n"
            + "    listen 127.0.0.1:"
            + frontPort
            + ";\n"
            + "    location / {\n"
            + "      proxy_pass http://proxies;\n"
            + "      proxy_http_version 1.1;\n"
            + "      proxy_set_header Connection \"\";\n"
            + "      proxy_buffering off;\n"
            + "      proxy_read_timeout 60s;\n"
            + "    }\n"
            + "  }\n"
            + "}\n");
    nginx =
        new ProcessBuilder(
                NGINX, "-p", prefix.toString(), "-c", conf.toString(), "-e", "logs/error.log")
            .redirectErrorStream(true)
            .redirectOutput(prefix.resolve("logs/stdout.log").toFile())
            .start();
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> accepts(frontPort) || !nginx.isAlive());
    assertThat(nginx.isAlive())
        .as("nginx started: %s", lines(prefix.resolve("logs/error.log")))
        .isTrue();
  }

  private static boolean accepts(int port) {
    try (java.net.Socket s = new java.net.Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 500);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * {@code n} chat requests through the front, six at a time, before any measured run: the proxies
   * run their first requests in the interpreter, and a first run of seconds would see a handful.
   */
  void warmUp(int n) throws Exception {
    java.net.http.HttpClient http =
        java.net.http.HttpClient.newBuilder()
            .version(java.net.http.HttpClient.Version.HTTP_1_1)
            .build();
    java.net.http.HttpRequest req =
        java.net.http.HttpRequest.newBuilder(java.net.URI.create(url() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(30))
            .header("content-type", "application/json")
            .POST(
                java.net.http.HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"sim-llama\",\"max_tokens\":8,"
                        + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"))
            .build();
    ExecutorService pool = Executors.newFixedThreadPool(6);
    try {
      List<Future<Integer>> sent = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        sent.add(
            pool.submit(
                () ->
                    http.send(req, java.net.http.HttpResponse.BodyHandlers.discarding())
                        .statusCode()));
      }
      for (Future<Integer> f : sent) {
        assertThat(f.get()).isEqualTo(200);
      }
    } finally {
      pool.shutdown();
    }
  }

  /** The front's URL: what the load client's --url is. */
  String url() {
    return "http://127.0.0.1:" + frontPort;
  }

  /** Kills replica {@code i} at once (SIGKILL), as a node failure would, and waits for it. */
  void kill(int i) throws InterruptedException {
    replicas.get(i).process().destroyForcibly().waitFor(10, TimeUnit.SECONDS);
  }

  /** The requests nginx logged whose trace id starts with {@code prefix}, by trace id. */
  Map<String, Logged> logged(String prefix) throws IOException {
    Map<String, Logged> out = new HashMap<>();
    for (String line : lines(dir.resolve("nginx/logs/access.log"))) {
      String[] f = line.trim().split(" ");
      if (f.length < 3 || !f[0].startsWith("00-")) {
        continue;
      }
      String traceId = f[0].substring(3, 35);
      if (!traceId.startsWith(prefix)) {
        continue;
      }
      // "$upstream_addr" lists every replica tried ("a, b" after a refused connection): the last
      // answered.
      String last = f[f.length - 2];
      int port =
          last.contains(":") ? Integer.parseInt(last.substring(last.lastIndexOf(':') + 1)) : -1;
      out.put(traceId, new Logged(traceId, port, Integer.parseInt(f[f.length - 1])));
    }
    return out;
  }

  /** Requests nginx has logged as answered 200 by replica {@code r} so far, every run's. */
  long served(Replica r) throws IOException {
    String port = ":" + r.port() + " ";
    return lines(dir.resolve("nginx/logs/access.log")).stream()
        .filter(l -> l.contains(port) && l.endsWith(" 200"))
        .count();
  }

  /** The replica whose public listener is {@code port}, or null. */
  Replica byPort(int port) {
    return replicas.stream().filter(r -> r.port() == port).findFirst().orElse(null);
  }

  @Override
  public void close() throws InterruptedException {
    if (nginx != null && nginx.isAlive()) {
      nginx.destroy();
      if (!nginx.waitFor(10, TimeUnit.SECONDS)) {
        nginx.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
    for (Replica r : replicas) {
      if (r.process().isAlive()) {
        r.process().destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
  }

  static List<String> lines(Path file) throws IOException {
    return Files.exists(file) ? Files.readAllLines(file) : List.of();
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
