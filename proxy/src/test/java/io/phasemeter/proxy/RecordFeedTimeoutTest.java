package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.telemetry.RecordFeed;
import io.phasemeter.proxy.telemetry.RequestRecord;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Issue 39 item 5: record feed subscribers that never read used to hold all 32 places for ever, so
 * a load client arriving later got 429 until they left. Now a subscriber that takes nothing for
 * {@code telemetry.records.feed_write_timeout} while records wait for it is cut and counted. Real
 * sockets: 32 subscribers with small receive buffers that never read; the timeout runs on a clock
 * the test advances, so nothing sleeps 30 s.
 */
class RecordFeedTimeoutTest extends ProxyTestBase {

  /** A clock the test advances by hand (read from the proxy's event loops). */
  private static final class HandClock implements NanoClock {
    final AtomicLong now = new AtomicLong(1_000_000_000L);

    @Override
    public long nanoTime() {
      return now.get();
    }

    @Override
    public long toEpochNanos(long nanoTime) {
      return 1_700_000_000_000_000_000L + nanoTime;
    }
  }

  @Test
  void subscribersThatNeverReadAreCutAfterTheWriteTimeoutAndANewOneGetsIn() throws Exception {
    HandClock clock = new HandClock();
    AtomicReference<RequestRecord> sample = new AtomicReference<>();
    int upstream = startVllmBackend(new CopyOnWriteArrayList<>());
    proxy =
        PhasemeterProxy.builder(vertx, config(upstream, 4, null))
            .openTelemetry(otel)
            .spanDeferral(EXPORT_EVERY_REQUEST)
            .clock(clock)
            .observer(ctx -> sample.compareAndSet(null, RequestRecord.of(ctx, true)))
            .start()
            .await(10, TimeUnit.SECONDS);
    assertThat(call("/v1/chat/completions", chat("hi", false)).status()).isEqualTo(200);
    Awaitility.await().until(() -> sample.get() != null);
    RecordFeed<RequestRecord> feed = proxy.records().feed();

    // 32 subscribers that never read, each on its own connection with a small receive buffer.
    HttpClient stuck =
        vertx.createHttpClient(
            new HttpClientOptions().setReceiveBufferSize(2048).setKeepAlive(false),
            new PoolOptions().setHttp1MaxSize(64));
    List<HttpClientResponse> held = new ArrayList<>();
    for (int i = 0; i < 32; i++) {
      HttpClientResponse r = subscribe(stuck, null).await(10, TimeUnit.SECONDS);
      assertThat(r.statusCode()).isEqualTo(200);
      held.add(r);
    }
    Awaitility.await().until(() -> feed.subscribers() == 32);
    assertThat(status(subscribe(client, b -> {}))).as("every place is held").isEqualTo(429);

    // Records until every stuck subscriber's socket is backed up (each has a bounded buffer).
    long t0 = System.nanoTime();
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(10))
        .until(
            () -> {
              for (int i = 0; i < 200; i++) {
                feed.publish(sample.get());
              }
              return feed.stalledSubscribers() == 32;
            });
    assertThat(feed.cut()).isZero();
    System.out.printf(
        "feed: 32 subscribers backed up after %d records (%.0f ms)%n",
        feed.lastId(), (System.nanoTime() - t0) / 1e6);

    clock.now.addAndGet(Duration.ofSeconds(30).toNanos());
    Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> feed.subscribers() == 0);
    assertThat(feed.cut()).isEqualTo(32);
    assertThat(metric(admin("/metrics").text(), "llm_record_feed_subscribers_cut_total"))
        .isEqualTo(32.0);

    // A new subscriber gets in, is told where the sequence stands, and reads the next record.
    long last = feed.lastId();
    Promise<String> firstEvents = Promise.promise();
    StringBuilder text = new StringBuilder();
    HttpClientResponse fresh =
        subscribe(
                client,
                b -> {
                  text.append(b.toString());
                  if (text.indexOf("\nid: " + (last + 1) + "\n\n") >= 0) {
                    firstEvents.tryComplete(text.toString());
                  }
                })
            .await(10, TimeUnit.SECONDS);
    assertThat(fresh.statusCode()).isEqualTo(200);
    Awaitility.await().until(() -> feed.subscribers() == 1);
    feed.publish(sample.get());
    String events = firstEvents.future().await(10, TimeUnit.SECONDS);
    assertThat(events)
        .startsWith(": phasemeter record feed, schema v1\n\nid: " + last + "\n\n")
        .contains("data: {\"v\":1,");
    fresh.request().reset();
  }

  /**
   * GET /admin/records/stream; what arrives goes to {@code reader}, set on the client's context
   * before any byte can arrive; without one the response is never read.
   */
  private Future<HttpClientResponse> subscribe(
      HttpClient c, io.vertx.core.Handler<io.vertx.core.buffer.Buffer> reader) {
    return onClientContext(
        () ->
            c.request(
                    new RequestOptions()
                        .setMethod(HttpMethod.GET)
                        .setHost("127.0.0.1")
                        .setPort(proxy.adminPort())
                        .setURI("/admin/records/stream"))
                .compose(req -> req.send())
                .map(
                    resp -> {
                      // A cut subscriber sees its connection close: expected here.
                      resp.exceptionHandler(t -> {});
                      if (reader == null) {
                        resp.pause();
                      } else {
                        resp.handler(reader);
                      }
                      return resp;
                    }));
  }

  private static int status(Future<HttpClientResponse> response) throws Exception {
    HttpClientResponse r = response.await(10, TimeUnit.SECONDS);
    r.request().reset();
    return r.statusCode();
  }

  private static double metric(String text, String name) {
    return text.lines()
        .filter(l -> l.startsWith(name + " ") || l.startsWith(name + "{"))
        .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
        .sum();
  }
}
