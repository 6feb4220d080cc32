package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Whole runs of the load client against the simulator behind the proxy (both in this JVM through
 * their public entry points; the load client itself speaks only HTTP to them), with known truths.
 */
class LoadRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private Simulator sim;
  private PhasemeterProxy proxy;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    servers = Vertx.vertx();
    // Decode 10 ms per token, no batch growth, instant prefill: generation of N tokens is
    // (N - 1) × 10 ms after the first token, which comes at once.
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(16)
                    .withDecodeStepMs(10)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000))
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private void startProxy(int slots) throws Exception {
    startProxy(slots, "");
  }

  private void startProxy(int slots, String extraYaml) throws Exception {
    proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams: [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: "
                        + slots
                        + "\n"
                        + extraYaml,
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  private int run(String... args) {
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(args));
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  private int columnOf(String name) throws Exception {
    String[] header = Files.readAllLines(dir.resolve("pairs.csv")).get(0).split(",");
    return java.util.Arrays.asList(header).indexOf(name);
  }

  private static double p50(JsonNode s, String phase) {
    return s.path("phases").path(phase).path("p50_ms").asDouble(Double.NaN);
  }

  @Test
  void atALowRateNoRequestLeavesBeforeItsIntendedStart() throws Exception {
    startProxy(16);
    // 20 req/s: every arrival follows a 50 ms gap, so each is handed out ahead of its time
    // (Pacer.LEAD_NANOS) and must wait for it on the event loop, never leave early.
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--rate",
            "20",
            "--duration",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "3",
            "--out",
            dir.toString(),
            "--report-interval",
            "1s");
    assertThat(code).as(out + "\n" + err).isZero();
    java.util.List<java.util.List<String>> rows =
        java.nio.file.Files.readAllLines(dir.resolve("pairs.csv")).stream()
            .map(io.phasemeter.load.report.RunMerge::splitCsv)
            .toList();
    int lag = rows.get(0).indexOf("schedule_lag_ms");
    assertThat(lag).isNotNegative();
    assertThat(rows.subList(1, rows.size()))
        .hasSizeGreaterThanOrEqualTo(10)
        .allSatisfy(
            r -> assertThat(Double.parseDouble(r.get(lag))).as(r.toString()).isNotNegative());
  }

  @Test
  void theDecompositionRecoversAKnownQueueAndGeneration() throws Exception {
    startProxy(1);
    // Closed model, 2 in flight, 1 slot: each request waits for the other's whole generation.
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--concurrency",
            "2",
            "--duration",
            "4s",
            "--input-tokens",
            "64",
            "--output-tokens",
            "21",
            "--out",
            dir.toString(),
            "--report-interval",
            "2s");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.path("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(s.path("requests").path("errors").asLong()).isZero();
    // Through the proxy nothing closes a kept-alive connection: no retry, as before.
    assertThat(s.path("requests").path("stale_connection_retries").asLong())
        .as(s.path("connections").toString())
        .isZero();
    assertThat(s.path("connections").path("closed_by_server_after_response").asLong())
        .as(s.path("connections").toString())
        .isZero();
    assertThat(s.path("conditions").path("connection_reuse").asText()).isEqualTo("on");
    // Truth: 20 decode steps of 10 ms. Tolerance +40/-5 ms: timers are late, never early.
    double generation = p50(s, "generation");
    assertThat(generation).isBetween(195.0, 240.0);
    // Truth: the queue is the other request's time in the slot (its generation and write).
    assertThat(p50(s, "queue")).isBetween(generation - 30, generation + 30);
    // Loopback, same machine: the network envelope is small. The root ends when end() completed,
    // which the server's event loop learns a little after the bytes left; a client in the same
    // JVM can read them first, so an envelope may dip below zero by microseconds — never more.
    // The truth on loopback is ~0.1 ms; the rest is event-loop scheduling of client and proxy on
    // a shared two-core machine (seen: 3 ms idle, 12 ms with a build running beside). The bound
    // only has to show the queue and the generation did not leak into the network's share.
    assertThat(p50(s, "network_envelope")).isBetween(0.0, 50.0);
    int column = columnOf("network_envelope_ms");
    double min =
        Files.readAllLines(dir.resolve("pairs.csv")).stream()
            .skip(1)
            .map(l -> l.split(",", -1))
            .map(cols -> cols[column])
            .filter(v -> !v.isEmpty())
            .mapToDouble(Double::parseDouble)
            .min()
            .orElseThrow();
    assertThat(min).isGreaterThan(-1.0);
    assertThat(Files.exists(dir.resolve("pairs.csv"))).isTrue();
    assertThat(Files.exists(dir.resolve("report.html"))).isTrue();
  }

  @Test
  void partlyMissingRecordsLowerTheCoverageAndOnlyJoinedPairsMakeEnvelopes() throws Exception {
    startProxy(8);
    // A relay in front of the proxy's feed that passes only every other record. Anything else
    // (the client's GET /admin/stats for its conditions) is passed on whole: answered with a feed
    // that never ends, the client would wait out its 10 s timeout for it.
    HttpClient feedClient = servers.createHttpClient();
    AtomicLong passed = new AtomicLong();
    HttpServer relay =
        servers
            .createHttpServer()
            .requestHandler(
                req -> {
                  HttpServerResponse resp = req.response();
                  if (!req.path().equals("/admin/records/stream")) {
                    feedClient
                        .request(
                            new RequestOptions()
                                .setMethod(req.method())
                                .setHost("127.0.0.1")
                                .setPort(proxy.adminPort())
                                .setURI(req.uri()))
                        .compose(r -> r.send())
                        .compose(r -> r.body().map(b -> resp.setStatusCode(r.statusCode()).end(b)))
                        .onFailure(t -> resp.setStatusCode(502).end());
                    return;
                  }
                  resp.setChunked(true).putHeader("content-type", "text/event-stream");
                  resp.write(": relay\n\n");
                  AtomicLong n = new AtomicLong();
                  feedClient
                      .request(
                          new RequestOptions()
                              .setMethod(HttpMethod.GET)
                              .setHost("127.0.0.1")
                              .setPort(proxy.adminPort())
                              .setURI("/admin/records/stream"))
                      .compose(r -> r.send())
                      .onSuccess(
                          feed -> {
                            StringBuilder pending = new StringBuilder();
                            feed.handler(
                                b -> {
                                  pending.append(b.toString());
                                  int end;
                                  while ((end = pending.indexOf("\n\n")) >= 0) {
                                    String event = pending.substring(0, end + 2);
                                    pending.delete(0, end + 2);
                                    if (event.startsWith("data:") && n.incrementAndGet() % 2 == 0) {
                                      passed.incrementAndGet();
                                      resp.write(event);
                                    }
                                  }
                                });
                          });
                })
            .listen(0, "127.0.0.1")
            .await(5, TimeUnit.SECONDS);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + relay.actualPort(),
            "--model",
            "sim-llama",
            "--rate",
            "20",
            "--arrival",
            "constant",
            "--duration",
            "3s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "4",
            "--out",
            dir.toString(),
            "--join-grace",
            "2s",
            // The feed's join alone: the end-of-run lookup (through the relay) would find the rest.
            "--join-fetch-timeout",
            "0");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.at("/join/fetched").asLong()).isZero();
    long ok = s.path("requests").path("ok").asLong();
    double coverage = s.path("join_coverage").asDouble();
    assertThat(ok).isGreaterThan(40);
    assertThat(coverage).isBetween(0.4, 0.6);
    long envelopes = s.path("phases").path("network_envelope").path("count").asLong();
    assertThat(envelopes).isEqualTo(Math.round(coverage * ok));
    assertThat(s.path("phases").path("queue").path("count").asLong()).isEqualTo(envelopes);
    assertThat(s.path("phases").path("client_total").path("count").asLong()).isEqualTo(ok);
  }

  @Test
  void aFeedCutMidRunIsSubscribedAgainAndCountsTheRecordsItMissed() throws Exception {
    startProxy(8);
    var feed = proxy.records().feed();
    java.util.concurrent.ExecutorService runner =
        java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      java.util.concurrent.Future<Integer> code =
          runner.submit(
              () ->
                  run(
                      "run",
                      "--url",
                      "http://127.0.0.1:" + proxy.port(),
                      "--admin",
                      "http://127.0.0.1:" + proxy.adminPort(),
                      "--model",
                      "sim-llama",
                      "--rate",
                      "40",
                      "--arrival",
                      "constant",
                      "--duration",
                      "3s",
                      "--input-tokens",
                      "16",
                      "--output-tokens",
                      "2",
                      "--out",
                      dir.toString()));
      // Mid-run, the proxy ends every subscription (as when its admin listener goes away).
      org.awaitility.Awaitility.await()
          .atMost(java.time.Duration.ofSeconds(30))
          .until(() -> feed.lastId() >= 20);
      feed.close().await(5, TimeUnit.SECONDS);
      assertThat(code.get(60, TimeUnit.SECONDS)).as(out + "\n" + err).isZero();
    } finally {
      runner.shutdownNow();
    }
    JsonNode join = summary().path("join");
    out.toString().lines().filter(l -> l.contains("record feed:")).forEach(System.out::println);
    assertThat(join.path("feed_reconnects").asLong()).as(join.toString()).isEqualTo(1);
    // The truth: the records published while the client was away are those of the requests the
    // feed never joined (nothing else goes through this proxy), and the end-of-run lookup by trace
    // id fetched each of them back: every request joined.
    long fetched = join.path("fetched").asLong();
    assertThat(fetched).as("the feed was away for a back-off at 40 req/s").isPositive();
    assertThat(join.path("records_missed").asLong()).as(join.toString()).isEqualTo(fetched);
    assertThat(join.path("joined").asLong()).isEqualTo(join.path("finished").asLong());
    assertThat(join.at("/replicas/0/fetched").asLong()).isEqualTo(fetched);
    assertThat(out.toString())
        .containsPattern(
            "phasemeter load: record feed: reconnected after \\d+\\.\\d s, "
                + fetched
                + " records? missed; it had dropped: the proxy ended the feed");
  }

  /**
   * Issue 39 round 2: on an idle proxy, feed subscribers that never read hold all 32 places (no
   * record waits for them, so no write timeout runs), and a run's first subscribe got 429 and
   * exited 2 at once. Now it waits for a place, saying so once; here one of the 32 leaves while it
   * waits, and the run joins every record.
   */
  @Test
  void aRunThatFindsEveryFeedPlaceTakenWaitsForOneAndJoins() throws Exception {
    startProxy(8);
    var feed = proxy.records().feed();
    HttpClient holders =
        servers.createHttpClient(
            new io.vertx.core.http.HttpClientOptions().setKeepAlive(false),
            new io.vertx.core.http.PoolOptions().setHttp1MaxSize(40));
    java.util.List<io.vertx.core.http.HttpClientResponse> held = new java.util.ArrayList<>();
    for (int i = 0; i < 32; i++) {
      var r =
          holders
              .request(
                  new RequestOptions()
                      .setMethod(HttpMethod.GET)
                      .setHost("127.0.0.1")
                      .setPort(proxy.adminPort())
                      .setURI("/admin/records/stream"))
              .compose(req -> req.send())
              .await(10, TimeUnit.SECONDS);
      assertThat(r.statusCode()).isEqualTo(200);
      r.pause(); // never reads
      held.add(r);
    }
    org.awaitility.Awaitility.await().until(() -> feed.subscribers() == 32);
    java.util.concurrent.ExecutorService runner =
        java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      java.util.concurrent.Future<Integer> code =
          runner.submit(
              () ->
                  run(
                      "run",
                      "--url",
                      "http://127.0.0.1:" + proxy.port(),
                      "--admin",
                      "http://127.0.0.1:" + proxy.adminPort(),
                      "--model",
                      "sim-llama",
                      "--rate",
                      "10",
                      "--duration",
                      "1s",
                      "--input-tokens",
                      "16",
                      "--output-tokens",
                      "2",
                      "--out",
                      dir.toString()));
      org.awaitility.Awaitility.await()
          .atMost(java.time.Duration.ofSeconds(20))
          .until(() -> out.toString().contains("record feed: every place") || code.isDone());
      assertThat(code.isDone()).as(out + "\n" + err).isFalse();
      assertThat(out.toString())
          .contains(
              "phasemeter load: record feed: every place on the proxy's record feed is taken (it"
                  + " answered 429); trying again for up to 30 s");
      held.get(0).request().connection().close();
      assertThat(code.get(60, TimeUnit.SECONDS)).as(out + "\n" + err).isZero();
    } finally {
      runner.shutdownNow();
      holders.close();
    }
    assertThat(summary().path("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(out.toString().lines().filter(l -> l.contains("record feed:")).count())
        .as("one line while it waited, no reconnect")
        .isEqualTo(1);
  }

  @Test
  void joiningOnlyExportedTracesSaysTheEnvelopeDescribesTheTail() throws Exception {
    // The proxy exports only requests slower than 150 ms; half the requests take ~20 ms, half ~300.
    startProxy(
        8, "telemetry:\n  sampling: {ratio: 0.0, keep_errors: true, keep_slower_than: 150ms}\n");
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--concurrency",
            "4",
            "--duration",
            "3s",
            "--mix",
            "16:3=0.5,16:31=0.5",
            "--join-sampled-only",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    double coverage = s.path("join_coverage").asDouble();
    assertThat(coverage).isBetween(0.25, 0.75);
    assertThat(s.path("conditions").path("join_basis").asText()).contains("describe the tail");
    assertThat(s.path("conditions").path("join_unsampled_records_left_out").asLong()).isPositive();
    assertThat(out.toString()).contains("note: envelopes and server phases come only from");
    // Only the slow, exported requests reach the server phases: generation p50 is the long one.
    assertThat(p50(s, "generation")).isGreaterThan(150.0);
  }

  /**
   * An engine that closes each kept-alive connection a moment after a streamed response, without
   * saying so, as llama.cpp's server does; a request that arrives on such a connection is never
   * answered. Counted here, to be matched with the run's own counts.
   */
  private int closingAfterStreams(AtomicLong answered, AtomicLong unanswered) throws Exception {
    java.util.Set<io.vertx.core.http.HttpConnection> closing =
        java.util.concurrent.ConcurrentHashMap.newKeySet();
    HttpServer engine =
        servers
            .createHttpServer()
            .requestHandler(
                req -> {
                  var conn = req.connection();
                  if (closing.contains(conn)) {
                    unanswered.incrementAndGet();
                    conn.close();
                    return;
                  }
                  req.body()
                      .onSuccess(
                          b -> {
                            answered.incrementAndGet();
                            closing.add(conn);
                            req.response()
                                .putHeader("content-type", "text/event-stream")
                                .putHeader("keep-alive", "timeout=5, max=100")
                                .end(
                                    "data: {\"choices\":[{\"index\":0,\"delta\":"
                                        + "{\"content\":\"hi\"}}]}\n\n"
                                        + "data: {\"choices\":[],\"usage\":"
                                        + "{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n"
                                        + "data: [DONE]\n\n")
                                .onComplete(v -> servers.setTimer(20, t -> conn.close()));
                          });
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    return engine.actualPort();
  }

  @Test
  void anEngineThatClosesAfterStreamsLosesNoRequestAndTheRunCountsEveryRetry() throws Exception {
    AtomicLong answered = new AtomicLong();
    AtomicLong unanswered = new AtomicLong();
    int port = closingAfterStreams(answered, unanswered);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + port,
            "--model",
            "tiny-llama",
            "--chat",
            "--concurrency",
            "2",
            "--duration",
            "2s",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.path("requests").path("errors").asLong()).as(out.toString()).isZero();
    long retries = s.path("requests").path("stale_connection_retries").asLong();
    // Each request the engine read on a closing connection was resent; so was any written after
    // the close, which the engine never saw.
    assertThat(retries).isGreaterThanOrEqualTo(unanswered.get());
    assertThat(s.path("requests").path("sent").asLong() + 0).isLessThanOrEqualTo(answered.get());
    JsonNode conns = s.path("connections");
    assertThat(conns.path("stale_connection_retries").asLong()).isEqualTo(retries);
    assertThat(conns.path("closed_by_server_after_response").asLong() + retries).isPositive();
    assertThat(out.toString())
        .contains("stale-connection retries")
        .contains("the server closed kept-alive connections after responses");
    // pairs.csv marks each request that was resent.
    int retriedColumn = columnOf("retried");
    long retriedRows =
        Files.readAllLines(dir.resolve("pairs.csv")).stream()
            .skip(1)
            .filter(l -> l.split(",", -1)[retriedColumn].equals("true"))
            .count();
    assertThat(retriedRows).isEqualTo(retries);

    // With a connection per request nothing is retried, and the server sees no stale request.
    answered.set(0);
    unanswered.set(0);
    Path offDir = dir.resolve("off");
    int off =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + port,
            "--model",
            "tiny-llama",
            "--chat",
            "--concurrency",
            "2",
            "--duration",
            "2s",
            "--connection-reuse",
            "off",
            "--out",
            offDir.toString());
    assertThat(off).as(out + "\n" + err).isZero();
    JsonNode o = JSON.readTree(offDir.resolve("summary.json").toFile());
    assertThat(o.path("requests").path("errors").asLong()).isZero();
    assertThat(o.path("requests").path("stale_connection_retries").asLong()).isZero();
    assertThat(unanswered.get()).isZero();
    assertThat(o.path("connections").path("reuse").asText()).isEqualTo("off");
    assertThat(o.path("conditions").path("connection_reuse").asText()).isEqualTo("off");
    assertThat(o.path("connections").path("opened").asLong())
        .isEqualTo(o.path("requests").path("sent").asLong() + 0);
  }

  @Test
  void aRateTheInFlightCapCannotSustainDropsAndExits4() throws Exception {
    startProxy(8);
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--model",
            "sim-llama",
            "--rate",
            "50",
            "--arrival",
            "constant",
            "--duration",
            "2s",
            "--max-in-flight",
            "1",
            "--input-tokens",
            "16",
            "--output-tokens",
            "30",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isEqualTo(4);
    assertThat(summary().path("requests").path("dropped").asLong()).isPositive();
    assertThat(out.toString()).contains("INVALID RUN").contains("dropped");
  }

  @Test
  void failedRequestsArePrintedAtMostTenPerIntervalAndTheRestCounted() throws Exception {
    startProxy(8);
    // An unknown model: the proxy answers every request 404, 100 failures in 2 s.
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--model",
            "no-such-model",
            "--rate",
            "50",
            "--arrival",
            "constant",
            "--duration",
            "2s",
            "--report-interval",
            "1s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "4",
            "--out",
            dir.toString());
    String printed = out.toString();
    long failLines = printed.lines().filter(l -> l.startsWith("  FAIL trace=")).count();
    long tables = printed.lines().filter(l -> l.startsWith("[")).count();
    // No success at all: the run is invalid, and its error rate (100 %) is above the default.
    assertThat(code).as(printed + "\n" + err).isEqualTo(4);
    assertThat(printed)
        .contains("INVALID RUN")
        .contains("no request succeeded (100 errors")
        .contains("error rate 100.0 % (100 of 100 requests sent failed) is above the limit of 1 %");
    assertThat(summary().path("requests").path("errors").asLong()).isEqualTo(100);
    assertThat(failLines).as(printed).isBetween(10L, 10 * (tables + 1));
    assertThat(printed)
        .contains("class=HTTP_4XX status=404")
        .containsPattern("\\((\\d+) more slow/failed not printed\\)");
  }

  /** A whole run straight at the simulator, whose engine fails {@code errorRate} of requests. */
  private int runAgainstAFailingEngine(Path out, String... extra) throws Exception {
    java.util.List<String> args =
        new java.util.ArrayList<>(
            java.util.List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + sim.port(),
                "--model",
                "sim-llama",
                "--rate",
                "100",
                "--arrival",
                "constant",
                "--duration",
                "1s",
                "--input-tokens",
                "4",
                "--output-tokens",
                "2",
                "--out",
                out.toString()));
    args.addAll(java.util.List.of(extra));
    return run(args.toArray(String[]::new));
  }

  @Test
  void withoutBudgetsARunWithMoreErrorsThanMaxErrorRateExits4() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(64)
                    .withDecodeStepMs(1)
                    .withPrefillTokensPerSecond(10_000_000)
                    .withErrorRate(0.3))
            .await(10, TimeUnit.SECONDS);

    // No budgets file: the default limit, 1 % of the requests sent.
    int code = runAgainstAFailingEngine(dir.resolve("default"));
    String printed = out.toString();
    assertThat(code).as(printed + "\n" + err).isEqualTo(4);
    JsonNode s = JSON.readTree(dir.resolve("default").resolve("summary.json").toFile());
    long sent = s.path("requests").path("sent").asLong();
    long failed = sent - s.path("requests").path("ok").asLong();
    assertThat(sent).isEqualTo(100);
    assertThat(failed).as("the engine failed about 30 %").isBetween(10L, 50L);
    assertThat(s.path("requests").path("error_rate").asDouble()).isEqualTo(failed / 100.0);
    assertThat(s.path("conditions").path("max_error_rate").asDouble()).isEqualTo(0.01);
    assertThat(printed)
        .contains("INVALID RUN (exit 4)")
        .contains(
            String.format(
                java.util.Locale.ROOT,
                "error rate %.1f %% (%d of 100 requests sent failed) is above the limit of 1 %%"
                    + " (--max-error-rate, the default",
                (double) failed,
                failed));

    // A limit above the rate: the run holds.
    out.getBuffer().setLength(0);
    assertThat(runAgainstAFailingEngine(dir.resolve("half"), "--max-error-rate", "50%"))
        .as(out + "\n" + err)
        .isZero();
    assertThat(out.toString()).doesNotContain("INVALID RUN").contains("every budget holds");

    // A budgets file's max_error_rate wins over the flag.
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: lenient\n    model: \"*\"\n    quantile: 0.5\n    window: 1m\n"
            + "    limits_ms: {client_total: 60000}\n    max_error_rate: 0.5\n"
            + "    min_join_coverage: 0\n");
    out.getBuffer().setLength(0);
    assertThat(
            runAgainstAFailingEngine(
                dir.resolve("budgets"), "--max-error-rate", "1%", "--budgets", budgets.toString()))
        .as(out + "\n" + err)
        .isZero();
    JsonNode b = JSON.readTree(dir.resolve("budgets").resolve("summary.json").toFile());
    assertThat(b.path("conditions").path("max_error_rate_from").asText()).isEqualTo("budgets");
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--max-error-rate",
                "150%"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--max-error-rate must be a share between 0 and 1");

    // In a budgets file it is a number: 5% is a config error naming the file and key, before any
    // request (it used to be read as none, and the default judged instead).
    Path percent = dir.resolve("percent.yaml");
    Files.writeString(
        percent,
        "budgets:\n  - name: lenient\n    model: \"*\"\n    quantile: 0.5\n    window: 1m\n"
            + "    limits_ms: {client_total: 60000}\n    max_error_rate: 5%\n");
    err.getBuffer().setLength(0);
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--budgets",
                percent.toString()))
        .isEqualTo(2);
    assertThat(err.toString())
        .startsWith(
            "phasemeter load: "
                + percent
                + ": budgets[0] (lenient).max_error_rate: must be a number from 0 to 1")
        .contains("got '5%'")
        .hasLineCount(1);
  }

  @Test
  void aBudgetBreachedOnOnePhaseExits3AndNamesThatPhaseOnly() throws Exception {
    startProxy(1);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: tight-queue\n    model: \"*\"\n    quantile: 0.5\n    window: 1m\n"
            + "    limits_ms: {queue: 20, gateway: 1000, generation: 5000, network_envelope: 1000, total: 60000}\n"
            + "    max_error_rate: 0.5\n    min_join_coverage: 0.5\n");
    Path reportDir = dir.resolve("report");
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--model",
            "sim-llama",
            "--concurrency",
            "3",
            "--duration",
            "3s",
            "--input-tokens",
            "16",
            "--output-tokens",
            "11",
            "--budgets",
            budgets.toString(),
            "--out",
            reportDir.toString());
    assertThat(code).as(out + "\n" + err).isEqualTo(3);
    String breaches =
        out.toString().lines().filter(l -> l.contains("BREACH")).reduce("", (a, b) -> a + b + "\n");
    assertThat(breaches)
        .contains("queue")
        .doesNotContain("gateway")
        .doesNotContain("generation")
        .doesNotContain("network_envelope")
        .doesNotContain("total");
    JsonNode s = JSON.readTree(reportDir.resolve("summary.json").toFile());
    for (JsonNode b : s.path("budgets")) {
      assertThat(b.path("breached").asBoolean())
          .as(b.toString())
          .isEqualTo(b.path("phase").asText().equals("queue"));
      if (!b.path("phase").asText().equals("error_rate")
          && !b.path("phase").asText().equals("join_coverage")) {
        // The verdict (and the exit code) come from the exact counts, by the proxy's formula.
        assertThat(b.path("breached").asBoolean())
            .as(b.toString())
            .isEqualTo(
                io.phasemeter.core.budget.LatencyLimit.breached(
                    0.5, b.path("at_or_below").asLong(), b.path("count").asLong()));
        assertThat(b.path("over_limit_share").isNumber()).as(b.toString()).isTrue();
      }
    }
  }

  @Test
  void aWarmUpAtLoadRunsBeforeTheClockAndCountsNothing() throws Exception {
    int code =
        run(
            "run",
            "--url",
            "http://127.0.0.1:" + sim.port(),
            "--model",
            "sim-llama",
            "--rate",
            "40",
            "--arrival",
            "constant",
            "--duration",
            "1s",
            "--warmup-duration",
            "1s",
            "--stream",
            "--input-tokens",
            "4",
            "--output-tokens",
            "3",
            "--out",
            dir.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    // Rising to 40 req/s over 1 s: 20 requests.
    assertThat(out.toString())
        .contains("warm-up at load for 1.0 s (rising to 40.00 req/s): 20 requests sent, 0 dropped");
    JsonNode s = summary();
    assertThat(s.path("requests").path("sent").asLong()).isEqualTo(40);
    assertThat(s.path("requests").path("ok").asLong()).isEqualTo(40);
    // Three tokens, two gaps each: only the measured requests' gaps, none of the warm-up's.
    assertThat(s.path("phases").path("itl").path("count").asLong()).isEqualTo(80);
    java.util.List<String> rows = Files.readAllLines(dir.resolve("pairs.csv"));
    assertThat(rows).hasSize(41);
    String prefix = s.path("conditions").path("trace_id_prefix").asText();
    assertThat(rows.subList(1, rows.size()))
        .allSatisfy(
            r -> {
              String[] f = r.split(",");
              assertThat(Long.parseLong(f[0])).isBetween(1L, 40L);
              assertThat(f[1]).startsWith(prefix);
            });
  }

  @Test
  void badUsageExits2WithOneLine() {
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--rate",
                "1",
                "--concurrency",
                "2",
                "--duration",
                "1s"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("exactly one of");
    assertThat(
            run("run", "--url", "http://x:1", "--model", "m", "--rate", "1", "--duration", "soon"))
        .isEqualTo(2);
    assertThat(run("run", "--model", "m")).isEqualTo(2);
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--rate",
                "Infinity",
                "--duration",
                "1s"))
        .isEqualTo(2);
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--steps",
                "1,2",
                "--step-duration",
                "0s"))
        .isEqualTo(2);
    assertThat(
            run(
                "run",
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--rate",
                "1",
                "--duration",
                "1s",
                "--budgets",
                "/no/such/file.yaml"))
        .isEqualTo(2);
  }

  @Test
  void theDemoRunsEndToEndAndWritesItsReport() throws Exception {
    Path demoDir = dir.resolve("demo");
    int code =
        run(
            "demo",
            "--steps",
            "2,30",
            "--step-duration",
            "3s",
            "--out",
            demoDir.toString(),
            "--report-interval",
            "2s");
    assertThat(code).as(out + "\n" + err).isZero();
    assertThat(out.toString())
        .contains("phasemeter demo:")
        .contains("BREACH")
        .contains("report written to");
    assertThat(Files.exists(demoDir.resolve("summary.json"))).isTrue();
    assertThat(Files.exists(demoDir.resolve("report.html"))).isTrue();
  }
}
