package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The admin listener's guard on real sockets: a kept-alive connection left idle is closed after
 * {@code admin.receive_timeout}, and a refusal that says {@code Connection: close} closes. Before
 * the fix Vert.x Web's router took the response's one end handler, so neither happened: 256 idle
 * connections that each asked {@code /health/live} once filled the listener for good.
 */
class AdminGuardTest extends ProxyTestBase {
  private ProxyConfig adminConfig(String admin) throws Exception {
    String yaml =
        yaml(startBackend(req -> req.response().end(VllmScript.COMPLETION)), "")
            .replace("admin: {host: 127.0.0.1, port: 0}\n", admin);
    return ConfigLoader.parse(yaml, "test.yaml");
  }

  @Test
  void anIdleKeptAliveAdminConnectionIsClosedAfterTheReceiveTimeoutAndCounted() throws Exception {
    startProxy(adminConfig("admin: {host: 127.0.0.1, port: 0, receive_timeout: 500ms}\n"));
    try (Socket s = new Socket("127.0.0.1", proxy.adminPort())) {
      s.getOutputStream()
          .write(
              "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      s.setSoTimeout(20_000);
      String answer = readUntilClosed(s.getInputStream());
      assertThat(answer).startsWith("HTTP/1.1 200").contains("\"UP\"");
    }
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics")
                    .text()
                    .contains("llm_listener_head_timeouts_total{listener=\"admin\"} 1.0"));
  }

  @Test
  void aTraceExportRefusedUnreadClosesItsConnection() throws Exception {
    startProxy(adminConfig("admin: {host: 127.0.0.1, port: 0, receive_timeout: 30s}\n"));
    try (Socket s = new Socket("127.0.0.1", proxy.adminPort())) {
      // A keep-alive request whose body never comes: engine spans are off, so none is read.
      s.getOutputStream()
          .write(
              ("POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                      + "Content-Length: 1000000\r\n\r\n")
                  .getBytes(StandardCharsets.US_ASCII));
      s.setSoTimeout(20_000);
      String answer = readUntilClosed(s.getInputStream());
      assertThat(answer).startsWith("HTTP/1.1 404").contains("telemetry.engine_spans.enabled");
    }
  }

  /** Reads until the proxy closes the connection (a read timeout fails the test). */
  private static String readUntilClosed(InputStream in) throws IOException {
    ByteArrayOutputStream got = new ByteArrayOutputStream();
    byte[] buf = new byte[4096];
    try {
      for (int n; (n = in.read(buf)) >= 0; ) {
        got.write(buf, 0, n);
      }
    } catch (java.net.SocketException reset) {
      // Closed with a reset: what arrived before it is the answer.
    }
    return got.toString(StandardCharsets.ISO_8859_1);
  }
}
