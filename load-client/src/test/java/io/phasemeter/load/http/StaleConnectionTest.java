package io.phasemeter.load.http;

import static io.phasemeter.load.http.RequestRunnerSimulatorTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Servers that close connections the client means to reuse, as llama.cpp's server does after a
 * stream: a raw TCP server speaking just enough HTTP/1.1, deciding per connection and per request
 * what to do. Every request either succeeds or fails for a reason the server gave, and the runner's
 * counts match what the server saw.
 */
@ExtendWith(VertxExtension.class)
class StaleConnectionTest {
  private static final String TRACE = "0000000000000007000000000000012f";
  private static final String STREAM =
      "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n"
          + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1}}\n\n"
          + "data: [DONE]\n\n";

  /** What the server does with one request, given how many this connection carried before. */
  private interface Behaviour {
    /**
     * @return true to answer, false to close the connection without a word
     */
    boolean answer(int earlierOnConnection);
  }

  private Vertx vertx;
  private NetServer server;
  private final AtomicInteger connections = new AtomicInteger();
  private final AtomicInteger answered = new AtomicInteger();
  private final AtomicInteger unanswered = new AtomicInteger();
  private final AtomicInteger closeHeaders = new AtomicInteger();

  /** The traceparent of each request the server read and closed its connection on. */
  private final java.util.Set<String> dropped = java.util.concurrent.ConcurrentHashMap.newKeySet();

  private volatile Behaviour behaviour = n -> true;
  private volatile boolean closeAfterStream;
  private volatile boolean headersThenClose;

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    this.vertx = vertx;
    server = await(vertx.createNetServer().connectHandler(this::serve).listen(0, "127.0.0.1"));
  }

  @AfterEach
  void stop() throws Exception {
    await(server.close());
  }

  private void serve(NetSocket socket) {
    connections.incrementAndGet();
    Buffer[] acc = {Buffer.buffer()};
    int[] served = {0};
    boolean[] closing = {false};
    boolean[] late = {false};
    socket.handler(
        chunk -> {
          if (closing[0]) {
            // Arrived after the server decided to close: never read, never answered. The client
            // sends one request at a time on a connection, so one late request at most.
            if (!late[0]) {
              late[0] = true;
              unanswered.incrementAndGet();
            }
            return;
          }
          acc[0].appendBuffer(chunk);
          String text = acc[0].toString(StandardCharsets.ISO_8859_1);
          int headEnd = text.indexOf("\r\n\r\n");
          if (headEnd < 0) {
            return;
          }
          String head = text.substring(0, headEnd).toLowerCase(Locale.ROOT);
          int length = 0;
          String traceparent = null;
          for (String line : head.split("\r\n")) {
            if (line.startsWith("traceparent:")) {
              traceparent = line.substring(12).trim();
            }
            if (line.startsWith("content-length:")) {
              length = Integer.parseInt(line.substring(15).trim());
            }
            if (line.startsWith("connection:") && line.contains("close")) {
              closeHeaders.incrementAndGet();
            }
          }
          if (text.length() < headEnd + 4 + length) {
            return;
          }
          // The client never pipelines: what follows the request is the start of the next one.
          acc[0] = acc[0].getBuffer(headEnd + 4 + length, acc[0].length());
          if (!behaviour.answer(served[0])) {
            unanswered.incrementAndGet();
            if (traceparent != null) {
              dropped.add(traceparent);
            }
            closing[0] = true;
            socket.close();
            return;
          }
          served[0]++;
          answered.incrementAndGet();
          if (headersThenClose) {
            socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
            closing[0] = true;
            vertx.setTimer(10, t -> socket.close());
            return;
          }
          byte[] body = STREAM.getBytes(StandardCharsets.UTF_8);
          socket.write(
              "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                  + "Keep-Alive: timeout=5, max=100\r\ncontent-length: "
                  + body.length
                  + "\r\n\r\n"
                  + STREAM);
          if (closeAfterStream) {
            // llama-server: closes the kept-alive connection a moment after the stream, without
            // having said Connection: close; a request sent meanwhile is never answered.
            closing[0] = true;
            vertx.setTimer(20, t -> socket.close());
          }
        });
  }

  private RequestRunner runner(int max, boolean reuse) {
    return new RequestRunner(
        vertx,
        URI.create("http://127.0.0.1:" + server.actualPort()),
        max,
        Duration.ofSeconds(10),
        gap -> {},
        reuse);
  }

  private static RequestSpec spec() {
    return new RequestSpec("/v1/completions", Buffer.buffer("{}"), "b", 10, 1, true);
  }

  private static List<ClientResult> sequential(RequestRunner r, int n) throws Exception {
    List<ClientResult> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(await(r.run(i, spec(), TRACE, null, 0, System.nanoTime())));
    }
    return out;
  }

  @Test
  void aServerThatClosesAfterEveryStreamLosesNoRequestAndEveryRetryIsCounted() throws Exception {
    closeAfterStream = true;
    RequestRunner r = runner(1, true);
    try {
      List<ClientResult> results = sequential(r, 60);
      assertThat(results).allMatch(ClientResult::ok);
      // Each request either found its connection closed in time (a fresh one was opened) or went
      // out on it before the close was seen: never answered, retried once on a fresh connection.
      assertThat(answered).hasValue(60);
      // A request the server read on a closing connection was resent; so was one written after
      // the close, which the server never saw.
      assertThat(r.staleConnectionRetries()).isGreaterThanOrEqualTo(unanswered.get());
      assertThat(r.connectionsOpened()).isEqualTo(connections.get()).isEqualTo(60);
      // Every connection was closed after its one response: the client either saw the close in
      // time or resent; the last connection's close may or may not have arrived yet.
      assertThat(r.staleConnectionRetries() + r.connectionsClosedByServer()).isBetween(59L, 60L);
      System.out.printf(
          "close after stream: 60 ok, %d stale retries, %d closes seen while idle, %d"
              + " connections%n",
          r.staleConnectionRetries(), r.connectionsClosedByServer(), connections.get());
    } finally {
      await(r.close());
    }
  }

  @Test
  void aServerThatDropsReusedConnectionsAtRandomLosesNoRequest() throws Exception {
    Random random = new Random(7);
    behaviour = earlier -> earlier == 0 || random.nextDouble() >= 0.3;
    RequestRunner r = runner(4, true);
    try {
      List<io.vertx.core.Future<ClientResult>> all = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        all.add(r.run(i, spec(), TRACE, null, 0, System.nanoTime()));
        if (i % 4 == 3) {
          await(all.get(i));
        }
      }
      for (var f : all) {
        assertThat(await(f).ok()).isTrue();
      }
      assertThat(answered).hasValue(200);
      assertThat(unanswered.get()).as("the server dropped some").isPositive();
      assertThat(r.staleConnectionRetries()).isEqualTo(unanswered.get());
    } finally {
      await(r.close());
    }
  }

  @Test
  void theRetriedFlagMarksExactlyTheRequestsResentAfterAStaleConnection() throws Exception {
    Random random = new Random(11);
    behaviour = earlier -> earlier == 0 || random.nextDouble() >= 0.3;
    RequestRunner r = runner(4, true);
    try {
      List<io.vertx.core.Future<ClientResult>> all = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        String traceId = String.format("%032x", i + 1);
        all.add(
            r.run(
                i,
                spec(),
                traceId,
                "00-" + traceId + "-00f067aa0ba902b7-01",
                0,
                System.nanoTime()));
        if (i % 4 == 3) {
          await(all.get(i));
        }
      }
      java.util.Set<String> retried = new java.util.HashSet<>();
      for (var f : all) {
        ClientResult c = await(f);
        assertThat(c.ok()).isTrue();
        if (c.retried()) {
          retried.add("00-" + c.traceId() + "-00f067aa0ba902b7-01");
        }
      }
      // The server read each of these on a reused connection and closed it without a word.
      assertThat(dropped).as("the server dropped some").isNotEmpty();
      assertThat(retried).isEqualTo(dropped);
      assertThat((long) retried.size()).isEqualTo(r.staleConnectionRetries());
    } finally {
      await(r.close());
    }
  }

  @Test
  void aFailureOnAFreshConnectionStaysAFailure() throws Exception {
    behaviour = earlier -> false;
    RequestRunner r = runner(1, true);
    try {
      ClientResult result = await(r.run(1, spec(), TRACE, null, 0, System.nanoTime()));
      assertThat(result.error()).isEqualTo(ErrorClass.RESET);
      assertThat(r.staleConnectionRetries()).isZero();
      assertThat(connections).hasValue(1);
    } finally {
      await(r.close());
    }
  }

  @Test
  void aFailureAfterTheResponseStartedStaysAFailure() throws Exception {
    RequestRunner r = runner(1, true);
    try {
      assertThat(await(r.run(1, spec(), TRACE, null, 0, System.nanoTime())).ok()).isTrue();
      headersThenClose = true;
      // On the reused connection, but the headers came: the server answered, then failed.
      ClientResult result = await(r.run(2, spec(), TRACE, null, 0, System.nanoTime()));
      assertThat(result.ok()).isFalse();
      assertThat(result.status()).isEqualTo(200);
      assertThat(r.staleConnectionRetries()).isZero();
      assertThat(answered).hasValue(2);
    } finally {
      await(r.close());
    }
  }

  @Test
  void withoutReuseEveryRequestOpensItsOwnConnectionAndNothingIsRetried() throws Exception {
    closeAfterStream = true;
    RequestRunner r = runner(4, false);
    try {
      List<ClientResult> results = sequential(r, 30);
      assertThat(results).allMatch(ClientResult::ok);
      assertThat(r.staleConnectionRetries()).isZero();
      assertThat(unanswered).hasValue(0);
      assertThat(connections).hasValue(30);
      assertThat(r.connectionsOpened()).isEqualTo(30);
      assertThat(closeHeaders).as("each request says Connection: close").hasValue(30);
      assertThat(results).allMatch(c -> c.transportSetupNanos() > 0);
    } finally {
      await(r.close());
    }
  }
}
