package io.phasemeter.core.net;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** Vert.x's HttpClosedException, matched by name, is checked where Vert.x is: in the proxy. */
class StaleConnectionsTest {
  @Test
  void aClosedChannelOrAResetOrBrokenPipeIsAClose() {
    assertThat(StaleConnections.closedConnection(new ClosedChannelException())).isTrue();
    assertThat(StaleConnections.closedConnection(new IOException("Connection reset by peer")))
        .isTrue();
    assertThat(StaleConnections.closedConnection(new IOException("Broken pipe"))).isTrue();
  }

  @Test
  void aCloseAnywhereInTheCausesCounts() {
    Throwable wrapped = new RuntimeException("send failed", new ClosedChannelException());
    assertThat(StaleConnections.closedConnection(new IllegalStateException(wrapped))).isTrue();
  }

  @Test
  void anythingElseIsAFailure() {
    assertThat(StaleConnections.closedConnection(null)).isFalse();
    assertThat(StaleConnections.closedConnection(new TimeoutException("idle"))).isFalse();
    assertThat(StaleConnections.closedConnection(new SocketTimeoutException("Read timed out")))
        .isFalse();
    assertThat(StaleConnections.closedConnection(new IOException("bad chunk"))).isFalse();
    // Only an IOException's message says reset: the words alone are not a close.
    assertThat(StaleConnections.closedConnection(new IllegalStateException("Connection reset")))
        .isFalse();
  }
}
