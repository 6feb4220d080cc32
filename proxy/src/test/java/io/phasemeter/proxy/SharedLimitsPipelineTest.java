package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.phasemeter.proxy.gateway.RedisServer;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The pipeline around a shared limiter: what happens while auth waits for Redis. */
class SharedLimitsPipelineTest extends ProxyTestBase {
  @TempDir Path dir;
  private RedisServer redis;

  @AfterEach
  void stopRedis() throws Exception {
    if (redis != null) {
      redis.close();
    }
  }

  @Test
  void aClientThatLeavesWhileAuthWaitsForRedisEndsAtOnce() throws Exception {
    redis = RedisServer.start(dir);
    int backend = startBackend(req -> req.body().onSuccess(b -> req.response().end("{}")));
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: k, sha256: \"" + HashKeyMain.hash("sk-k") + "\", rpm: 600}\n...\n");
    startProxy(
        ConfigLoader.parse(
            "listen: {host: 127.0.0.1, port: 0}\n"
                + "admin: {host: 127.0.0.1, port: 0}\n"
                + "limits: {receive_timeout: 60s}\n"
                + "pools:\n  - {name: default, models: [sim-llama], upstreams: ['http://127.0.0.1:"
                + backend
                + "'], health: {path: null}}\n"
                + "auth:\n  enabled: true\n  keys_file: "
                + keys
                + "\n  shared_limits: {enabled: true, endpoints: ['"
                + redis.url()
                + "'], timeout: 3s}\n",
            "test.yaml"));
    redis.pause();
    try (Socket s = new Socket("127.0.0.1", proxy.port())) {
      s.getOutputStream()
          .write(
              ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-k\r\n"
                      + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
                  .getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      Thread.sleep(300);
    }
    // Auth finishes when Redis times out (3 s); the client is gone by then: the request ends
    // there, not at the 60 s receive timeout.
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("cancelled");
    assertIdle();
    redis.resume();
  }

  @Test
  void anEndpointWithCredentialsIsRefusedSoThatTheyAreNeverLogged() {
    String base =
        "pools:\n  - {name: default, models: [m], upstreams: ['http://127.0.0.1:1']}\n"
            + "auth:\n  enabled: true\n  keys_file: keys.yaml\n  shared_limits: ";
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    base + "{enabled: true, endpoints: ['redis://:s3cret@redis:6379']}\n",
                    "p.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("password_env")
        .hasMessageNotContaining("s3cret");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    base + "{enabled: true, type: sentinel, endpoints: ['redis://s:26379']}\n",
                    "p.yaml"))
        .hasMessageContaining("master_name");
    assertThatThrownBy(
            () -> ConfigLoader.parse(base + "{enabled: true, on_failure: ignore}\n", "p.yaml"))
        .hasMessageContaining("on_failure: must be local or fail_closed");
    assertThat(
            ConfigLoader.parse(base + "{enabled: true}\n", "p.yaml")
                .auth()
                .sharedLimits()
                .timeout())
        .isEqualTo(Duration.ofMillis(50));
  }
}
