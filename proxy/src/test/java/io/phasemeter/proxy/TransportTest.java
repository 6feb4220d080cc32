package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code transport}: parsed, overridden from the environment, checked, and named at start-up. */
class TransportTest {
  @TempDir Path dir;

  @Test
  void autoByDefaultNioWhenAskedFromTheFileOrTheEnvironment() throws Exception {
    assertThat(ConfigLoader.defaults().transport()).isEqualTo(ProxyConfig.Transport.AUTO);
    assertThat(ConfigLoader.parse("transport: NIO\n", "test.yaml").transport())
        .isEqualTo(ProxyConfig.Transport.NIO);
    Path file = dir.resolve("proxy.yaml");
    Files.writeString(file, "transport: auto\n");
    assertThat(ConfigLoader.load(file, Map.of("PHASEMETER_TRANSPORT", "nio")).transport())
        .isEqualTo(ProxyConfig.Transport.NIO);
  }

  @Test
  void anUnknownTransportIsOneLineNamingTheKeyOnce() {
    assertThatThrownBy(() -> ConfigLoader.parse("transport: io_uring\n", "test.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessage("test.yaml: transport: must be auto or nio (got io_uring)");
  }

  @Test
  void theStartUpLineSaysWhichTransportRunsAndWhy() throws Exception {
    Vertx nio = ProxyMain.vertx(ProxyConfig.Transport.NIO);
    try {
      assertThat(nio.isNativeTransportEnabled()).isFalse();
      assertThat(ProxyMain.transport(ProxyConfig.Transport.NIO, nio))
          .isEqualTo("transport: nio (transport: nio)");
      // auto on a Vert.x that runs NIO (where epoll cannot load) says so, with the reason if any.
      assertThat(ProxyMain.transport(ProxyConfig.Transport.AUTO, nio))
          .startsWith("transport: nio (transport: auto; native epoll unavailable");
    } finally {
      nio.close().await(10, TimeUnit.SECONDS);
    }
    if (System.getProperty("os.name").equals("Linux")
        && System.getProperty("os.arch").equals("amd64")) {
      Vertx epoll = ProxyMain.vertx(ProxyConfig.Transport.AUTO);
      try {
        assertThat(ProxyMain.transport(ProxyConfig.Transport.AUTO, epoll))
            .isEqualTo("transport: native epoll (transport: auto)");
      } finally {
        epoll.close().await(10, TimeUnit.SECONDS);
      }
    }
  }
}
