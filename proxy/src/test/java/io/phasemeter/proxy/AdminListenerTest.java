package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.vertx.core.Vertx;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.GZIPOutputStream;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The admin listener's side doors, against {@code phasemeter proxy} in a JVM of its own with a
 * small heap ({@code -Xmx128m -XX:+ExitOnOutOfMemoryError}) or a small file descriptor limit.
 * Before round 2 of the hardening: an 8 MB OTLP body of four million empty spans ended the process
 * with OutOfMemoryError, decoded although engine spans were off; and the admin listener had no
 * bound on connections or on how long a head may take, so held connections exhausted the
 * descriptors and the public listener stopped accepting.
 */
class AdminListenerTest {
  private static final Pattern PUBLIC_MAX = Pattern.compile("connections: public at most (\\d+)");

  @TempDir Path dir;

  private final Vertx vertx = Vertx.vertx();
  private final List<ProxyJvm> proxies = new ArrayList<>();
  private final List<Socket> sockets = new ArrayList<>();
  private int backendPort;

  @BeforeEach
  void backend() throws Exception {
    backendPort = ProxyJvm.completionBackend(vertx);
  }

  @AfterEach
  void tearDown() throws Exception {
    for (Socket s : sockets) {
      s.close();
    }
    for (ProxyJvm p : proxies) {
      p.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  @Test
  void anOtlpBombIsRefusedUnreadWhileEngineSpansAreOffAndReadWithinBoundsWhenOn() throws Exception {
    // The 8,000,010 bytes: under the 8 MiB that the admin listener used to accept.
    byte[] bomb = emptySpans(4_000_000);
    assertThat(bomb).hasSize(8_000_010);

    ProxyJvm off = start("", "-Xmx128m", "-XX:+ExitOnOutOfMemoryError");
    Reply refused = post(off.adminPort, bomb, null);
    assertThat(refused.status).isEqualTo(404);
    assertThat(refused.text()).contains("telemetry.engine_spans.enabled: false");
    assertThat(off.process.isAlive()).isTrue();
    assertThat(chat(off.port)).isEqualTo(200);
    assertThat(off.metrics()).contains("llm_engine_span_exports_total{result=\"disabled\"} 1.0");

    ProxyJvm on =
        start(
            "telemetry: {engine_spans: {enabled: true}}\n",
            "-Xmx128m",
            "-XX:+ExitOnOutOfMemoryError");
    long before = on.heapAfterGc();
    // Past max_body_bytes (4 MiB): 413 before the body is read.
    assertThat(post(on.adminPort, bomb, null).status).isEqualTo(413);
    // Within it, two million empty spans: the first 2,048 are read, the rest refused as OTLP's
    // partial success, which the exporter neither retries nor reports as a failure.
    byte[] within = emptySpans(2_000_000);
    Reply partial = post(on.adminPort, within, null);
    assertThat(partial.status).isEqualTo(200);
    ExportTraceServiceResponse response = ExportTraceServiceResponse.parseFrom(partial.body);
    assertThat(response.getPartialSuccess().getRejectedSpans()).isEqualTo(2_000_000 - 2_048);
    assertThat(response.getPartialSuccess().getErrorMessage())
        .contains("telemetry.engine_spans.max_spans");
    // A gzip bomb: 32 million empty spans, 64 MiB inflated from ~64 KiB on the wire: 413 once
    // 4 MiB have been inflated.
    byte[] gzipBomb = gzipEmptySpans(32 << 20);
    assertThat(gzipBomb.length).isLessThan(1 << 20);
    Reply inflated = post(on.adminPort, gzipBomb, "gzip");
    assertThat(inflated.status).isEqualTo(413);
    // Sixteen bodies at once: at most four are received together, the others are told to retry.
    ExecutorService pool = Executors.newFixedThreadPool(16);
    try {
      List<Future<Reply>> replies = new ArrayList<>();
      for (int i = 0; i < 16; i++) {
        replies.add(pool.submit(() -> post(on.adminPort, within, null)));
      }
      int ok = 0;
      for (Future<Reply> r : replies) {
        int status = r.get(60, TimeUnit.SECONDS).status;
        assertThat(status).isIn(200, 503);
        ok += status == 200 ? 1 : 0;
      }
      assertThat(ok).isPositive();
    } finally {
      pool.shutdownNow();
    }
    assertThat(on.process.isAlive()).as("alive: %s", on.stdout()).isTrue();
    assertThat(chat(on.port)).isEqualTo(200);
    long after = on.heapAfterGc();
    System.out.printf(
        "otlp bombs: heap after GC %.1f MiB before, %.1f MiB after%n",
        before / 1048576.0, after / 1048576.0);
    assertThat(after - before).as("heap growth after GC").isLessThan(32L << 20);
    String m = on.metrics();
    assertThat(m).contains("llm_engine_span_exports_total{result=\"too_large\"} 2.0");
    assertThat(m).containsPattern("llm_engine_span_exports_total\\{result=\"partial\"} [1-9]");
    assertThat(m).containsPattern("llm_engine_spans_refused_total [1-9]");
  }

  @Test
  void aFloodOnEitherListenerNeverTakesTheOtherDown() throws Exception {
    ProxyJvm proxy =
        ProxyJvm.startWithDescriptorLimit(
            1024,
            write("admin: {host: 127.0.0.1, port: 0, receive_timeout: 3s}\n"),
            dir.resolve("fd.out"),
            "-Xmx128m",
            "-XX:+ExitOnOutOfMemoryError");
    proxies.add(proxy);
    int publicMax = publicMax(proxy);
    assertThat(publicMax).isBetween(100, 1024 - 256);

    // 600 half-sent heads on the admin listener: 256 are held, the rest closed when accepted.
    byte[] halfHead = "GET /metrics HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII);
    List<Socket> admin = open(proxy.adminPort, 600, halfHead);
    assertThat(chat(proxy.port))
        .as("public served while the admin listener is full")
        .isEqualTo(200);
    // admin.receive_timeout (3 s) later every held head has been cut too.
    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> allClosed(admin));
    assertThat(status(proxy.adminPort, "/health/ready")).isEqualTo(200);
    String m = proxy.metrics();
    // Every one of the 600 was either closed when accepted or cut at the timeout (however slowly
    // this machine opened them), and never more than 256 were held at once.
    double refused = value(m, "llm_listener_connections_refused_total{listener=\"admin\"}");
    double timedOut = value(m, "llm_listener_head_timeouts_total{listener=\"admin\"}");
    assertThat(refused).isPositive();
    assertThat(refused + timedOut).isGreaterThanOrEqualTo(600);
    assertThat(value(m, "llm_listener_connections_limit{listener=\"admin\"}")).isEqualTo(256);

    // More idle connections on the public listener than its share: the share is held, the rest
    // closed when accepted, and the admin listener still has descriptors to answer with.
    List<Socket> flood = open(proxy.port, publicMax + 100, new byte[0]);
    Awaitility.await()
        .atMost(Duration.ofSeconds(20))
        .until(
            () ->
                value(proxy.metrics(), "llm_listener_connections{listener=\"public\"}")
                    == publicMax);
    assertThat(status(proxy.adminPort, "/health/ready")).isEqualTo(200);
    assertThat(
            value(proxy.metrics(), "llm_listener_connections_refused_total{listener=\"public\"}"))
        .isGreaterThanOrEqualTo(100);
    for (Socket s : flood) {
      s.close();
    }
    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> chat(proxy.port) == 200);
    assertThat(proxy.process.isAlive()).isTrue();
    assertThat(String.join("\n", proxy.stdout())).doesNotContain("Too many open files");
  }

  private ProxyJvm start(String extra, String... jvmArgs) throws Exception {
    Path yaml = write(extra);
    ProxyJvm p = ProxyJvm.start(yaml, dir.resolve("proxy-" + proxies.size() + ".out"), jvmArgs);
    proxies.add(p);
    return p;
  }

  private Path write(String extra) throws IOException {
    Path yaml = dir.resolve("proxy-" + proxies.size() + ".yaml");
    String text = ProxyTestBase.yaml(backendPort, "");
    if (extra.startsWith("admin:")) {
      text = text.replace("admin: {host: 127.0.0.1, port: 0}\n", "");
    }
    Files.writeString(yaml, text + extra);
    return yaml;
  }

  private static int publicMax(ProxyJvm proxy) throws IOException {
    for (String line : proxy.stdout()) {
      Matcher m = PUBLIC_MAX.matcher(line);
      if (m.find()) {
        return Integer.parseInt(m.group(1));
      }
    }
    throw new AssertionError("no connections line: " + proxy.stdout());
  }

  private List<Socket> open(int port, int n, byte[] send) throws IOException {
    List<Socket> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Socket s = new Socket("127.0.0.1", port);
      sockets.add(s);
      out.add(s);
      if (send.length > 0) {
        try {
          s.getOutputStream().write(send);
        } catch (IOException closedAlready) {
          // Refused: closed as soon as it was accepted.
        }
      }
    }
    return out;
  }

  /** Whether the proxy has closed every one of {@code sockets} (a read sees the end). */
  private static boolean allClosed(List<Socket> sockets) throws IOException {
    for (Socket s : sockets) {
      if (s.isClosed()) {
        continue;
      }
      s.setSoTimeout(1);
      try {
        if (s.getInputStream().read() >= 0) {
          return false;
        }
        s.close();
      } catch (SocketTimeoutException open) {
        return false;
      } catch (IOException reset) {
        s.close();
      }
    }
    return true;
  }

  /** An ExportTraceServiceRequest of {@code n} empty spans in one scope, two bytes each. */
  static byte[] emptySpans(int n) {
    ByteArrayOutputStream spans = new ByteArrayOutputStream(2 * n);
    for (int i = 0; i < n; i++) {
      spans.write(0x12);
      spans.write(0);
    }
    // ExportTraceServiceRequest.resource_spans (1) → ResourceSpans.scope_spans (2) → the spans.
    return field(0x0a, field(0x12, spans.toByteArray()));
  }

  private static byte[] field(int tag, byte[] value) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(value.length + 12);
    out.writeBytes(lengthPrefix(tag, value.length));
    out.writeBytes(value);
    return out.toByteArray();
  }

  /** {@link #emptySpans} gzip-compressed, written as it is compressed. */
  private static byte[] gzipEmptySpans(int n) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
      byte[] spans = emptySpans(1 << 16);
      // The head of emptySpans(n): the two wrappers' tags and lengths, then n two-byte spans.
      byte[] inner = lengthPrefix(0x12, 2L * n);
      byte[] outer = lengthPrefix(0x0a, inner.length + 2L * n);
      gz.write(outer);
      gz.write(inner);
      int head = spans.length - 2 * (1 << 16);
      for (int i = 0; i < n / (1 << 16); i++) {
        gz.write(spans, head, spans.length - head);
      }
    }
    return out.toByteArray();
  }

  private static byte[] lengthPrefix(int tag, long length) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(tag);
    long v = length;
    while (v >= 0x80) {
      out.write((int) (v & 0x7f) | 0x80);
      v >>>= 7;
    }
    out.write((int) v);
    return out.toByteArray();
  }

  record Reply(int status, byte[] body) {
    String text() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }

  /**
   * POSTs an OTLP body to /v1/traces over a raw socket: the body is written from another thread,
   * since a refusal answers (and closes) before reading it.
   */
  private static Reply post(int admin, byte[] body, String encoding) throws Exception {
    try (Socket s = new Socket("127.0.0.1", admin)) {
      s.setSoTimeout(60_000);
      OutputStream out = s.getOutputStream();
      String head =
          "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
              + (encoding == null ? "" : "Content-Encoding: " + encoding + "\r\n")
              + "Content-Length: "
              + body.length
              + "\r\nConnection: close\r\n\r\n";
      out.write(head.getBytes(StandardCharsets.US_ASCII));
      Thread writer =
          new Thread(
              () -> {
                try {
                  out.write(body);
                  out.flush();
                } catch (IOException refusedUnread) {
                  // The proxy answered and closed without reading the rest.
                }
              });
      writer.start();
      byte[] response = readResponse(s.getInputStream());
      writer.join(60_000);
      String text = new String(response, StandardCharsets.ISO_8859_1);
      int status = Integer.parseInt(text.substring(9, 12));
      int split = text.indexOf("\r\n\r\n");
      byte[] payload = new byte[response.length - split - 4];
      System.arraycopy(response, split + 4, payload, 0, payload.length);
      return new Reply(status, payload);
    }
  }

  /** Reads a response to its end (Connection: close), keeping what arrived before a reset. */
  private static byte[] readResponse(InputStream in) throws IOException {
    ByteArrayOutputStream got = new ByteArrayOutputStream();
    byte[] buf = new byte[8192];
    try {
      for (int n; (n = in.read(buf)) >= 0; ) {
        got.write(buf, 0, n);
      }
    } catch (IOException reset) {
      if (got.size() == 0) {
        throw reset;
      }
    }
    return got.toByteArray();
  }

  private static int chat(int port) throws IOException {
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
    try {
      return c.getResponseCode();
    } finally {
      c.disconnect();
    }
  }

  private static int status(int port, String path) throws IOException {
    HttpURLConnection c =
        (HttpURLConnection) URI.create("http://127.0.0.1:" + port + path).toURL().openConnection();
    c.setConnectTimeout(5000);
    c.setReadTimeout(10000);
    try {
      return c.getResponseCode();
    } finally {
      c.disconnect();
    }
  }

  private static double value(String metrics, String series) {
    for (String line : metrics.split("\n")) {
      if (line.startsWith(series + " ")) {
        return Double.parseDouble(line.substring(series.length() + 1).trim());
      }
    }
    return -1;
  }
}
