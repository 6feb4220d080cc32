package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A pool's capacity is the slots of its available upstreams, told to its listener at each change
 * (an ejection, its backoff running out, an answer that lifts it), and least_loaded weighs the
 * requests in flight by each upstream's slots. The clock is the test's: the backoff runs out when
 * the test says, and the timer that notices it needs no request to pass by.
 */
class UpstreamPoolCapacityTest {
  private static final long MS = 1_000_000L;

  private final Vertx vertx = Vertx.vertx();
  private final AtomicLong now = new AtomicLong(1_000_000 * MS);
  private final NanoClock clock =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return now.get();
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return nanoTime;
        }
      };
  private final List<UpstreamPool> pools = new ArrayList<>();

  @AfterEach
  void tearDown() throws Exception {
    for (UpstreamPool p : pools) {
      p.close().await(10, TimeUnit.SECONDS);
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private UpstreamPool pool(String upstreams) {
    ProxyConfig config =
        ConfigLoader.parse(
            """
            pools:
              - name: p
                models: [m]
                upstreams: %s
                health: {path: null}
                ejection: {after: 1, backoff: 50ms, max_backoff: 50ms}
            """
                .formatted(upstreams),
            "test");
    UpstreamPool pool = new UpstreamPool(vertx, config.pools().get(0), clock, null);
    pools.add(pool);
    return pool;
  }

  /** The one choice among all upstreams, counted in flight as a request would be. */
  private static UpstreamHost chooseAndStart(UpstreamPool pool) {
    UpstreamHost h = pool.choose(List.of()).host();
    h.started();
    return h;
  }

  @Test
  void anEjectionTakesTheUpstreamsSlotsAtOnceAndTheEndOfItsBackoffGivesThemBack() throws Exception {
    UpstreamPool pool =
        pool("[{url: http://127.0.0.1:1, slots: 2}, {url: http://127.0.0.1:2, slots: 6}]");
    UpstreamHost b = pool.hosts().get(1);
    List<Integer> told = new CopyOnWriteArrayList<>();
    pool.onCapacityChange(told::add);
    assertThat(told).containsExactly(8);
    assertThat(pool.configuredSlots()).isEqualTo(8);

    pool.connectFailed(b);

    assertThat(told).as("told at the ejection, not at a later request").containsExactly(8, 2);
    assertThat(pool.availableSlots()).isEqualTo(2);
    // The timer due at the backoff's end finds the clock not there yet, and waits again.
    Thread.sleep(200);
    assertThat(told).containsExactly(8, 2);

    now.addAndGet(50 * MS);

    // Half-open: one slot for the probe, not all six (a still dead engine would have the requests
    // racing the probe retried onto the other, above its slots).
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> told.size() == 3);
    assertThat(told).containsExactly(8, 2, 3);
    pool.reachable(b); // The probe answered.
    assertThat(told).containsExactly(8, 2, 3, 8);
    assertThat(pool.configuredSlots()).isEqualTo(8);
  }

  @Test
  void anAnswerDuringTheBackoffGivesTheSlotsBackAtOnce() {
    UpstreamPool pool = pool("[http://127.0.0.1:1, http://127.0.0.1:2]");
    List<Integer> told = new CopyOnWriteArrayList<>();
    pool.onCapacityChange(told::add);
    UpstreamHost a = pool.hosts().get(0);

    pool.connectFailed(a);
    pool.reachable(a); // A request sent before the ejection answered: it is up.
    pool.reachable(a); // Nothing changes on further answers.

    assertThat(told).containsExactly(64, 32, 64);
  }

  @Test
  void leastLoadedWeighsRequestsInFlightByEachUpstreamsSlots() {
    UpstreamPool pool =
        pool("[{url: http://127.0.0.1:1, slots: 1}, {url: http://127.0.0.1:2, slots: 3}]");
    UpstreamHost small = pool.hosts().get(0);
    UpstreamHost large = pool.hosts().get(1);

    List<UpstreamHost> chosen = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      chosen.add(chooseAndStart(pool));
    }

    // Fewest in flight alone would have given each two.
    assertThat(chosen).filteredOn(h -> h == small).hasSize(1);
    assertThat(chosen).filteredOn(h -> h == large).hasSize(3);
    assertThat(small.slots()).isEqualTo(1);
    assertThat(large.slots()).isEqualTo(3);
    // 1/1 against 3/3 is a tie: in turn, both get one of the next two.
    List<UpstreamHost> next = List.of(chooseAndStart(pool), chooseAndStart(pool));
    assertThat(next).containsExactlyInAnyOrder(small, large);
  }
}
