package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.MultiMap;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * {@code pools[].connections.reuse} and {@code preconnect} against upstreams on real sockets: one
 * that closes its connection after every response although it said keep-alive (as llama.cpp's
 * server does after a stream), one that keeps them (the simulator), and {@code reuse: off}.
 */
class UpstreamReuseTest extends ProxyTestBase {

  /** What the raw upstream saw of one request: its connection, when that was accepted, its head. */
  record Seen(int connection, long acceptedAt, long arrivedAt, String head) {
    boolean saysClose() {
      return head.toLowerCase(Locale.ROOT).contains("\r\nconnection: close\r\n");
    }
  }

  /**
   * A raw HTTP/1.1 upstream: answers a POST with an SSE stream (chunked, {@code Keep-Alive} and no
   * {@code Connection: close}) and any GET with a small JSON body; {@code closeAfter}: it then
   * closes the connection, as llama.cpp's server does after a stream.
   */
  private int rawUpstream(boolean closeAfter, List<Seen> seen, AtomicInteger accepted)
      throws Exception {
    return rawUpstream(closeAfter, false, seen, accepted);
  }

  /**
   * As {@link #rawUpstream(boolean, List, AtomicInteger)}; {@code closeReused}: a request that
   * arrives on a connection that already carried one is not answered, its connection closed (an
   * upstream whose idle timeout closed the connection as the request was on its way).
   */
  private int rawUpstream(
      boolean closeAfter, boolean closeReused, List<Seen> seen, AtomicInteger accepted)
      throws Exception {
    NetServer server =
        vertx
            .createNetServer()
            .connectHandler(
                socket -> {
                  int id = accepted.incrementAndGet();
                  long acceptedAt = System.nanoTime();
                  Buffer[] buf = {Buffer.buffer()};
                  int[] answered = {0};
                  socket.handler(
                      b -> {
                        buf[0].appendBuffer(b);
                        String text = buf[0].toString(StandardCharsets.ISO_8859_1);
                        int end = text.indexOf("\r\n\r\n");
                        if (end < 0) {
                          return;
                        }
                        String head = text.substring(0, end + 2);
                        int length = contentLength(head);
                        if (text.length() < end + 4 + length) {
                          return;
                        }
                        buf[0] = Buffer.buffer(text.substring(end + 4 + length));
                        seen.add(new Seen(id, acceptedAt, System.nanoTime(), head));
                        if (closeReused && answered[0]++ > 0) {
                          socket.close();
                          return;
                        }
                        answer(socket, head, closeAfter);
                      });
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    return server.actualPort();
  }

  private static int contentLength(String head) {
    for (String line : head.split("\r\n")) {
      if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
        return Integer.parseInt(line.substring(15).trim());
      }
    }
    return 0;
  }

  private static void answer(NetSocket socket, String head, boolean closeAfter) {
    if (head.startsWith("GET ")) {
      String body = "{\"object\":\"list\",\"data\":[]}";
      socket.write(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
              + body.length()
              + "\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
              + body);
      return;
    }
    StringBuilder out =
        new StringBuilder(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                + "Keep-Alive: timeout=5, max=100\r\n\r\n");
    for (String event : VllmScript.stream(false).split("(?<=\n\n)")) {
      out.append(Integer.toHexString(event.getBytes(StandardCharsets.UTF_8).length))
          .append("\r\n")
          .append(event)
          .append("\r\n");
    }
    out.append("0\r\n\r\n");
    socket
        .write(Buffer.buffer(out.toString().getBytes(StandardCharsets.UTF_8)))
        .onComplete(
            v -> {
              if (closeAfter) {
                socket.close();
              }
            });
  }

  private double metric(String name) throws Exception {
    String text = admin("/metrics").body().toString();
    for (String line : text.split("\n")) {
      if (line.startsWith(name + "{")
          && line.contains("llm_pool=\"default\"")
          && (!line.contains("kind=") || line.contains("kind=\"slotted\""))) {
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    throw new AssertionError("no " + name + " in /metrics:\n" + text);
  }

  @Test
  void anUpstreamThatClosesAfterEachResponseIsSeenAndItsRequestsFindAConnectionOpenedAhead()
      throws Exception {
    List<Seen> seen = new CopyOnWriteArrayList<>();
    AtomicInteger accepted = new AtomicInteger();
    int port = rawUpstream(true, seen, accepted);
    startProxy(config(port, 1, null));

    int n = 14;
    List<Long> sentAt = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      sentAt.add(System.nanoTime());
      Response r = call("/v1/chat/completions", chat("hi " + i, true));
      assertThat(r.status()).as(r.text()).isEqualTo(200);
      assertThat(r.text()).endsWith(VllmScript.DONE);
    }
    assertThat(awaitFinished(n)).allMatch(f -> f.outcome().equals("success"));

    // Seen closing after its responses (4 of the last 8), counted, and switched over.
    assertThat(metric("llm_upstream_connections_closed_after_response_total"))
        .isGreaterThanOrEqualTo(4);
    assertThat(metric("llm_upstreams_single_use")).isEqualTo(1);
    JsonObject stats = new JsonObject(admin("/admin/stats").body());
    JsonObject up = stats.getJsonArray("upstream_connections").getJsonObject(0);
    assertThat(up.getString("reuse")).isEqualTo("auto");
    assertThat(up.getBoolean("closes_after_responses")).isTrue();
    assertThat(up.getBoolean("single_use")).isTrue();

    // The last requests each went on a connection the upstream had accepted before the client sent
    // the request to the proxy: opened ahead of demand, no connect on the request's way. Each
    // connection carried one request, which said so.
    List<Seen> requests = seen.stream().filter(s -> s.head().startsWith("POST ")).toList();
    assertThat(requests).hasSizeGreaterThanOrEqualTo(n);
    List<Seen> last = requests.subList(requests.size() - 6, requests.size());
    for (int i = 0; i < last.size(); i++) {
      Seen s = last.get(i);
      long clientSent = sentAt.get(n - last.size() + i);
      assertThat(s.acceptedAt())
          .as("request %d: its connection was accepted before the client sent it", i)
          .isLessThan(clientSent);
      assertThat(s.saysClose()).as("request %d says Connection: close", i).isTrue();
    }
    assertThat(last.stream().map(Seen::connection).distinct()).hasSize(last.size());
    assertThat(metric("llm_upstream_connections_spare_taken_total")).isGreaterThanOrEqualTo(6);
    assertThat(metric("llm_upstream_connections_preconnected_total")).isGreaterThanOrEqualTo(6);
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> metric("llm_upstream_connections_spare") == 2.0);
    assertIdle();
    assertOwnConnectionsClosed();
  }

  @Test
  void reuseOffSendsConnectionCloseOnEveryRequestAndKeepsSparesOpen() throws Exception {
    List<Seen> seen = new CopyOnWriteArrayList<>();
    AtomicInteger accepted = new AtomicInteger();
    int port = rawUpstream(false, seen, accepted);
    startProxy(config(port, 2, "    connections: {reuse: off, preconnect: 1}\n"));
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> metric("llm_upstream_connections_spare") == 1.0);

    for (int i = 0; i < 3; i++) {
      Response r = call("/v1/chat/completions", chat("hi " + i, true));
      assertThat(r.status()).as(r.text()).isEqualTo(200);
    }
    // A pass-through holds no slot: it goes on the unslotted pool, still one request a connection.
    Response models = call(HttpMethod.GET, "/version", null, MultiMap.caseInsensitiveMultiMap());
    assertThat(models.status()).as(models.text()).isEqualTo(200);

    assertThat(seen).hasSize(4);
    assertThat(seen).allSatisfy(s -> assertThat(s.saysClose()).as(s.head()).isTrue());
    assertThat(seen.stream().map(Seen::connection).distinct()).hasSize(4);
    assertThat(metric("llm_upstreams_single_use")).isEqualTo(1);
    assertThat(metric("llm_upstream_connections_spare_taken_total")).isGreaterThanOrEqualTo(1);
    JsonObject up =
        new JsonObject(admin("/admin/stats").body())
            .getJsonArray("upstream_connections")
            .getJsonObject(0);
    assertThat(up.getString("reuse")).isEqualTo("off");
    assertThat(up.getBoolean("single_use")).isTrue();
    assertIdle();
    assertOwnConnectionsClosed();
  }

  @Test
  void anUpstreamThatKeepsConnectionsIsStillReusedWithAuto() throws Exception {
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(4)
                    .withDecodeStepMs(1)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    startProxy(config(sim.port(), 1, null));

    for (int i = 0; i < 12; i++) {
      Response r = call("/v1/chat/completions", chat("hi " + i, i % 2 == 0));
      assertThat(r.status()).as(r.text()).isEqualTo(200);
    }
    assertThat(awaitFinished(12)).allMatch(f -> f.outcome().equals("success"));
    assertThat(metric("llm_upstream_connections_opened_total"))
        .as("one kept-alive connection carried every request")
        .isEqualTo(1);
    assertThat(metric("llm_upstream_connections_closed_after_response_total")).isZero();
    assertThat(metric("llm_upstreams_single_use")).isZero();
    assertThat(metric("llm_upstream_connections_preconnected_total")).isZero();
    assertThat(metric("llm_upstream_connections_spare")).isZero();
    assertIdle();
  }

  /**
   * The slotted connections open settle at the spares: every connection of the proxy's own that
   * carried (or was to carry) a request is closed again.
   */
  private void assertOwnConnectionsClosed() {
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(metric("llm_upstream_connections"))
                    .as("slotted connections open: the spares only")
                    .isEqualTo(metric("llm_upstream_connections_spare")));
  }

  @Test
  void aClientThatCancelsWhileTheProxyConnectsLeavesNoConnectionOpen() throws Exception {
    // A listener whose accept queue is full drops SYNs: the proxy's connect waits for the kernel
    // to retransmit its SYN once the queue has room again.
    java.net.ServerSocket listener =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress());
    List<java.net.Socket> fillers = new ArrayList<>();
    try {
      boolean hangs = false;
      for (int i = 0; i < 8 && !hangs; i++) {
        java.net.Socket s = new java.net.Socket();
        fillers.add(s);
        try {
          s.connect(
              new java.net.InetSocketAddress(listener.getInetAddress(), listener.getLocalPort()),
              300);
        } catch (java.net.SocketTimeoutException e) {
          hangs = true;
        }
      }
      assertThat(hangs).as("the kernel dropped the SYN of a full accept queue").isTrue();
      startProxy(
          config(
              listener.getLocalPort(),
              1,
              "    timeouts: {connect: 30s}\n    connections: {reuse: off, preconnect: 0}\n"));

      io.vertx.core.http.HttpClientRequest req = openChat();
      req.send(chat("hi", true));
      Awaitility.await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> metric("llm_upstream_connections_waiting") == 1.0);
      req.connection().close(); // The client goes away while the proxy connects.
      assertThat(awaitFinished(1).get(0).errorType()).isEqualTo("client_cancelled");

      // Room in the queue: the proxy's connect completes, after its request was cancelled.
      List<java.net.Socket> acceptedSockets = new CopyOnWriteArrayList<>();
      Thread acceptor =
          new Thread(
              () -> {
                try {
                  while (true) {
                    acceptedSockets.add(listener.accept());
                  }
                } catch (java.io.IOException e) {
                  // closed
                }
              });
      acceptor.start();
      for (java.net.Socket s : fillers) {
        s.close();
      }
      Awaitility.await()
          .atMost(Duration.ofSeconds(20))
          .until(() -> metric("llm_upstream_connections_opened_total") == 1.0);
      assertOwnConnectionsClosed();
      assertIdle();
      for (java.net.Socket accepted : acceptedSockets) {
        accepted.setSoTimeout(10_000);
        assertThat(accepted.getInputStream().read()).as("closed, nothing sent").isEqualTo(-1);
      }
    } finally {
      listener.close();
      for (java.net.Socket s : fillers) {
        s.close();
      }
    }
  }

  @Test
  void staleRetriesLongAfterTheLastResponseDoNotMakeAutoStopReusing() throws Exception {
    // An upstream that keeps connections alive but closes idle ones after a timeout: under sparse
    // traffic a request now and then meets the close. The proxy's clock is moved on two seconds
    // between requests (past the one-second window in which a close follows a response).
    List<Seen> seen = new CopyOnWriteArrayList<>();
    int port = rawUpstream(false, true, seen, new AtomicInteger());
    java.util.concurrent.atomic.AtomicLong offset = new java.util.concurrent.atomic.AtomicLong();
    io.phasemeter.core.NanoClock clock =
        new io.phasemeter.core.NanoClock() {
          @Override
          public long nanoTime() {
            return System.nanoTime() + offset.get();
          }

          @Override
          public long toEpochNanos(long nanoTime) {
            return io.phasemeter.core.NanoClock.system().toEpochNanos(nanoTime - offset.get());
          }
        };
    proxy =
        io.phasemeter.proxy.PhasemeterProxy.builder(vertx, config(port, 1, null))
            .openTelemetry(otel)
            .spanDeferral(EXPORT_EVERY_REQUEST)
            .clock(clock)
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);

    int n = 12;
    for (int i = 0; i < n; i++) {
      offset.addAndGet(TimeUnit.SECONDS.toNanos(2));
      Response r = call("/v1/chat/completions", chat("hi " + i, true));
      assertThat(r.status()).as(r.text()).isEqualTo(200);
    }
    assertThat(awaitFinished(n)).allMatch(f -> f.outcome().equals("success"));

    assertThat(metric("llm_upstream_stale_retries_total"))
        .as("every other request met a closed connection and was sent again")
        .isGreaterThanOrEqualTo(4);
    assertThat(metric("llm_upstream_connections_closed_after_response_total")).isZero();
    assertThat(metric("llm_upstreams_single_use")).isZero();
    assertThat(metric("llm_upstream_connections_preconnected_total")).isZero();
    assertIdle();
  }
}
