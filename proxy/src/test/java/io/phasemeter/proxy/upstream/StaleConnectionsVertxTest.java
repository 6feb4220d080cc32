package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.net.StaleConnections;
import io.vertx.core.VertxException;
import io.vertx.core.http.HttpClosedException;
import org.junit.jupiter.api.Test;

/** Core matches Vert.x's closed-connection exception by name; this pins the name to the class. */
class StaleConnectionsVertxTest {
  @Test
  void vertxsHttpClosedExceptionIsAClose() {
    assertThat(StaleConnections.closedConnection(new HttpClosedException("Connection was closed")))
        .isTrue();
    assertThat(
            StaleConnections.closedConnection(
                new IllegalStateException(new HttpClosedException("Connection was closed"))))
        .isTrue();
  }

  @Test
  void anotherVertxExceptionIsNot() {
    assertThat(StaleConnections.closedConnection(new VertxException("Connection refused")))
        .isFalse();
  }
}
