package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerResponse;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The feed's records are read by their published schema (v1), not by proxy classes; a feed that
 * drops is subscribed again, and the records missed meanwhile are counted from the feed's ids.
 */
class RecordFeedClientTest {

  private static String record(long n) {
    return "data: {\"v\":1,\"trace_id\":\""
        + String.format("%032x", n)
        + "\",\"root_ms\":1.0}\n"
        + "id: "
        + n
        + "\n\n";
  }

  /**
   * A feed as the proxy serves it, scripted per subscription: the first gets records 1–5 and is
   * ended; the second finds every place taken (429); the third arrives when 12 records were
   * published, and gets 13 and 15 (14 was dropped for it).
   */
  @Test
  void aDroppedFeedIsSubscribedAgainAndTheRecordsMissedAreCountedFromItsIds() throws Exception {
    io.vertx.core.Vertx vertx = io.vertx.core.Vertx.vertx();
    try {
      java.util.concurrent.atomic.AtomicInteger subscriptions =
          new java.util.concurrent.atomic.AtomicInteger();
      io.vertx.core.http.HttpServer server =
          vertx
              .createHttpServer()
              .requestHandler(
                  req -> {
                    var resp = req.response();
                    int n = subscriptions.incrementAndGet();
                    if (n == 2) {
                      resp.setStatusCode(429).end("{\"error\":{}}");
                      return;
                    }
                    resp.setChunked(true).putHeader("content-type", "text/event-stream");
                    resp.write(": phasemeter record feed, schema v1\n\n");
                    if (n == 1) {
                      resp.write("id: 0\n\n");
                      for (long i = 1; i <= 5; i++) {
                        resp.write(record(i));
                      }
                      resp.end();
                    } else {
                      resp.write("id: 12\n\n" + record(13) + record(15));
                    }
                  })
              .listen(0, "127.0.0.1")
              .await(5, java.util.concurrent.TimeUnit.SECONDS);
      java.util.List<RecordFeedClient.Reconnect> told =
          new java.util.concurrent.CopyOnWriteArrayList<>();
      java.util.List<String> received = new java.util.concurrent.CopyOnWriteArrayList<>();
      RecordFeedClient c =
          new RecordFeedClient(
              vertx,
              java.net.URI.create("http://127.0.0.1:" + server.actualPort()),
              null,
              told::add);
      c.start(r -> received.add(r.traceId())).await(5, java.util.concurrent.TimeUnit.SECONDS);
      org.awaitility.Awaitility.await()
          .atMost(java.time.Duration.ofSeconds(20))
          .until(() -> received.size() == 7);
      assertThat(received)
          .containsExactly(
              String.format("%032x", 1),
              String.format("%032x", 2),
              String.format("%032x", 3),
              String.format("%032x", 4),
              String.format("%032x", 5),
              String.format("%032x", 13),
              String.format("%032x", 15));
      assertThat(subscriptions).hasValue(3);
      assertThat(told).hasSize(1);
      assertThat(told.get(0).missed()).as("6 to 12, published while away").isEqualTo(7);
      assertThat(told.get(0).restarted()).isFalse();
      assertThat(told.get(0).line())
          .startsWith("record feed: reconnected after ")
          .contains(" s, 7 records missed; it had dropped: the proxy ended the feed");
      assertThat(c.counts()).isEqualTo(new RecordFeedClient.Counts(1, 8));
      assertThat(c.connected()).isTrue();
      c.close().await(5, java.util.concurrent.TimeUnit.SECONDS);
      assertThat(c.following()).isFalse();
    } finally {
      vertx.close().await(10, java.util.concurrent.TimeUnit.SECONDS);
    }
  }

  /**
   * Issue 39 round 2: a run that found every place on the feed taken (429) at its first subscribe
   * failed at once (exit 2), though places free up. Now the first subscribe is tried again with the
   * back-off, saying once that it waits. A scripted feed answers 429 twice, then streams.
   */
  @Test
  void aFirstSubscribeThatFindsEveryPlaceTakenWaitsForOne() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      AtomicInteger subscriptions = new AtomicInteger();
      HttpServer server =
          feedServer(
              vertx,
              resp -> {
                if (subscriptions.incrementAndGet() <= 2) {
                  resp.setStatusCode(429).end("{\"error\":{}}");
                } else {
                  resp.setChunked(true).putHeader("content-type", "text/event-stream");
                  resp.write("id: 4\n\n" + record(5));
                }
              });
      List<String> said = new CopyOnWriteArrayList<>();
      List<String> received = new CopyOnWriteArrayList<>();
      RecordFeedClient c =
          new RecordFeedClient(
              vertx,
              URI.create("http://127.0.0.1:" + server.actualPort()),
              null,
              r -> said.add(r.line()),
              said::add,
              Duration.ofSeconds(30),
              new AtomicLong()::get);
      c.start(r -> received.add(r.traceId())).await(20, TimeUnit.SECONDS);
      assertThat(subscriptions).hasValue(3);
      assertThat(said)
          .containsExactly(
              "record feed: every place on the proxy's record feed is taken (it answered 429);"
                  + " trying again for up to 30 s");
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> received.size() == 1);
      assertThat(c.counts())
          .as("the first subscription is no reconnect")
          .isEqualTo(new RecordFeedClient.Counts(0, 0));
      c.close().await(5, TimeUnit.SECONDS);
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  /**
   * The wait is bounded (on a clock the test moves): when it is over, the start fails naming the
   * 429 and what holds the places. A 401 is not waited for.
   */
  @Test
  void aFirstSubscribeStillRefusedWhenTheWaitIsOverFailsNamingTheAnswer() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      AtomicInteger subscriptions = new AtomicInteger();
      HttpServer server =
          feedServer(
              vertx,
              resp -> {
                subscriptions.incrementAndGet();
                resp.setStatusCode(429).end("{\"error\":{}}");
              });
      URI admin = URI.create("http://127.0.0.1:" + server.actualPort());
      AtomicLong clock = new AtomicLong();
      List<String> said = new CopyOnWriteArrayList<>();
      RecordFeedClient c =
          new RecordFeedClient(
              vertx, admin, null, r -> {}, said::add, Duration.ofSeconds(30), clock::get);
      Future<Void> started = c.start(r -> {});
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> subscriptions.get() >= 2);
      assertThat(started.isComplete()).isFalse();
      clock.addAndGet(Duration.ofSeconds(30).toNanos());
      assertThatThrownBy(() -> started.await(20, TimeUnit.SECONDS))
          .hasMessage(
              "the proxy's record feed at "
                  + admin
                  + " answered 429 (Too Many Requests) for 30 s: every place on its feed is held"
                  + " by another subscriber, and one that never reads keeps its place while no"
                  + " records wait for it; end those subscribers, or run without --admin");
      assertThat(said).hasSize(1);
      c.close().await(5, TimeUnit.SECONDS);

      HttpServer locked = feedServer(vertx, resp -> resp.setStatusCode(401).end());
      URI lockedAdmin = URI.create("http://127.0.0.1:" + locked.actualPort());
      List<String> lockedSaid = new CopyOnWriteArrayList<>();
      RecordFeedClient d =
          new RecordFeedClient(
              vertx,
              lockedAdmin,
              null,
              r -> {},
              lockedSaid::add,
              Duration.ofSeconds(30),
              clock::get);
      assertThatThrownBy(() -> d.start(r -> {}).await(10, TimeUnit.SECONDS))
          .hasMessage(
              "the proxy's record feed at " + lockedAdmin + " answered 401 (set --admin-token)");
      assertThat(lockedSaid).isEmpty();
      d.close().await(5, TimeUnit.SECONDS);
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  /** A refused connection (the admin listener not up yet) is waited for the same way. */
  @Test
  void aFirstSubscribeRefusedIsTriedAgainUntilTheWaitIsOver() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      // Nothing listens on port 1.
      URI admin = URI.create("http://127.0.0.1:1");
      AtomicLong clock = new AtomicLong();
      List<String> said = new CopyOnWriteArrayList<>();
      RecordFeedClient c =
          new RecordFeedClient(
              vertx, admin, null, r -> {}, said::add, Duration.ofSeconds(30), clock::get);
      Future<Void> started = c.start(r -> {});
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> !said.isEmpty());
      assertThat(said)
          .containsExactly(
              "record feed: the proxy's admin listener at "
                  + admin
                  + " refused the connection; trying again for up to 30 s");
      assertThat(started.isComplete()).isFalse();
      clock.addAndGet(Duration.ofSeconds(30).toNanos());
      assertThatThrownBy(() -> started.await(20, TimeUnit.SECONDS))
          .hasMessage(
              "cannot reach the proxy's record feed at "
                  + admin
                  + " (connection refused for 30 s)");
      c.close().await(5, TimeUnit.SECONDS);
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  private static HttpServer feedServer(Vertx vertx, Consumer<HttpServerResponse> answer)
      throws Exception {
    return vertx
        .createHttpServer()
        .requestHandler(req -> answer.accept(req.response()))
        .listen(0, "127.0.0.1")
        .await(5, TimeUnit.SECONDS);
  }

  @Test
  void parsesAV1Record() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    ServerRecord r =
        c.parse(
            "{\"v\":1,\"trace_id\":\"0000000000000007000000000000012f\",\"span_id\":\"aa\",\"model\":\"m\",\"pool\":\"p\","
                + "\"stream\":true,\"status\":200,\"outcome\":\"success\",\"root_ms\":1691.2,\"server_ttft_ms\":640.3,"
                + "\"phases_ms\":{\"auth\":0.1,\"receive\":0.2,\"prepare\":0.3,\"route\":0.01,\"queue\":428.0,\"generation\":1210.0,\"write\":0.4},"
                + "\"unattributed_ms\":52.2,\"tpot_ms\":19.1,\"tokens\":{\"input\":4096,\"output\":300},\"finish_reason\":\"length\",\"sampled\":false}");
    assertThat(r.traceId()).isEqualTo("0000000000000007000000000000012f");
    assertThat(r.rootMs()).isEqualTo(1691.2);
    assertThat(r.serverTtftMs()).isEqualTo(640.3);
    assertThat(r.phasesMs()).containsEntry("queue", 428.0);
    assertThat(r.gatewayMs()).isCloseTo(0.41, org.assertj.core.data.Offset.offset(1e-9));
    assertThat(r.outputTokens()).isEqualTo(300);
    assertThat(r.sampled()).isFalse();
  }

  @Test
  void otherEventsAreCountedNotFatal() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    assertThat(c.parse("{not json")).isNull();
    assertThat(c.parse("{\"v\":2,\"trace_id\":\"x\"}")).isNull();
    assertThat(c.parse("{\"v\":1,\"server_ttft_ms\":null}")).isNull();
    assertThat(c.malformed()).isEqualTo(3);
    ServerRecord nulls =
        c.parse(
            "{\"v\":1,\"trace_id\":\"t\",\"root_ms\":1.0,\"server_ttft_ms\":null,\"tokens\":{\"input\":null,\"output\":null}}");
    assertThat(nulls.serverTtftMs()).isNull();
    assertThat(nulls.inputTokens()).isNull();
  }

  @Test
  void operationAndRouteAreReadWhenPresentAndNullWhenAbsent() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    ServerRecord old =
        c.parse("{\"v\":1,\"trace_id\":\"t\",\"route\":\"/v1/completions\",\"root_ms\":1.0}");
    assertThat(old.operation()).isNull();
    assertThat(old.route()).isEqualTo("/v1/completions");

    // An embeddings record: no TTFT, no TPOT, no output tokens.
    ServerRecord embeddings =
        c.parse(
            "{\"v\":1,\"trace_id\":\"0000000000000007000000000000012f\",\"model\":\"m\","
                + "\"pool\":\"p\",\"route\":\"/v1/embeddings\",\"operation\":\"embeddings\","
                + "\"stream\":false,\"status\":200,\"outcome\":\"success\",\"root_ms\":12.5,"
                + "\"server_ttft_ms\":null,\"phases_ms\":{\"auth\":0.1,\"receive\":0.2,"
                + "\"prepare\":0.3,\"route\":0.01,\"queue\":0.1,\"generation\":11.0,"
                + "\"write\":0.4},\"gateway_ms\":0.41,\"unattributed_ms\":0.2,\"tpot_ms\":null,"
                + "\"tokens\":{\"input\":1024,\"output\":null},\"finish_reason\":null,"
                + "\"sampled\":true}");
    assertThat(embeddings.operation()).isEqualTo("embeddings");
    assertThat(embeddings.route()).isEqualTo("/v1/embeddings");
    assertThat(embeddings.serverTtftMs()).isNull();
    assertThat(embeddings.tpotMs()).isNull();
    assertThat(embeddings.inputTokens()).isEqualTo(1024);
    assertThat(embeddings.outputTokens()).isNull();
    assertThat(embeddings.rootMs()).isEqualTo(12.5);

    ServerRecord responses =
        c.parse(
            "{\"v\":1,\"trace_id\":\"t\",\"route\":\"/v1/responses\","
                + "\"operation\":\"responses\",\"root_ms\":100.0,\"server_ttft_ms\":20.0,"
                + "\"tpot_ms\":5.0}");
    assertThat(responses.operation()).isEqualTo("responses");
    assertThat(responses.serverTtftMs()).isEqualTo(20.0);
    assertThat(c.malformed()).isZero();
  }

  @Test
  void tenantAndSloAreReadWhenPresentAndNullWhenAbsent() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    String slo =
        "\"slo\":{\"result\":\"missed\",\"objective\":\"server_ttft\",\"budget\":null,"
            + "\"objectives_ms\":{\"server_root\":2000.0,\"server_ttft\":200.0},"
            + "\"missed\":[\"server_ttft\"],\"overridden\":[\"server_ttft\"]}";
    ServerRecord r =
        c.parse("{\"v\":1,\"trace_id\":\"t\",\"root_ms\":1.0,\"tenant\":\"team-a\"," + slo + "}");
    assertThat(r.tenant()).isEqualTo("team-a");
    assertThat(r.slo().met()).isFalse();
    assertThat(r.slo().objective()).isEqualTo("server_ttft");
    assertThat(r.slo().budget()).isNull();
    assertThat(r.slo().objectivesMs())
        .containsExactly(
            java.util.Map.entry("server_root", 2000.0), java.util.Map.entry("server_ttft", 200.0));
    assertThat(r.slo().overridden()).containsExactly("server_ttft");
    // The same verdict again is the same object: every record is kept until the report.
    ServerRecord again =
        c.parse("{\"v\":1,\"trace_id\":\"u\",\"root_ms\":1.0,\"tenant\":\"team-a\"," + slo + "}");
    assertThat(again.slo()).isSameAs(r.slo());
    // Not counted (slo null) and an older proxy (neither field).
    ServerRecord notCounted =
        c.parse("{\"v\":1,\"trace_id\":\"t\",\"root_ms\":1.0,\"tenant\":\"other\",\"slo\":null}");
    assertThat(notCounted.tenant()).isEqualTo("other");
    assertThat(notCounted.slo()).isNull();
    ServerRecord old = c.parse("{\"v\":1,\"trace_id\":\"t\",\"root_ms\":1.0}");
    assertThat(old.tenant()).isNull();
    assertThat(old.slo()).isNull();
    assertThat(c.malformed()).isZero();
  }
}
