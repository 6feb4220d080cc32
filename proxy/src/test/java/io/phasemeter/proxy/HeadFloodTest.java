package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Vertx;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The process itself at stake: a real {@code phasemeter proxy} JVM with the Docker image's heap
 * ({@code -Xmx256m -XX:+ExitOnOutOfMemoryError}), and 400 connections that each send a request head
 * declaring a 10 MiB body and then one byte, with no key. Before the fix each head sized a buffer
 * from its declared length (up to 1 MiB) and 200 such connections killed the process; now each
 * holds what arrived, the proxy serves a good request in the middle of the flood, and its heap
 * after a full collection stays flat. (The refusal past {@code limits.max_concurrent_uploads} is
 * {@code HardeningTest}'s.)
 */
class HeadFloodTest {
  private static final int CONNECTIONS = 400;

  @TempDir Path dir;

  private final Vertx vertx = Vertx.vertx();
  private ProxyJvm proxy;
  private Process process;

  @AfterEach
  void tearDown() throws Exception {
    if (proxy != null) {
      proxy.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  @Test
  void fourHundredHeadsPromisingTenMebibytesLeaveA256MebibyteProxyServingWithAFlatHeap()
      throws Exception {
    int backendPort = ProxyJvm.completionBackend(vertx);
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml,
        "listen: {host: 127.0.0.1, port: 0}\n"
            + "admin: {host: 127.0.0.1, port: 0}\n"
            + "pools:\n"
            + "  - name: default\n"
            + "    models: [sim-llama]\n"
            + "    upstreams: [http://127.0.0.1:"
            + backendPort
            + "]\n"
            + "    health: {path: null}\n"
            + "limits: {max_concurrent_uploads: 512}\n");
    proxy =
        ProxyJvm.start(yaml, dir.resolve("proxy.out"), "-Xmx256m", "-XX:+ExitOnOutOfMemoryError");
    process = proxy.process;
    int port = proxy.port;
    int admin = proxy.adminPort;
    assertThat(post(port)).isEqualTo(200);
    long before = proxy.heapAfterGc();

    List<Socket> flood = new ArrayList<>();
    try {
      byte[] head =
          ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + "Content-Length: 10485760\r\n\r\n{")
              .getBytes(StandardCharsets.US_ASCII);
      for (int i = 0; i < CONNECTIONS; i++) {
        Socket s = new Socket("127.0.0.1", port);
        s.getOutputStream().write(head);
        s.getOutputStream().flush();
        flood.add(s);
      }
      // Every head has been read and each body is being received.
      Awaitility.await()
          .atMost(Duration.ofSeconds(30))
          .until(() -> gauge(admin, "llm_request_uploads") == CONNECTIONS || !process.isAlive());
      assertThat(process.isAlive()).as("alive under the flood: %s", proxy.stdout()).isTrue();
      assertThat(post(port)).as("a good request is served in the flood").isEqualTo(200);
      long during = proxy.heapAfterGc();
      System.out.printf(
          "head flood: %d connections; heap after GC %.1f MiB before, %.1f MiB during%n",
          CONNECTIONS, before / 1048576.0, during / 1048576.0);
      assertThat(during - before).as("heap growth after GC under the flood").isLessThan(32L << 20);
    } finally {
      for (Socket s : flood) {
        s.close();
      }
    }
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> post(port) == 200);
    assertThat(process.isAlive()).isTrue();
  }

  private static int post(int port) throws IOException {
    HttpURLConnection c =
        (HttpURLConnection)
            URI.create("http://127.0.0.1:" + port + "/v1/chat/completions")
                .toURL()
                .openConnection();
    c.setRequestMethod("POST");
    c.setDoOutput(true);
    c.setConnectTimeout(5000);
    c.setReadTimeout(10000);
    c.setRequestProperty("content-type", "application/json");
    try (OutputStream out = c.getOutputStream()) {
      out.write(
          "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
              .getBytes(StandardCharsets.UTF_8));
    }
    int status = c.getResponseCode();
    c.disconnect();
    return status;
  }

  /** The value of an unlabelled gauge on /metrics, or -1. */
  private static double gauge(int admin, String name) throws IOException {
    HttpURLConnection c =
        (HttpURLConnection)
            URI.create("http://127.0.0.1:" + admin + "/metrics").toURL().openConnection();
    try (InputStream in = c.getInputStream()) {
      String text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      Matcher m = Pattern.compile("(?m)^" + name + " (\\S+)$").matcher(text);
      return m.find() ? Double.parseDouble(m.group(1)) : -1;
    }
  }
}
