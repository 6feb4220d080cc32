package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.gateway.HashKeyMain;
import io.vertx.core.Vertx;
import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Whoever answers on the shared limits' Redis endpoint (redis:// is cleartext) against a real
 * {@code phasemeter proxy} JVM with a small heap ({@code -Xmx128m -XX:+ExitOnOutOfMemoryError}): a
 * fake Redis that passes the client's handshake and the script's loading, then answers each {@code
 * EVALSHA} with what the script never returns. Before the fix the first answer, a 500 MB bulk
 * string, ended the process within seconds (the client holds a reply whole, up to 512 MB), and an
 * array header of 2^31 - 1 elements as fast (the client allocates the array). Now each is refused
 * from its header, every request is still answered (by the replica's own share), and each refusal
 * is counted.
 */
class HostileRedisTest {
  static final String KEY = "sk-hostile-redis";

  @TempDir Path dir;
  private final Vertx vertx = Vertx.vertx();
  private FakeRedis redis;
  private ProxyJvm proxy;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  @AfterEach
  void stop() throws Exception {
    if (proxy != null) {
      proxy.close();
    }
    if (redis != null) {
      redis.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  /** What the fake answers an EVALSHA with, by name. */
  private static Map<String, FakeRedis.Answer> attacks() {
    Map<String, FakeRedis.Answer> a = new LinkedHashMap<>();
    a.put("a 500 MB bulk string", out -> streamed(out, "$524288000\r\n", 524_288_000L));
    a.put("an array of 2^31 - 1 elements", out -> write(out, "*2147483647\r\n"));
    a.put("a 500 MB simple string", out -> streamed(out, "+", 524_288_000L));
    a.put("a line ending in \\n alone, then 500 MB", out -> streamed(out, ":1\n", 524_288_000L));
    a.put("arrays nested 100 deep", out -> write(out, "*1\r\n".repeat(100) + ":1\r\n"));
    a.put("a string where the integers go", out -> write(out, "$2\r\n12\r\n"));
    a.put(
        "a string among the integers",
        out -> write(out, "*6\r\n:1\r\n$1\r\n0\r\n:59\r\n:0\r\n:-1\r\n:-1\r\n"));
    a.put("five integers", out -> write(out, "*5\r\n:1\r\n:0\r\n:59\r\n:0\r\n:-1\r\n"));
    a.put(
        "a nested array", out -> write(out, "*6\r\n*1\r\n:1\r\n:0\r\n:59\r\n:0\r\n:-1\r\n:-1\r\n"));
    a.put(
        "more remaining than the limit",
        out -> write(out, "*6\r\n:1\r\n:0\r\n:999999\r\n:0\r\n:-1\r\n:-1\r\n"));
    return a;
  }

  @Test
  void repliesTheScriptNeverSendsAreRefusedCountedAndDecidedLocally() throws Exception {
    int backendPort = ProxyJvm.completionBackend(vertx);
    redis = FakeRedis.start();
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: team, sha256: \"" + HashKeyMain.hash(KEY) + "\", rpm: 100000}\n...\n");
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml,
        ProxyTestBase.yaml(backendPort, "")
            + "telemetry: {sampling: {ratio: 0.0, keep_errors: false, keep_slower_than: 1h}}\n"
            + "auth:\n"
            + "  enabled: true\n"
            + "  keys_file: "
            + keys
            + "\n"
            + "  shared_limits: {enabled: true, endpoints: ['redis://127.0.0.1:"
            + redis.port()
            + "'], timeout: 250ms}\n");
    proxy =
        ProxyJvm.start(yaml, dir.resolve("proxy.out"), "-Xmx128m", "-XX:+ExitOnOutOfMemoryError");
    int requests = 0;
    for (Map.Entry<String, FakeRedis.Answer> attack : attacks().entrySet()) {
      redis.answer = attack.getValue();
      int asked = redis.evals.get();
      // Within a second of a refusal the replica does not ask; then the next request does.
      Awaitility.await(attack.getKey())
          .atMost(Duration.ofSeconds(15))
          .pollInterval(Duration.ofMillis(100))
          .until(
              () -> {
                int status = sendOrDied();
                assertThat(proxy.process.isAlive())
                    .as("alive while Redis sends %s: %s", attack.getKey(), proxy.stdout())
                    .isTrue();
                assertThat(status)
                    .as("answered while Redis sends %s", attack.getKey())
                    .isEqualTo(200);
                return redis.evals.get() > asked;
              });
      requests++;
    }
    // The last answer has been sent; the request it was for has been decided.
    assertThat(send()).isEqualTo(200);
    assertThat(proxy.process.isAlive()).as("alive: %s", proxy.stdout()).isTrue();
    double refused = metric("llm_shared_limits_fallbacks_total\\{reason=\"bad_reply\"}");
    System.out.printf(
        "hostile redis: %d attacks, %.0f decisions refused the reply, fallbacks by reason: %s%n",
        requests, refused, metricLines("llm_shared_limits_fallbacks_total"));
    // A reply the replica could not read within shared_limits.timeout (250 ms: a large hostile
    // reply on a loaded machine) is cut as a timeout before it can be refused; either way the
    // request was decided locally and the fallback counted.
    double timedOut = metric("llm_shared_limits_fallbacks_total\\{reason=\"timeout\"}");
    assertThat(refused + timedOut)
        .as("each refused reply counted (bad_reply, or timeout under load)")
        .isGreaterThanOrEqualTo(requests);
    assertThat(String.join("\n", proxy.stdout()))
        .as("the reply's bytes are never logged")
        .doesNotContain("xxxxxxxx");
  }

  /** {@link #send}, or -1 when the connection failed (then the process has a moment to exit). */
  private int sendOrDied() throws Exception {
    try {
      return send();
    } catch (IOException e) {
      proxy.process.waitFor(5, TimeUnit.SECONDS);
      return -1;
    }
  }

  private int send() throws Exception {
    HttpRequest req =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + proxy.port + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(10))
            .header("authorization", "Bearer " + KEY)
            .header("content-type", "application/json")
            .POST(
                HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"))
            .build();
    return http.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
  }

  private double metric(String nameAndLabels) throws Exception {
    Matcher m =
        Pattern.compile("(?m)^" + nameAndLabels + " ([0-9.eE+-]+)$").matcher(proxy.metrics());
    return m.find() ? Double.parseDouble(m.group(1)) : 0;
  }

  private List<String> metricLines(String name) throws Exception {
    return proxy.metrics().lines().filter(l -> l.startsWith(name)).toList();
  }

  private static void write(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.US_ASCII));
    out.flush();
  }

  /** {@code head}, then {@code bytes} of 'x' from a loop, until sent or the connection is gone. */
  private static void streamed(OutputStream out, String head, long bytes) throws IOException {
    write(out, head);
    byte[] chunk = new byte[64 * 1024];
    Arrays.fill(chunk, (byte) 'x');
    for (long sent = 0; sent < bytes; sent += chunk.length) {
      out.write(chunk, 0, (int) Math.min(chunk.length, bytes - sent));
    }
    out.flush();
  }

  /**
   * Enough of Redis on a loopback port to pass the Vert.x client's handshake ({@code HELLO} is
   * refused as an old server's, so {@code PING}) and {@code SCRIPT LOAD}; every {@code EVALSHA} or
   * {@code EVAL} is answered with {@link #answer}, and the takes among them are counted. A thread
   * per connection.
   */
  static final class FakeRedis implements AutoCloseable {
    interface Answer {
      void write(OutputStream out) throws IOException;
    }

    private final ServerSocket server;
    private final ConcurrentLinkedQueue<Socket> sockets = new ConcurrentLinkedQueue<>();
    final AtomicInteger evals = new AtomicInteger();
    volatile Answer answer = out -> HostileRedisTest.write(out, "-ERR no answer set\r\n");

    private FakeRedis(ServerSocket server) {
      this.server = server;
    }

    static FakeRedis start() throws IOException {
      FakeRedis r =
          new FakeRedis(new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress()));
      Thread t = new Thread(r::accept, "fake-redis-accept");
      t.setDaemon(true);
      t.start();
      return r;
    }

    int port() {
      return server.getLocalPort();
    }

    private void accept() {
      while (!server.isClosed()) {
        try {
          Socket s = server.accept();
          sockets.add(s);
          Thread t = new Thread(() -> serve(s), "fake-redis-conn");
          t.setDaemon(true);
          t.start();
        } catch (IOException closed) {
          return;
        }
      }
    }

    private void serve(Socket s) {
      try (s) {
        InputStream in = new BufferedInputStream(s.getInputStream());
        OutputStream out = s.getOutputStream();
        while (true) {
          List<String> cmd = command(in);
          switch (cmd.get(0).toUpperCase(Locale.ROOT)) {
            case "PING" -> HostileRedisTest.write(out, "+PONG\r\n");
            case "SCRIPT" -> HostileRedisTest.write(out, "$40\r\n" + "0".repeat(40) + "\r\n");
            case "EVALSHA", "EVAL" -> {
              // EVALSHA sha 2 key:r key:t rpm tpm what n ttl: count the takes, not the gives.
              if (cmd.size() > 7 && (cmd.get(7).equals("r") || cmd.get(7).equals("t"))) {
                evals.incrementAndGet();
              }
              answer.write(out);
            }
            default -> HostileRedisTest.write(out, "-ERR unknown command '" + cmd.get(0) + "'\r\n");
          }
        }
      } catch (IOException gone) {
        // the proxy closed the connection
      }
    }

    /** One command: an array of bulk strings, as the client sends them. */
    private static List<String> command(InputStream in) throws IOException {
      String head = line(in);
      if (!head.startsWith("*")) {
        throw new IOException("not a command: " + head);
      }
      int n = Integer.parseInt(head.substring(1));
      List<String> args = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        int len = Integer.parseInt(line(in).substring(1));
        byte[] b = in.readNBytes(len + 2);
        if (b.length < len + 2) {
          throw new EOFException();
        }
        args.add(new String(b, 0, len, StandardCharsets.UTF_8));
      }
      return args;
    }

    private static String line(InputStream in) throws IOException {
      StringBuilder sb = new StringBuilder();
      int c;
      while ((c = in.read()) != '\n') {
        if (c < 0) {
          throw new EOFException();
        }
        if (c != '\r') {
          sb.append((char) c);
        }
      }
      return sb.toString();
    }

    @Override
    public void close() throws IOException {
      server.close();
      for (Socket s : sockets) {
        s.close();
      }
    }
  }
}
