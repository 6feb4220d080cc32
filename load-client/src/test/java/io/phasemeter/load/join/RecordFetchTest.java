package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.net.ServerSocket;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The end-of-run lookup: each unjoined request found on the replica that holds its record joins,
 * attributed to it and counted as fetched; a killed replica is asked once and no more; a replica
 * that never answers does not hold the run past the fetch's wait.
 */
class RecordFetchTest {
  private static final String PREFIX = "00000000000abcde";

  private Vertx vertx;
  private final List<String> lines = new CopyOnWriteArrayList<>();

  @BeforeEach
  void start() {
    vertx = Vertx.vertx();
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static String id(int n) {
    return PREFIX + String.format("%016x", n);
  }

  private static String recordJson(int n) {
    return "{\"v\":1,\"trace_id\":\"" + id(n) + "\",\"root_ms\":" + n + ".0}";
  }

  /** An admin listener holding the records {@code held}; counts the lookups it is sent. */
  private HttpServer admin(Map<Integer, String> held, AtomicInteger asked) throws Exception {
    return vertx
        .createHttpServer()
        .requestHandler(
            req -> {
              asked.incrementAndGet();
              String path = req.path();
              String rec = null;
              for (Map.Entry<Integer, String> e : held.entrySet()) {
                if (path.equals("/admin/records/" + id(e.getKey()))) {
                  rec = e.getValue();
                }
              }
              if (rec == null) {
                req.response().setStatusCode(404).end("{\"error\":{}}");
              } else {
                req.response().putHeader("content-type", "application/json").end(rec);
              }
            })
        .listen(0, "127.0.0.1")
        .await(10, TimeUnit.SECONDS);
  }

  private RecordFetch fetch(Joiner joiner) {
    RecordFeedClient parser = new RecordFeedClient(vertx, URI.create("http://127.0.0.1:1"), null);
    return new RecordFetch(
        vertx,
        null,
        joiner,
        parser::parse,
        lines::add,
        System::nanoTime,
        io.phasemeter.load.http.Transport.DEFAULT);
  }

  @Test
  void eachRecordJoinsFromTheReplicaThatHoldsItAndADeadReplicaIsAskedNoMore() throws Exception {
    List<Pair> formed = new CopyOnWriteArrayList<>();
    Joiner joiner = new Joiner(PREFIX, 100, formed::add);
    for (int n = 1; n <= 40; n++) {
      joiner.client(JoinerTest.client(id(n), 50));
    }
    AtomicInteger askedA = new AtomicInteger();
    AtomicInteger askedB = new AtomicInteger();
    Map<Integer, String> onA = new java.util.HashMap<>();
    for (int n = 1; n <= 20; n++) {
      onA.put(n, recordJson(n));
    }
    Map<Integer, String> onB = new java.util.HashMap<>();
    for (int n = 21; n <= 30; n++) {
      onB.put(n, recordJson(n));
    }
    HttpServer a = admin(onA, askedA);
    HttpServer b = admin(onB, askedB);
    int deadPort;
    try (ServerSocket s = new ServerSocket(0)) {
      deadPort = s.getLocalPort();
    }
    Replica ra = new Replica(URI.create("http://127.0.0.1:" + a.actualPort()));
    Replica rb = new Replica(URI.create("http://127.0.0.1:" + b.actualPort()));
    Replica dead = new Replica(URI.create("http://127.0.0.1:" + deadPort));
    RecordFetch.Result r = fetch(joiner).fetch(List.of(dead, ra, rb), Duration.ofSeconds(30));
    assertThat(r.unjoined()).isEqualTo(40);
    assertThat(r.found()).isEqualTo(30);
    assertThat(r.unreachable()).isEqualTo(1);
    assertThat(r.timedOut()).isFalse();
    assertThat(ra.fetched()).isEqualTo(20);
    assertThat(ra.joined()).isEqualTo(20);
    assertThat(rb.fetched()).isEqualTo(10);
    assertThat(dead.joined()).isZero();
    assertThat(dead.isUnreachable()).isTrue();
    // Each live replica was asked each id at most once; 31–40 by both.
    assertThat(askedA.get()).isBetween(20, 40);
    assertThat(askedB.get()).isBetween(20, 40);
    assertThat(r.asked()).isLessThanOrEqualTo(40L * 2 + RecordFetch.PER_REPLICA);
    assertThat(joiner.waiting()).isEqualTo(10);
    assertThat(formed).hasSize(30).allMatch(Pair::joined);
    // The record's own figures, not a copy of another's.
    assertThat(formed)
        .allSatisfy(
            p ->
                assertThat(p.server().rootMs())
                    .isEqualTo((double) Long.parseLong(p.client().traceId().substring(16), 16)));
    assertThat(lines.get(0)).startsWith("fetching 40 unjoined records by trace id from 3 replicas");
    assertThat(lines.get(lines.size() - 1)).startsWith("fetched 30 of 40 unjoined records");
  }

  /**
   * With --sampled-only, a request whose record came on the feed and was left out as unsampled is
   * not looked up again at the end (it could never join), and a fetched unsampled record is not
   * counted a second time.
   */
  @Test
  void recordsLeftOutAsUnsampledAreNeitherAskedForNorCountedTwice() throws Exception {
    Joiner joiner = new Joiner(PREFIX, 100, p -> {});
    joiner.sampledOnly(true);
    RecordFeedClient parser = new RecordFeedClient(vertx, URI.create("http://127.0.0.1:1"), null);
    java.util.function.IntFunction<String> unsampled =
        n -> "{\"v\":1,\"trace_id\":\"" + id(n) + "\",\"root_ms\":1.0,\"sampled\":false}";
    // 1-3: the record left out before the client result; 4-6: after; 7-8: no record on the feed.
    for (int n = 1; n <= 3; n++) {
      joiner.record(parser.parse(unsampled.apply(n)));
    }
    for (int n = 1; n <= 8; n++) {
      joiner.client(JoinerTest.client(id(n), 50));
    }
    for (int n = 4; n <= 6; n++) {
      joiner.record(parser.parse(unsampled.apply(n)));
    }
    assertThat(joiner.unsampled()).isEqualTo(6);
    assertThat(joiner.waitingIds()).containsExactlyInAnyOrder(id(7), id(8));

    Map<Integer, String> held = new java.util.HashMap<>();
    for (int n = 1; n <= 8; n++) {
      held.put(n, unsampled.apply(n));
    }
    AtomicInteger asked = new AtomicInteger();
    HttpServer a = admin(held, asked);
    Replica ra = new Replica(URI.create("http://127.0.0.1:" + a.actualPort()));
    RecordFetch.Result r = fetch(joiner).fetch(List.of(ra), Duration.ofSeconds(30));
    assertThat(asked.get()).isEqualTo(2);
    assertThat(r.found()).isZero();
    assertThat(joiner.unsampled()).as("counted once, from the feed").isEqualTo(6);
    assertThat(joiner.waiting()).isEqualTo(8);
    joiner.flush();
    assertThat(joiner.waiting()).isZero();
  }

  /** A listener that accepts and never answers: the fetch ends at its wait, saying so. */
  @Test
  void aReplicaThatNeverAnswersDoesNotHoldTheRunPastTheWait() throws Exception {
    Joiner joiner = new Joiner(PREFIX, 100, p -> {});
    for (int n = 1; n <= 5; n++) {
      joiner.client(JoinerTest.client(id(n), 50));
    }
    List<io.vertx.core.http.HttpServerRequest> held = new ArrayList<>();
    HttpServer hanging =
        vertx
            .createHttpServer()
            .requestHandler(held::add)
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    Replica r = new Replica(URI.create("http://127.0.0.1:" + hanging.actualPort()));
    RecordFetch.Result result =
        assertTimeoutPreemptively(
            Duration.ofSeconds(20), () -> fetch(joiner).fetch(List.of(r), Duration.ofMillis(500)));
    assertThat(result.timedOut()).isTrue();
    assertThat(result.found()).isZero();
    assertThat(joiner.waiting()).isEqualTo(5);
    assertThat(lines.get(lines.size() - 1)).contains("the wait of 0.5 s ran out");
  }

  @Test
  void zeroTimeoutFetchesNothing() throws Exception {
    Joiner joiner = new Joiner(PREFIX, 100, p -> {});
    joiner.client(JoinerTest.client(id(1), 50));
    Replica r = new Replica(URI.create("http://127.0.0.1:1"));
    RecordFetch.Result result = fetch(joiner).fetch(List.of(r), Duration.ZERO);
    assertThat(result.asked()).isZero();
    assertThat(lines).isEmpty();
  }
}
