package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Uploads are streamed, never held: {@code phasemeter proxy} in a JVM of its own with a heap
 * smaller than the bodies passes a 25 MB audio upload and a 96 MB one through, byte for byte. Had
 * it buffered either, it would have died of {@code OutOfMemoryError} (the JVM is told to exit on
 * one).
 */
class UploadHeapTest {
  /** Smaller than both uploads together, and than the larger alone. */
  static final String HEAP = "-Xmx48m";

  @TempDir Path dir;
  private Vertx vertx;
  private ProxyJvm proxy;

  @AfterEach
  void stop() throws Exception {
    if (proxy != null) {
      proxy.close();
    }
    if (vertx != null) {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void uploadsLargerThanTheHeapPassThroughByteForByte() throws Exception {
    vertx = Vertx.vertx();
    HttpServer backend =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  MessageDigest sha = sha256();
                  long[] n = {0};
                  req.handler(
                      b -> {
                        sha.update(b.getBytes());
                        n[0] += b.length();
                      });
                  req.endHandler(
                      v ->
                          req.response()
                              .putHeader("content-type", "application/json")
                              .end(
                                  "{\"bytes\":"
                                      + n[0]
                                      + ",\"sha256\":\""
                                      + HexFormat.of().formatHex(sha.digest())
                                      + "\"}"));
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml,
        ProxyTestBase.yaml(backend.actualPort(), "")
            + "routes:\n"
            + "  - {path: /v1/files, handler: passthrough, max_body_bytes: 134217728}\n");
    proxy = ProxyJvm.start(yaml, dir.resolve("proxy.out"), HEAP, "-XX:+ExitOnOutOfMemoryError");

    upload("/v1/audio/transcriptions", 25_000_000L, 1);
    upload("/v1/files", 96L << 20, 2);
    assertThat(proxy.process.isAlive()).as("alive: %s", proxy.stdout()).isTrue();
  }

  /** Streams {@code size} pseudo-random bytes to {@code path}; checks what the upstream got. */
  private void upload(String path, long size, long seed) throws Exception {
    HttpURLConnection c =
        (HttpURLConnection)
            URI.create("http://127.0.0.1:" + proxy.port + path).toURL().openConnection();
    c.setRequestMethod("POST");
    c.setDoOutput(true);
    c.setFixedLengthStreamingMode(size);
    c.setConnectTimeout(5000);
    c.setReadTimeout(120_000);
    c.setRequestProperty("content-type", "multipart/form-data; boundary=pm");
    MessageDigest sha = sha256();
    SplittableRandom random = new SplittableRandom(seed);
    byte[] chunk = new byte[64 * 1024];
    try (OutputStream out = c.getOutputStream()) {
      for (long sent = 0; sent < size; ) {
        int n = (int) Math.min(chunk.length, size - sent);
        for (int i = 0; i < n; i++) {
          chunk[i] = (byte) random.nextInt();
        }
        out.write(chunk, 0, n);
        sha.update(chunk, 0, n);
        sent += n;
      }
    }
    assertThat(c.getResponseCode()).as("%s: %s", path, proxy.stdout()).isEqualTo(200);
    String body = new String(c.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(body)
        .isEqualTo(
            "{\"bytes\":"
                + size
                + ",\"sha256\":\""
                + HexFormat.of().formatHex(sha.digest())
                + "\"}");
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
