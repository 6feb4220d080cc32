package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Vertx;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The relay's contract, measured on one monotonic clock (client, relay and target all live in this
 * JVM): a byte never arrives before its delay (the lower bound is exact), it arrives not much later
 * (the upper bound is generous: a loaded 2-core machine can be late by tens of ms), order is kept
 * over many small writes in both directions, and a close on either side reaches the other.
 */
class DelayRelayTest {
  private static Vertx vertx;

  @BeforeAll
  static void start() {
    vertx = Vertx.vertx();
  }

  @AfterAll
  static void stop() throws Exception {
    vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void oneWayDelayIsAtLeastTheConfiguredDelayInBothDirections() throws Exception {
    long delayMs = 25;
    try (ServerSocket target = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        DelayRelay relay = DelayRelay.start(vertx, "127.0.0.1", target.getLocalPort(), delayMs)) {
      CompletableFuture<long[]> server =
          CompletableFuture.supplyAsync(
              () -> {
                try (Socket s = target.accept()) {
                  s.setTcpNoDelay(true);
                  InputStream in = s.getInputStream();
                  OutputStream out = s.getOutputStream();
                  long[] times = new long[10];
                  for (int i = 0; i < 5; i++) {
                    int b = in.read();
                    times[2 * i] = System.nanoTime();
                    times[2 * i + 1] = System.nanoTime();
                    out.write(b);
                    out.flush();
                  }
                  return times;
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      try (Socket c = new Socket("127.0.0.1", relay.port())) {
        c.setTcpNoDelay(true);
        InputStream in = c.getInputStream();
        OutputStream out = c.getOutputStream();
        long[] sent = new long[5];
        long[] got = new long[5];
        for (int i = 0; i < 5; i++) {
          sent[i] = System.nanoTime();
          out.write(i);
          out.flush();
          assertThat(in.read()).isEqualTo(i);
          got[i] = System.nanoTime();
        }
        long[] times = server.get(10, TimeUnit.SECONDS);
        // Exchange 0 pays for the relay's connect to the target and a cold JIT: bounded below only.
        for (int i = 0; i < 5; i++) {
          double upMs = (times[2 * i] - sent[i]) / 1e6;
          double downMs = (got[i] - times[2 * i + 1]) / 1e6;
          assertThat(upMs).as("client -> target, write %d", i).isGreaterThanOrEqualTo(delayMs);
          assertThat(downMs).as("target -> client, write %d", i).isGreaterThanOrEqualTo(delayMs);
          if (i > 0) {
            assertThat(upMs).as("client -> target, write %d", i).isLessThan(delayMs + 100);
            assertThat(downMs).as("target -> client, write %d", i).isLessThan(delayMs + 100);
          }
        }
      }
    }
  }

  @Test
  void orderIsPreservedOverManySmallWritesInBothDirectionsAndCloseReachesTheOtherSide()
      throws Exception {
    int n = 5_000;
    try (ServerSocket target = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        DelayRelay relay = DelayRelay.start(vertx, "127.0.0.1", target.getLocalPort(), 3)) {
      // The target echoes every int back, then sees the client's close as end of stream.
      CompletableFuture<Boolean> server =
          CompletableFuture.supplyAsync(
              () -> {
                try (Socket s = target.accept()) {
                  DataInputStream in = new DataInputStream(s.getInputStream());
                  DataOutputStream out = new DataOutputStream(s.getOutputStream());
                  for (int i = 0; i < n; i++) {
                    int v = in.readInt();
                    if (v != i) {
                      return false;
                    }
                    out.writeInt(v);
                    if (i % 7 == 0) {
                      out.flush();
                    }
                  }
                  out.flush();
                  return in.read() == -1;
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      try (Socket c = new Socket("127.0.0.1", relay.port())) {
        DataOutputStream out = new DataOutputStream(c.getOutputStream());
        DataInputStream in = new DataInputStream(c.getInputStream());
        CompletableFuture<Void> writer =
            CompletableFuture.runAsync(
                () -> {
                  try {
                    for (int i = 0; i < n; i++) {
                      out.writeInt(i);
                      out.flush();
                    }
                  } catch (Exception e) {
                    throw new IllegalStateException(e);
                  }
                });
        for (int i = 0; i < n; i++) {
          assertThat(in.readInt()).isEqualTo(i);
        }
        writer.get(10, TimeUnit.SECONDS);
        c.shutdownOutput();
        // The client's close reached the target (it saw end of stream after every int in order),
        // and the relay then closed the client's side too.
        assertThat(server.get(10, TimeUnit.SECONDS)).isTrue();
        assertThat(in.read()).isEqualTo(-1);
      }
    }
  }

  @Test
  void aCloseByTheTargetReachesTheClientAfterTheBytesBeforeIt() throws Exception {
    try (ServerSocket target = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        DelayRelay relay = DelayRelay.start(vertx, "127.0.0.1", target.getLocalPort(), 10)) {
      CompletableFuture<Void> server =
          CompletableFuture.runAsync(
              () -> {
                try (Socket s = target.accept()) {
                  s.getOutputStream().write(new byte[] {1, 2, 3});
                  s.getOutputStream().flush();
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      try (Socket c = new Socket("127.0.0.1", relay.port())) {
        c.setSoTimeout(10_000);
        InputStream in = c.getInputStream();
        assertThat(in.readNBytes(3)).containsExactly(1, 2, 3);
        assertThat(in.read()).isEqualTo(-1);
        server.get(10, TimeUnit.SECONDS);
      }
    }
  }
}
