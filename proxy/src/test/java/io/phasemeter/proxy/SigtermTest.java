package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.DrainScenario.Seen;
import io.vertx.core.Context;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SIGTERM to a real proxy process during 50 streams: every stream either completes or ends {@code
 * cancelled}, the record feed delivers every record before it ends, and the process exits 0.
 */
class SigtermTest {
  private static final int STREAMS = 50;
  private static final Pattern DRAINED =
      Pattern.compile(
          "phasemeter-proxy: drained in (\\d+) ms: (\\d+) of (\\d+) in-flight requests finished,"
              + " (\\d+) cancelled at the deadline");

  @TempDir Path dir;

  private Vertx vertx;
  private HttpClient client;
  private Context context;
  private ProxyJvm proxy;

  @BeforeEach
  void setUp() {
    vertx = Vertx.vertx();
    client =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(false), new PoolOptions().setHttp1MaxSize(64));
    context = vertx.getOrCreateContext();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (proxy != null) {
      proxy.close();
    }
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static boolean held(int i) {
    return i % 5 == 0;
  }

  @Test
  void sigtermDuringFiftyStreamsDrainsDeliversEveryRecordAndExitsZero() throws Exception {
    Promise<Void> release = Promise.promise();
    AtomicInteger upstreamCut = new AtomicInteger();
    HttpServer backend =
        vertx
            .createHttpServer()
            .requestHandler(DrainScenario.backend(vertx, release.future(), upstreamCut))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml, ProxyTestBase.yaml(backend.actualPort(), "    slots: 64\ndrain: {timeout: 2s}\n"));
    proxy = ProxyJvm.start(yaml, dir.resolve("proxy.out"));
    Process process = proxy.process;
    int port = proxy.port;
    int adminPort = proxy.adminPort;
    if (System.getProperty("os.name").equals("Linux")
        && System.getProperty("os.arch").equals("amd64")) {
      // transport: auto, by default: the process streams and drains on Netty's native epoll.
      assertThat(proxy.stdout()).contains("transport: native epoll (transport: auto)");
    }

    Seen feed =
        Seen.open(client, context, HttpMethod.GET, adminPort, "/admin/records/stream", null, null);
    feed.firstBytes.future().await(10, TimeUnit.SECONDS);
    List<Seen> calls = new ArrayList<>();
    for (int i = 0; i < STREAMS; i++) {
      calls.add(
          Seen.open(
              client,
              context,
              HttpMethod.POST,
              port,
              "/v1/chat/completions",
              DrainScenario.chat(i, held(i)),
              DrainScenario.traceparent(i)));
    }
    // Every client has its first token, and the proxy reports all 50 in flight.
    Awaitility.await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> calls.stream().allMatch(Seen::started) && inFlight(adminPort) == STREAMS);
    int heldCount = (int) java.util.stream.IntStream.range(0, STREAMS).filter(i -> held(i)).count();

    long signalledAt = System.nanoTime();
    process.destroy(); // SIGTERM
    // The drain has begun once readiness goes down; only then may the finite streams finish.
    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> get(adminPort, "/health/ready").status == 503);
    release.complete();
    assertThat(process.waitFor(30, TimeUnit.SECONDS)).as("exited: %s", proxy.stdout()).isTrue();
    long wallMs = (System.nanoTime() - signalledAt) / 1_000_000;
    assertThat(process.exitValue()).as("exit status; output: %s", proxy.stdout()).isZero();

    // What the process said.
    List<String> stdout = proxy.stdout();
    assertThat(stdout).anyMatch(l -> l.startsWith("phasemeter-proxy: draining: not ready"));
    Matcher drained =
        stdout.stream()
            .map(DRAINED::matcher)
            .filter(Matcher::find)
            .findFirst()
            .orElseThrow(() -> new AssertionError("no drained line in " + stdout));
    System.out.printf(
        "sigterm: %s; SIGTERM to exit %d ms%n", drained.group().substring(18), wallMs);
    assertThat(Integer.parseInt(drained.group(2))).isEqualTo(STREAMS - heldCount);
    assertThat(Integer.parseInt(drained.group(3))).isEqualTo(STREAMS);
    assertThat(Integer.parseInt(drained.group(4))).isEqualTo(heldCount);

    // What the clients saw.
    for (int i = 0; i < STREAMS; i++) {
      Seen s = calls.get(i);
      boolean ended = s.ended.future().await(10, TimeUnit.SECONDS);
      assertThat(s.status).as("stream %d status", i).isEqualTo(200);
      if (held(i)) {
        assertThat(ended).as("held stream %d is cut", i).isFalse();
        assertThat(s.text()).doesNotContain("[DONE]");
      } else {
        assertThat(ended).as("finite stream %d ends (%s)", i, s.failure).isTrue();
        assertThat(s.text()).endsWith(VllmScript.DONE);
      }
    }
    assertThat(upstreamCut).as("held upstream streams cancelled").hasValue(heldCount);

    // The record feed: every record, matching what each client saw, then the end of the stream.
    assertThat(feed.ended.future().await(10, TimeUnit.SECONDS))
        .as("the feed ends cleanly (%s)", feed.failure)
        .isTrue();
    List<JsonObject> fed = DrainScenario.records(feed.text());
    assertThat(fed).hasSize(STREAMS);
    Map<String, JsonObject> byTrace =
        fed.stream().collect(Collectors.toMap(r -> r.getString("trace_id"), Function.identity()));
    for (int i = 0; i < STREAMS; i++) {
      JsonObject rec = byTrace.get(DrainScenario.traceId(i));
      assertThat(rec).as("record %d on the feed", i).isNotNull();
      assertThat(rec.getInteger("status")).isEqualTo(200);
      if (held(i)) {
        assertThat(rec.getString("outcome")).isEqualTo("cancelled");
        assertThat(rec.getString("error_type")).isEqualTo("shutting_down");
      } else {
        assertThat(rec.getString("outcome")).isEqualTo("success");
      }
    }
  }

  private record Got(int status, String body) {}

  private Got get(int port, String uri) throws Exception {
    Promise<Got> got = Promise.promise();
    context.runOnContext(
        v ->
            client
                .request(
                    new RequestOptions()
                        .setMethod(HttpMethod.GET)
                        .setHost("127.0.0.1")
                        .setPort(port)
                        .setURI(uri))
                .compose(req -> req.send())
                .compose(resp -> resp.body().map(b -> new Got(resp.statusCode(), b.toString())))
                .onComplete(got));
    return got.future().await(10, TimeUnit.SECONDS);
  }

  /** {@code llm_requests_in_flight} summed over its series, as a scraper sees it. */
  private int inFlight(int adminPort) throws Exception {
    double sum = 0;
    for (String line : get(adminPort, "/metrics").body.split("\n")) {
      if (line.startsWith("llm_requests_in_flight{")
          || line.startsWith("llm_requests_in_flight ")) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return (int) sum;
  }
}
