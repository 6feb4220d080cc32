package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerResponse;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * One feed per replica into one join: a name's addresses are followed, a replica that appears in
 * the name later is followed from the next resolution, each record joins attributed to the replica
 * whose feed brought it; a name that never resolves, and a fleet beyond the bound, are one line.
 */
class ReplicaFeedsTest {
  private static final String PREFIX = "00000000000abcde";

  private Vertx vertx;
  private final List<String> said = new CopyOnWriteArrayList<>();

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

  /** A record feed on {@code host}:{@code port}; {@code subscribers} gets each subscription. */
  private HttpServer feed(String host, int port, List<HttpServerResponse> subscribers)
      throws Exception {
    return vertx
        .createHttpServer()
        .requestHandler(
            req -> {
              HttpServerResponse resp = req.response();
              resp.setChunked(true).putHeader("content-type", "text/event-stream");
              resp.write(": phasemeter record feed, schema v1\n\nid: 0\n\n");
              subscribers.add(resp);
            })
        .listen(port, host)
        .await(10, TimeUnit.SECONDS);
  }

  private static void publish(List<HttpServerResponse> subscribers, int n) {
    for (HttpServerResponse r : subscribers) {
      r.write("data: {\"v\":1,\"trace_id\":\"" + id(n) + "\",\"root_ms\":1.0}\nid: " + n + "\n\n");
    }
  }

  @Test
  void aReplicaThatAppearsInTheNameIsFollowedAndItsRecordsCountForIt() throws Exception {
    List<HttpServerResponse> one = new CopyOnWriteArrayList<>();
    List<HttpServerResponse> two = new CopyOnWriteArrayList<>();
    HttpServer first = feed("127.0.0.1", 0, one);
    int port = first.actualPort();
    feed("127.0.0.2", port, two);
    AtomicReference<List<InetAddress>> addresses =
        new AtomicReference<>(List.of(InetAddress.getByName("127.0.0.1")));
    List<Pair> formed = new CopyOnWriteArrayList<>();
    Joiner joiner = new Joiner(PREFIX, 100, formed::add);
    Admins admins = Admins.parse(List.of(), "dns://fleet.test:" + port);
    ReplicaFeeds feeds =
        new ReplicaFeeds(
            vertx,
            admins,
            null,
            joiner,
            said::add,
            host -> {
              assertThat(host).isEqualTo("fleet.test");
              return addresses.get();
            },
            Duration.ofSeconds(5),
            System::nanoTime,
            Duration.ofMillis(100));
    try {
      feeds.start();
      assertThat(feeds.replicas()).extracting(Replica::name).containsExactly("127.0.0.1:" + port);
      // A second pod becomes ready: the name has its address at the next resolution.
      addresses.set(
          List.of(InetAddress.getByName("127.0.0.1"), InetAddress.getByName("127.0.0.2")));
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> two.size() == 1);
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(feeds::allConnected);
      assertThat(said)
          .contains("record feed: replica 127.0.0.2:" + port + " appeared; following it");
      for (int n = 1; n <= 6; n++) {
        joiner.client(JoinerTest.client(id(n), 50));
      }
      for (int n = 1; n <= 6; n++) {
        publish(n <= 2 ? one : two, n);
      }
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> formed.size() == 6);
      List<ReplicaCounts> counts = feeds.counts();
      assertThat(counts)
          .extracting(ReplicaCounts::replica, ReplicaCounts::joined, ReplicaCounts::state)
          .containsExactly(
              org.assertj.core.groups.Tuple.tuple("127.0.0.1:" + port, 2L, "up"),
              org.assertj.core.groups.Tuple.tuple("127.0.0.2:" + port, 4L, "up"));
      assertThat(counts.get(0).share()).isEqualTo(2 / 6.0);
      // The first leaves the name: it keeps its feed (until the feed drops).
      addresses.set(List.of(InetAddress.getByName("127.0.0.2")));
      Thread.sleep(300);
      assertThat(feeds.counts()).extracting(ReplicaCounts::state).containsExactly("up", "up");
      // Then its pod goes away: the feed drops, and the next resolution stops following it,
      // keeping what it counted; the end-of-run fetch will not ask it.
      first.close().await(10, TimeUnit.SECONDS);
      one.forEach(r -> r.reset());
      Awaitility.await()
          .atMost(Duration.ofSeconds(10))
          .until(
              () ->
                  said.contains(
                      "replica 127.0.0.1:"
                          + port
                          + ": no longer in fleet.test and its feed is down: not followed any"
                          + " more"));
      assertThat(feeds.counts())
          .extracting(ReplicaCounts::replica, ReplicaCounts::joined, ReplicaCounts::state)
          .containsExactly(
              org.assertj.core.groups.Tuple.tuple("127.0.0.1:" + port, 2L, "down"),
              org.assertj.core.groups.Tuple.tuple("127.0.0.2:" + port, 4L, "up"));
      assertThat(feeds.fetchable()).extracting(Replica::name).containsExactly("127.0.0.2:" + port);
    } finally {
      feeds.close();
    }
  }

  @Test
  void aNameThatNeverResolvesIsOneLineNamingIt() {
    ReplicaFeeds feeds =
        new ReplicaFeeds(
            vertx,
            Admins.parse(List.of(), "dns://nowhere.test:9464"),
            null,
            new Joiner(PREFIX, 10, p -> {}),
            said::add,
            host -> {
              throw new UnknownHostException(host);
            },
            Duration.ZERO,
            System::nanoTime,
            io.phasemeter.load.http.Transport.DEFAULT);
    assertThatThrownBy(feeds::start)
        .hasMessage("--admin-discover dns://nowhere.test:9464: it does not resolve");
  }

  @Test
  void aFleetBeyondTheBoundIsFollowedUpToItAndTheRestCounted() throws Exception {
    List<HttpServerResponse> subs = new CopyOnWriteArrayList<>();
    HttpServer one = feed("127.0.0.1", 0, subs);
    int port = one.actualPort();
    List<InetAddress> many = new ArrayList<>();
    many.add(InetAddress.getByName("127.0.0.1"));
    // The others refuse: a replica not yet listening is said, and tried again later.
    for (int i = 1; i < ReplicaFeeds.MAX_REPLICAS + 10; i++) {
      many.add(InetAddress.getByAddress(new byte[] {127, 1, (byte) (i / 256), (byte) (i % 256)}));
    }
    ReplicaFeeds feeds =
        new ReplicaFeeds(
            vertx,
            Admins.parse(List.of(), "dns://big.test:" + port),
            null,
            new Joiner(PREFIX, 10, p -> {}),
            said::add,
            host -> many,
            Duration.ZERO,
            System::nanoTime,
            io.phasemeter.load.http.Transport.DEFAULT);
    try {
      feeds.start();
      assertThat(feeds.replicas()).hasSize(ReplicaFeeds.MAX_REPLICAS);
      assertThat(feeds.ignored()).isEqualTo(10);
      assertThat(said.stream().filter(l -> l.contains("replicas; ")).count()).isEqualTo(1);
      assertThat(subs).hasSize(1);
    } finally {
      feeds.close();
    }
  }

  @Test
  void adminsParseBothFormsAndRefuseABadOneNamingTheFlag() {
    Admins a =
        Admins.parse(
            List.of("http://10.0.0.1:9464", "http://10.0.0.2:9464"), "dns://phasemeter-admin:9464");
    assertThat(a.urls()).hasSize(2);
    assertThat(a.discoverHost()).isEqualTo("phasemeter-admin");
    assertThat(a.discoverPort()).isEqualTo(9464);
    assertThat(a.describe())
        .isEqualTo("http://10.0.0.1:9464, http://10.0.0.2:9464, dns://phasemeter-admin:9464");
    assertThat(Admins.parse(List.of(), null)).isNull();
    assertThat(Admins.replicaName(URI.create("http://10.0.0.1:9464"))).isEqualTo("10.0.0.1:9464");
    assertThat(Admins.replicaName(URI.create("http://[::1]:9464"))).isEqualTo("[::1]:9464");
    assertThatThrownBy(() -> Admins.parse(List.of(), "phasemeter-admin:9464"))
        .hasMessageStartingWith("--admin-discover must be dns://NAME:PORT");
    assertThatThrownBy(() -> Admins.parse(List.of(), "dns://phasemeter-admin"))
        .hasMessageStartingWith("--admin-discover must be dns://NAME:PORT");
    assertThatThrownBy(() -> Admins.parse(List.of(), "dns://a:70000"))
        .hasMessageStartingWith("--admin-discover must be dns://NAME:PORT");
    assertThatThrownBy(() -> Admins.parse(List.of("127.0.0.1:9464"), null))
        .hasMessageStartingWith("--admin must be an http URL");
    // A plan's list may carry the dns:// entry; only one.
    Admins plan = Admins.parse("admin", List.of("dns://x:1", "http://y:2"), "admin", null);
    assertThat(plan.discoverText()).isEqualTo("dns://x:1");
    assertThatThrownBy(
            () -> Admins.parse("admin", List.of("dns://x:1", "dns://z:1"), "admin", null))
        .hasMessageStartingWith("admin: at most one dns://NAME:PORT");
  }
}
