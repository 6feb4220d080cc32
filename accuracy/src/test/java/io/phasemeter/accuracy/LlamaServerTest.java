package io.phasemeter.accuracy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * The real proxy (its fat jar, a separate JVM) in front of llama.cpp's own {@code llama-server} (a
 * real inference engine with a tiny random-weight model, {@link RealWorld}), driven by plain HTTP
 * and by the load client's jar: every piece a separate process on real loopback sockets. Each test
 * prints one line of figures; every process is stopped after each test. Skipped on a laptop where
 * {@code tools/realworld.sh} has not run, failed under {@code CI=true}.
 */
class LlamaServerTest {
  private static final Path ROOT = AccuracySuiteTest.ROOT;
  private static final Path PROXY_JAR = AccuracySuiteTest.PROXY_JAR;
  private static final Path LOAD_JAR = AccuracySuiteTest.LOAD_JAR;
  private static final String MODEL = RealWorld.MODEL;

  /** Longest any single request may take before the test calls it a hang. */
  private static final Duration REQUEST_BOUND = Duration.ofSeconds(60);

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(2))
          .build();

  private RealWorld rw;
  private Path work;
  private final List<Process> processes = Collections.synchronizedList(new ArrayList<>());
  private final ExecutorService readers = Executors.newCachedThreadPool();
  private Vertx vertx;
  private int proxyPort;
  private int adminPort;

  @BeforeEach
  void setUp(TestInfo info) throws Exception {
    rw = RealWorld.require();
    assertThat(PROXY_JAR).as("build the modules first (mvn install -DskipTests)").exists();
    assertThat(LOAD_JAR).exists();
    work = ROOT.resolve("accuracy/target/llama-e2e").resolve(info.getTestMethod().get().getName());
    AccuracySuiteTest.deleteTree(work);
    Files.createDirectories(work);
  }

  @AfterEach
  void tearDown() throws Exception {
    readers.shutdownNow();
    List<Process> all;
    synchronized (processes) {
      all = new ArrayList<>(processes);
    }
    Collections.reverse(all);
    for (Process p : all) {
      Procs.stop(p);
    }
    if (vertx != null) {
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
  }

  // ------------------------------------------------------------------------------------ tests

  @Test
  void chatAndCompletionsStreamedAndNotCarryUsageTimingsAndSpans() throws Exception {
    int llama = Procs.freePort();
    startLlama(llama, 2, List.of(), "llama");
    vertx = Vertx.vertx();
    OtlpReceiver otlp = OtlpReceiver.start(vertx);
    startProxy(pool("llama", MODEL, 2, llama), otlp.endpoint());

    // llama-server sends usage on a chat stream only when asked (stream_options.include_usage):
    // the record's token counts of a chat stream come from the proxy's rewrite.
    Map<String, JsonNode> records = new LinkedHashMap<>();
    for (String route : List.of("/v1/chat/completions", "/v1/completions")) {
      for (boolean stream : List.of(false, true)) {
        String trace = newTraceId();
        Reply r = post(route, body(route, stream, 8), trace);
        String what = route + (stream ? " streamed" : "");
        assertThat(r.status()).as(what + ": " + r.body()).isEqualTo(200);
        if (stream) {
          assertThat(r.endsWithDone()).as(what + " ends with [DONE]: " + r.body()).isTrue();
          assertThat(r.errorEvent()).as(what).isNull();
          if (route.equals("/v1/chat/completions")) {
            // The client did not ask for usage: the chunk the proxy asked for is not passed on.
            // (llama-server's /v1/completions puts usage in its finish chunk unasked, so that one
            // reaches the client as the engine sent it.)
            assertThat(r.body()).as(what + ": usage chunk passed on").doesNotContain("\"usage\"");
          }
        } else {
          assertThat(JSON.readTree(r.body()).at("/usage/completion_tokens").asInt()).isEqualTo(8);
        }
        JsonNode rec = awaitRecord(trace);
        records.put(what, rec);
        assertThat(rec.at("/status").asInt()).as(what).isEqualTo(200);
        assertThat(rec.at("/outcome").asText()).as(what).isEqualTo("success");
        assertThat(rec.at("/stream").asBoolean()).as(what).isEqualTo(stream);
        assertThat(rec.at("/tokens/input").asLong()).as(what + " tokens.input").isPositive();
        assertThat(rec.at("/tokens/output").asLong()).as(what + " tokens.output").isEqualTo(8);
        assertThat(rec.at("/finish_reason").asText()).as(what).isEqualTo("length");
        if (stream) {
          assertThat(rec.at("/server_ttft_ms").asDouble()).as(what + " server TTFT").isPositive();
          assertThat(rec.at("/tpot_ms").asDouble()).as(what + " TPOT").isPositive();
        }
      }
    }
    // Every one of them exported: the root span named after the route, and the generation.
    await()
        .atMost(Duration.ofSeconds(30))
        .untilAsserted(
            () -> {
              for (JsonNode rec : records.values()) {
                List<String> names = otlp.spanNames(rec.at("/trace_id").asText());
                assertThat(names)
                    .as("spans of " + rec.at("/trace_id").asText())
                    .contains("POST " + rec.at("/route").asText(), "inference.generate");
              }
            });
    assertThat(otlp.malformed()).as("malformed OTLP exports").isZero();

    // The load client: exact lengths (token-id prompts, ignore_eos), every request joined.
    JsonNode s = loadRun("run", 2, "8s", "64", "16");
    assertThat(s.at("/requests/errors").asLong()).as("load client errors").isZero();
    assertThat(s.at("/requests/invalid").asLong()).as("load client invalid").isZero();
    assertThat(s.at("/requests/ok").asLong()).as("load client ok").isPositive();
    assertThat(s.at("/join_coverage").asDouble()).as("join coverage").isEqualTo(1.0);
    // docs/accuracy.md's boundary rule: the client may read the last byte before the proxy's
    // end() callback runs, so an envelope may be negative, by no more than the write phase.
    List<String> beyondWrite = new ArrayList<>();
    List<Map<String, String>> pairs = csv(work.resolve("run/pairs.csv"));
    long negative = 0;
    for (Map<String, String> row : pairs) {
      if (row.get("network_envelope_ms").isEmpty()) {
        continue; // not joined (none here: coverage is 100 %)
      }
      double envelope = Double.parseDouble(row.get("network_envelope_ms"));
      if (envelope < 0) {
        negative++;
        if (-envelope > Double.parseDouble(row.get("write_ms")) + 1) {
          beyondWrite.add(
              row.get("trace_id") + ": " + envelope + " ms, write " + row.get("write_ms"));
        }
      }
    }
    assertThat(beyondWrite).as("negative envelopes beyond the write phase + 1 ms").isEmpty();

    JsonNode chat = records.get("/v1/chat/completions streamed");
    JsonNode comp = records.get("/v1/completions streamed");
    System.out.printf(
        Locale.ROOT,
        "llama-server e2e: chat and completions, streamed and not: 4/4 200 with usage in the"
            + " record (streams: server TTFT %.1f / %.1f ms, TPOT %.1f / %.1f ms); %d spans in %d"
            + " OTLP exports (%d bytes); load c=2 8 s 64:16: %d ok, %d errors, join %.0f %%, %d"
            + " negative envelopes (each within its write phase), %d client stale retries, %.0f"
            + " proxy stale retries%n",
        chat.at("/server_ttft_ms").asDouble(),
        comp.at("/server_ttft_ms").asDouble(),
        chat.at("/tpot_ms").asDouble(),
        comp.at("/tpot_ms").asDouble(),
        otlp.spans(),
        otlp.exports(),
        otlp.bytes(),
        s.at("/requests/ok").asLong(),
        s.at("/requests/errors").asLong(),
        100 * s.at("/join_coverage").asDouble(),
        negative,
        s.at("/requests/stale_connection_retries").asLong(),
        metric("llm_upstream_stale_retries_total"));
  }

  @Test
  void twoHundredSequentialStreamsThroughTheProxyAllEndWithDone() throws Exception {
    int llama = Procs.freePort();
    startLlama(llama, 2, List.of(), "llama");
    startProxy(pool("llama", MODEL, 2, llama), null);

    int n = 200;
    double staleBefore = metric("llm_upstream_stale_retries_total");
    List<String> failures = new ArrayList<>();
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      String route = i % 2 == 0 ? "/v1/chat/completions" : "/v1/completions";
      Reply r = post(route, body(route, true, 8), newTraceId());
      if (r.status() != 200 || !r.endsWithDone() || r.errorEvent() != null) {
        failures.add("#" + i + " " + route + ": " + r.status() + " " + r.tail());
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    double stale = metric("llm_upstream_stale_retries_total") - staleBefore;
    double retries = metric("llm_upstream_retries_total");
    double ejections = metric("llm_upstream_ejections_total");
    System.out.printf(
        Locale.ROOT,
        "llama-server e2e: %d streams (sequential, one kept-alive client connection), %d errors,"
            + " %.0f stale retries by the proxy, %.0f other retries, %.0f ejections, %.1f s%n",
        n,
        failures.size(),
        stale,
        retries,
        ejections,
        seconds);
    assertThat(failures).as("client-visible failures").isEmpty();
    assertThat(ejections).as("a stale connection is not the upstream's failure").isZero();
  }

  @Test
  void campaignOfTwoPointsThroughTheProxyIsValid() throws Exception {
    int llama = Procs.freePort();
    startLlama(llama, 2, List.of(), "llama");
    Path proxyConfig = startProxy(pool("llama", MODEL, 2, llama), null);
    // Runs of 3 s after 2 s of warm-up, as the --start-cmd test's: each still holds tens of
    // requests, and what is asserted (every run valid, exact lengths) does not depend on how many.
    Path plan = plan("[1, 2]", "3s", "2s");
    Path out = work.resolve("campaign");

    int exit =
        runLoadClient(
            "campaign",
            Duration.ofSeconds(180),
            "campaign",
            "--plan",
            plan.toString(),
            "--url",
            proxyUrl(),
            "--admin",
            adminUrl(),
            "--proxy-config",
            proxyConfig.toString(),
            "--label",
            "engine=llama-server " + rw.llamaVersion,
            "--out",
            out.toString());
    JsonNode c = JSON.readTree(out.resolve("campaign.json").toFile());
    assertThat(exit).as("campaign exit code (see " + work + ")").isZero();
    assertThat(c.at("/invalid_runs")).as("invalid runs").isEmpty();
    List<String> figures = new ArrayList<>();
    for (JsonNode p : c.at("/points")) {
      assertThat(p.at("/valid_runs").asInt()).as(p.at("/id").asText()).isEqualTo(3);
      assertThat(p.at("/invalid_runs").asInt()).as(p.at("/id").asText()).isZero();
      JsonNode tput = p.at("/metrics/output_token_throughput");
      JsonNode ttft = p.at("/metrics/ttft_p50_ms");
      figures.add(
          String.format(
              Locale.ROOT,
              "%s %.0f ± %.0f out tok/s, TTFT p50 %.1f ± %.1f ms",
              p.at("/id").asText(),
              tput.at("/mean").asDouble(),
              tput.at("/ci95_half_width").asDouble(),
              ttft.at("/mean").asDouble(),
              ttft.at("/ci95_half_width").asDouble()));
    }
    long measured = 0;
    long requests = 0;
    for (JsonNode r : c.at("/runs")) {
      assertThat(r.at("/valid").asBoolean()).as(r.at("/name").asText()).isTrue();
      if (!r.at("/warmup").asBoolean()) {
        measured++;
        requests += r.at("/requests_sent").asLong();
      }
    }
    assertThat(measured).isEqualTo(6);
    assertThat(out.resolve("report.html")).exists();
    System.out.printf(
        Locale.ROOT,
        "llama-server campaign: 2 points × 3 repeats through the proxy, %d of %d measured runs"
            + " valid (%d requests, exact lengths); %s%n",
        measured,
        measured,
        requests,
        String.join("; ", figures));
  }

  @Test
  void startCommandTimesColdAndWarmStartsOfLlamaServer() throws Exception {
    int llama = Procs.freePort();
    Path plan = plan("[1]", "3s", "2s");
    Path out = work.resolve("campaign");
    int exit =
        runLoadClient(
            "campaign",
            Duration.ofSeconds(150),
            "campaign",
            "--plan",
            plan.toString(),
            "--url",
            "http://127.0.0.1:" + llama,
            "--start-cmd",
            rw.llamaCommand(llama, 2),
            "--start-pairs",
            "3",
            "--ready-timeout",
            "60s",
            "--out",
            out.toString());
    JsonNode c = JSON.readTree(out.resolve("campaign.json").toFile());
    assertThat(exit).as("campaign exit code (see " + work + ")").isZero();
    JsonNode starts = c.at("/server_starts");
    assertThat(starts).as("server starts").hasSize(6);
    for (JsonNode s : starts) {
      String what = s.at("/kind").asText() + " start of pair " + s.at("/pair").asInt();
      assertThat(s.at("/error").isNull()).as(what + ": " + s.at("/error")).isTrue();
      double health = s.at("/health_ms").asDouble(Double.NaN);
      double ready = s.at("/ready_ms").asDouble(Double.NaN);
      assertThat(health).as(what + " health_ms").isPositive().isFinite();
      assertThat(ready).as(what + " ready_ms").isFinite().isGreaterThanOrEqualTo(health);
    }
    assertThat(c.at("/invalid_runs")).as("invalid runs").isEmpty();
    assertThat(c.at("/points/0/valid_runs").asInt()).isEqualTo(3);
    // The campaign stopped the server it started.
    Procs.awaitPortFree(llama, Duration.ofSeconds(20));
    long sent = 0;
    long stale = 0;
    for (JsonNode r : c.at("/runs")) {
      JsonNode summary =
          JSON.readTree(out.resolve(r.at("/dir").asText()).resolve("summary.json").toFile());
      sent += summary.at("/requests/sent").asLong();
      stale += summary.at("/requests/stale_connection_retries").asLong();
    }
    JsonNode st = c.at("/server_start_statistics");
    System.out.printf(
        Locale.ROOT,
        "llama-server start (--start-cmd, 3 pairs): cold /health %.0f ms, first completion %.0f"
            + " ms; warm /health %.0f ms, first completion %.0f ms (means); 3 of 3 runs valid;"
            + " the load client, straight to llama-server, resent %d of %d requests on a fresh"
            + " connection (stale keep-alive)%n",
        st.at("/cold_health_ms/mean").asDouble(),
        st.at("/cold_ready_ms/mean").asDouble(),
        st.at("/warm_health_ms/mean").asDouble(),
        st.at("/warm_ready_ms/mean").asDouble(),
        stale,
        sent);
  }

  @Test
  void healthChecksTakeAKilledLlamaServerOutAndBackIn() throws Exception {
    int portA = Procs.freePort();
    int portB = Procs.freePort();
    Process a = startLlama(portA, 2, List.of(), "llama-a");
    Process b = startLlama(portB, 2, List.of(), "llama-b");
    startProxy(
        pool("llama", MODEL, 4, portA, portB) + health("/health", "500ms", "500ms", 1), null);
    awaitAvailable(2);
    assertThat(post("/v1/chat/completions", body("/v1/chat/completions", false, 4), null).status())
        .isEqualTo(200);

    // Two long streams: one on each server (fewest in flight, ties in turn).
    List<InFlight> first = List.of(longStream(), longStream());
    for (InFlight s : first) {
      assertThat(s.firstData.await(30, TimeUnit.SECONDS)).as("long stream started").isTrue();
    }

    // kill -9 A: its stream is cut; requests right after it, before the health check has seen it,
    // may still be sent to A, are refused there and retried on B.
    long killA = System.nanoTime();
    kill(a);
    int retriedOnB = 0;
    for (int i = 0; i < 3; i++) {
      String trace = newTraceId();
      Reply r = post("/v1/chat/completions", body("/v1/chat/completions", false, 4), trace);
      assertThat(r.status()).as("just after A's kill: " + r.body()).isEqualTo(200);
      retriedOnB += awaitRecord(trace).at("/upstream_attempts").asInt() > 1 ? 1 : 0;
    }
    awaitAvailable(1);
    double downA = (System.nanoTime() - killA) / 1e6;
    InFlight cutAtA =
        await()
            .atMost(Duration.ofSeconds(20))
            .until(
                () -> first.stream().filter(s -> s.done.isDone()).findFirst().orElse(null),
                Objects::nonNull);
    assertCut(cutAtA.done.get(), "A's stream");
    for (int i = 0; i < 3; i++) {
      Reply r = post("/v1/chat/completions", body("/v1/chat/completions", true, 4), null);
      assertThat(r.status()).as("with A out: " + r.body()).isEqualTo(200);
      assertThat(r.endsWithDone()).as("with A out: " + r.tail()).isTrue();
    }

    // A second long stream on B, then kill -9 B with both of its streams in flight.
    InFlight second = longStream();
    assertThat(second.firstData.await(30, TimeUnit.SECONDS)).as("long stream started").isTrue();
    List<InFlight> onB = new ArrayList<>(List.of(second));
    first.stream().filter(s -> s != cutAtA && !s.done.isDone()).forEach(onB::add);
    long killB = System.nanoTime();
    kill(b);
    for (InFlight s : onB) {
      assertCut(s.done.get(REQUEST_BOUND.toSeconds(), TimeUnit.SECONDS), "B's stream");
    }
    awaitAvailable(0);
    double downB = (System.nanoTime() - killB) / 1e6;
    for (boolean stream : List.of(false, true)) {
      Reply r = post("/v1/chat/completions", body("/v1/chat/completions", stream, 4), null);
      assertThat(r.status()).as("with both out: " + r.body()).isEqualTo(503);
      assertThat(JSON.readTree(r.body()).at("/error/code").asText())
          .isEqualTo("no_healthy_upstream");
      assertThat(r.headers().firstValue("retry-after")).isPresent();
    }

    // Both back on their ports: in again, 200.
    long restart = System.nanoTime();
    Procs.awaitPortFree(portA, Duration.ofSeconds(20));
    Procs.awaitPortFree(portB, Duration.ofSeconds(20));
    startLlama(portA, 2, List.of(), "llama-a");
    startLlama(portB, 2, List.of(), "llama-b");
    awaitAvailable(2);
    double upAgain = (System.nanoTime() - restart) / 1e6;
    for (String route : List.of("/v1/chat/completions", "/v1/completions")) {
      Reply r = post(route, body(route, true, 4), null);
      assertThat(r.status()).as("after the restart: " + r.body()).isEqualTo(200);
      assertThat(r.endsWithDone()).as("after the restart: " + r.tail()).isTrue();
    }
    System.out.printf(
        Locale.ROOT,
        "llama-server health (2 upstreams, checks every 500 ms): kill -9 A with a stream in"
            + " flight -> cut with an upstream_disconnected event, 3/3 requests right after 200"
            + " (%d retried from A to B), A out after %.0f ms; kill -9 B with %d streams in flight"
            + " -> %d cut with an error event, none hung, out after %.0f ms, then 503"
            + " no_healthy_upstream + Retry-After; both restarted on their ports -> in again after"
            + " %.0f ms (start included), 200%n",
        retriedOnB,
        downA,
        onB.size(),
        onB.size(),
        downB,
        upAgain);
  }

  /** A stream cut by the upstream's death: 200, then an OpenAI-style error event, no [DONE]. */
  private static void assertCut(Reply r, String what) throws IOException {
    assertThat(r.status()).as(what + ": " + r.tail()).isEqualTo(200);
    assertThat(r.endsWithDone()).as(what + " was cut: " + r.tail()).isFalse();
    JsonNode error = r.errorEvent();
    assertThat(error).as(what + " ends with an error event: " + r.tail()).isNotNull();
    assertThat(error.at("/error/code").asText()).as(r.tail()).isEqualTo("upstream_disconnected");
    assertThat(error.at("/error/type").asText()).isNotEmpty();
    assertThat(error.at("/error/message").asText()).isNotEmpty();
  }

  /** A completions stream of 1,800 tokens (ignore_eos): many seconds on this engine. */
  private InFlight longStream() {
    return stream("/v1/completions", body("/v1/completions", true, 1800));
  }

  @Test
  void theResponsesApiOfARealEngineIsMeasuredFromItsFirstDelta() throws Exception {
    int port = Procs.freePort();
    startLlama(port, 2, List.of(), "llama");
    startProxy(pool("llama", MODEL, 2, port), null);
    String body =
        "{\"model\":\""
            + MODEL
            + "\",\"input\":\"Write a story.\",\"max_output_tokens\":24,\"stream\":true}";
    String traceId = newTraceId();
    HttpRequest req =
        HttpRequest.newBuilder(URI.create(proxyUrl() + "/v1/responses"))
            .timeout(REQUEST_BOUND)
            .header("content-type", "application/json")
            .header("traceparent", "00-" + traceId + "-" + traceId.substring(0, 16) + "-01")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
    HttpResponse<String> streamed = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
    assertThat(streamed.statusCode()).as(streamed.body()).isEqualTo(200);
    List<String> events =
        streamed
            .body()
            .lines()
            .filter(l -> l.startsWith("event: "))
            .map(l -> l.substring(7))
            .toList();
    assertThat(events).first().isEqualTo("response.created");
    assertThat(events)
        .contains("response.output_text.delta")
        .last()
        .isEqualTo("response.completed");
    String completed =
        streamed
            .body()
            .lines()
            .filter(l -> l.startsWith("data: ") && l.contains("\"response.completed\""))
            .findFirst()
            .orElseThrow();
    JsonNode usage = JSON.readTree(completed.substring(6)).at("/response/usage");
    JsonNode rec = awaitRecord(traceId);
    assertThat(rec.get("outcome").asText()).isEqualTo("success");
    assertThat(rec.get("operation").asText()).isEqualTo("responses");
    assertThat(rec.get("route").asText()).isEqualTo("/v1/responses");
    assertThat(rec.at("/tokens/input").asLong()).isEqualTo(usage.get("input_tokens").asLong());
    assertThat(rec.at("/tokens/output").asLong()).isEqualTo(usage.get("output_tokens").asLong());
    double ttft = rec.get("server_ttft_ms").asDouble();
    assertThat(ttft).isPositive().isLessThan(rec.get("root_ms").asDouble());

    String wholeTrace = newTraceId();
    Reply whole =
        post(
            "/v1/responses",
            "{\"model\":\"" + MODEL + "\",\"input\":\"Hello\",\"max_output_tokens\":8}",
            wholeTrace);
    assertThat(whole.status()).as(whole.body()).isEqualTo(200);
    JsonNode wholeUsage = JSON.readTree(whole.body()).get("usage");
    JsonNode wholeRecord = awaitRecord(wholeTrace);
    assertThat(wholeRecord.get("outcome").asText()).isEqualTo("success");
    assertThat(wholeRecord.at("/tokens/output").asLong())
        .isEqualTo(wholeUsage.get("output_tokens").asLong());
    System.out.printf(
        Locale.ROOT,
        "llama-server /v1/responses through the proxy: %d events, server TTFT %.2f ms of %.2f ms,"
            + " %d output tokens%n",
        events.size(),
        ttft,
        rec.get("root_ms").asDouble(),
        rec.at("/tokens/output").asLong());
  }

  @Test
  void embeddingsAndTokenizeGoThroughTheProxyToARealEngine() throws Exception {
    int chat = Procs.freePort();
    int embed = Procs.freePort();
    startLlama(chat, 2, List.of(), "llama");
    startLlama(
        embed,
        1,
        List.of("--embeddings", "--pooling", "mean", "--alias", "tiny-llama-embed"),
        "llama-embed");
    startProxy(pool("llama", MODEL, 2, chat) + pool("embed", "tiny-llama-embed", 1, embed), null);
    String embedBody = "{\"model\":\"tiny-llama-embed\",\"input\":\"a test sentence\"}";

    HttpResponse<String> direct =
        HTTP.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + embed + "/v1/embeddings"))
                .timeout(REQUEST_BOUND)
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(embedBody))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(direct.statusCode()).as(direct.body()).isEqualTo(200);
    JsonNode directJson = JSON.readTree(direct.body());
    int dims = directJson.at("/data/0/embedding").size();
    assertThat(dims).isPositive();

    // Through the proxy: routed by model to the embeddings pool, answered whole, measured.
    String traceId = newTraceId();
    Reply viaProxy = post("/v1/embeddings", embedBody, traceId);
    assertThat(viaProxy.status()).as(viaProxy.body()).isEqualTo(200);
    JsonNode proxied = JSON.readTree(viaProxy.body());
    assertThat(proxied.at("/data/0/embedding").size()).isEqualTo(dims);
    JsonNode rec = awaitRecord(traceId);
    assertThat(rec.get("operation").asText()).isEqualTo("embeddings");
    assertThat(rec.get("pool").asText()).isEqualTo("embed");
    assertThat(rec.get("outcome").asText()).isEqualTo("success");
    assertThat(rec.get("server_ttft_ms").isNull()).as("no token timings for pooling").isTrue();
    long promptTokens = proxied.at("/usage/prompt_tokens").asLong(-1);
    assertThat(promptTokens).as("the engine reports usage: " + viaProxy.body()).isPositive();
    assertThat(rec.at("/tokens/input").asLong()).isEqualTo(promptTokens);

    // /tokenize is llama-server's too: passed through (its body names no model: the first pool).
    String tokenizeTrace = newTraceId();
    Reply tokens = post("/tokenize", "{\"content\":\"a test sentence\"}", tokenizeTrace);
    assertThat(tokens.status()).as(tokens.body()).isEqualTo(200);
    assertThat(JSON.readTree(tokens.body()).get("tokens").size()).isPositive();
    JsonNode tokenizeRecord = awaitRecord(tokenizeTrace);
    assertThat(tokenizeRecord.get("route").asText()).isEqualTo("/tokenize");
    assertThat(tokenizeRecord.get("pool").asText()).isEqualTo("llama");
    assertThat(tokenizeRecord.has("operation")).isFalse();
    assertThat(tokenizeRecord.at("/phases_ms/queue").isMissingNode())
        .as("tokenisation takes no slot")
        .isTrue();
    System.out.printf(
        Locale.ROOT,
        "llama-server embeddings through the proxy: %d dimensions, %d prompt tokens counted;"
            + " /tokenize passed through in %.2f ms%n",
        dims,
        promptTokens,
        tokenizeRecord.get("root_ms").asDouble());
  }

  // -------------------------------------------------------------------------------- fixtures

  private Process startLlama(int port, int slots, List<String> extraArgs, String logBase)
      throws Exception {
    Process p = rw.startLlama(port, slots, extraArgs, work, logBase);
    processes.add(p);
    return p;
  }

  /** kill -9, and wait until it is gone. */
  private static void kill(Process p) throws InterruptedException {
    p.destroyForcibly();
    assertThat(p.waitFor(10, TimeUnit.SECONDS)).as("llama-server killed").isTrue();
  }

  private static String pool(String name, String model, int slots, int... upstreamPorts) {
    StringBuilder ups = new StringBuilder();
    for (int port : upstreamPorts) {
      ups.append(ups.isEmpty() ? "" : ", ").append("http://127.0.0.1:").append(port);
    }
    return String.join(
        "\n",
        "  - name: " + name,
        "    models: [" + model + "]",
        "    upstreams: [" + ups + "]",
        "    slots: " + slots,
        "    queue: {max: 1000, timeout: 30s}",
        "");
  }

  private static String health(String path, String interval, String timeout, int failures) {
    return "    health: {path: "
        + path
        + ", interval: "
        + interval
        + ", timeout: "
        + timeout
        + ", failures: "
        + failures
        + "}\n";
  }

  /** Starts the proxy's jar with these pools (and OTLP export when {@code otlp} is set). */
  private Path startProxy(String pools, String otlp) throws Exception {
    proxyPort = Procs.freePort();
    adminPort = Procs.freePort();
    Path config = work.resolve("proxy.yaml");
    Files.writeString(
        config,
        Procs.proxyConfig(
            proxyPort,
            adminPort,
            "pools:",
            pools,
            "telemetry:",
            "  sampling: {ratio: 1.0, keep_errors: true, keep_slower_than: 2s}",
            otlp == null ? "" : "  otlp: {endpoint: \"" + otlp + "\"}",
            ""));
    Process p =
        Procs.start(
            PROXY_JAR, List.of(), List.of("--config", config.toString()), Map.of(), work, "proxy");
    processes.add(p);
    Procs.awaitOk(adminUrl() + "/health/ready", p, Duration.ofSeconds(60));
    return config;
  }

  private String proxyUrl() {
    return "http://127.0.0.1:" + proxyPort;
  }

  private String adminUrl() {
    return "http://127.0.0.1:" + adminPort;
  }

  /** A campaign plan: 64 tokens in, 16 out, at these concurrencies, 3 repeats. */
  private Path plan(String concurrency, String duration, String warmup) throws IOException {
    Path plan = work.resolve("plan.yaml");
    Files.writeString(
        plan,
        String.join(
            "\n",
            "model: " + MODEL,
            "repeats: 3",
            "seed: 20260101",
            "duration: " + duration,
            "warmup_duration: " + warmup,
            "profiles: [64:16]",
            "concurrency: " + concurrency,
            "stream: true",
            "timeout: 60s",
            ""));
    return plan;
  }

  /** {@code phasemeter-load.jar run} with exact lengths against the proxy; its summary.json. */
  private JsonNode loadRun(
      String name, int concurrency, String duration, String input, String output) throws Exception {
    Path out = work.resolve(name);
    int exit =
        runLoadClient(
            name,
            Duration.ofSeconds(90),
            "run",
            "--url",
            proxyUrl(),
            "--admin",
            adminUrl(),
            "--model",
            MODEL,
            "--concurrency",
            Integer.toString(concurrency),
            "--duration",
            duration,
            "--input-tokens",
            input,
            "--output-tokens",
            output,
            "--report-interval",
            "60s",
            "--out",
            out.toString());
    assertThat(exit).as(name + ": load client exit code (see " + work + ")").isZero();
    return JSON.readTree(out.resolve("summary.json").toFile());
  }

  /** Runs the load client's jar to its end (bounded); its exit code. */
  private int runLoadClient(String logBase, Duration bound, String... args) throws Exception {
    Process p = Procs.start(LOAD_JAR, List.of(), List.of(args), Map.of(), work, "load-" + logBase);
    processes.add(p);
    assertThat(p.waitFor(bound.toSeconds(), TimeUnit.SECONDS))
        .as(logBase + ": load client finished within " + bound)
        .isTrue();
    return p.exitValue();
  }

  private static String body(String route, boolean stream, int maxTokens) {
    return body(route, stream, maxTokens, MODEL);
  }

  private static String body(String route, boolean stream, int maxTokens, String model) {
    String input =
        route.equals("/v1/chat/completions")
            ? "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a short story.\"}]"
            : "\"prompt\":\"Once upon a time\"";
    return "{\"model\":\""
        + model
        + "\",\"max_tokens\":"
        + maxTokens
        + ",\"ignore_eos\":true,\"stream\":"
        + stream
        + ","
        + input
        + "}";
  }

  private static String newTraceId() {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    return String.format("%016x%016x", r.nextLong(1, Long.MAX_VALUE), r.nextLong());
  }

  /** What came back: the status, the whole body (a stream's events as they came), the headers. */
  record Reply(int status, String body, HttpHeaders headers) {
    List<String> dataLines() {
      return body.lines()
          .filter(l -> l.startsWith("data:"))
          .map(l -> l.substring(5).trim())
          .toList();
    }

    boolean endsWithDone() {
      List<String> d = dataLines();
      return !d.isEmpty() && d.get(d.size() - 1).equals("[DONE]");
    }

    /** The stream's error event, if one came. */
    JsonNode errorEvent() throws IOException {
      for (String d : dataLines()) {
        if (d.startsWith("{") && d.contains("\"error\"")) {
          JsonNode n = JSON.readTree(d);
          if (n.has("error")) {
            return n;
          }
        }
      }
      return null;
    }

    String tail() {
      return body.length() <= 400 ? body : "…" + body.substring(body.length() - 400);
    }
  }

  /** POSTs to the proxy, bounded; {@code traceId} (or none) as the request's traceparent. */
  private Reply post(String route, String json, String traceId) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(proxyUrl() + route))
            .timeout(REQUEST_BOUND)
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json));
    if (traceId != null) {
      b.header("traceparent", "00-" + traceId + "-" + traceId.substring(0, 16) + "-01");
    }
    CompletableFuture<HttpResponse<String>> f =
        HTTP.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
    try {
      HttpResponse<String> r = f.get(REQUEST_BOUND.toSeconds(), TimeUnit.SECONDS);
      return new Reply(r.statusCode(), r.body(), r.headers());
    } finally {
      f.cancel(true);
    }
  }

  /** A streamed request read on its own thread, so the test can act while it runs. */
  private static final class InFlight {
    final CountDownLatch firstData = new CountDownLatch(1);
    final CompletableFuture<Reply> done = new CompletableFuture<>();
  }

  private InFlight stream(String route, String json) {
    InFlight s = new InFlight();
    HttpRequest req =
        HttpRequest.newBuilder(URI.create(proxyUrl() + route))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build();
    readers.execute(
        () -> {
          StringBuilder body = new StringBuilder();
          try {
            HttpResponse<InputStream> r = HTTP.send(req, HttpResponse.BodyHandlers.ofInputStream());
            try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), UTF_8))) {
              String line;
              while ((line = in.readLine()) != null) {
                body.append(line).append('\n');
                if (line.startsWith("data:")) {
                  s.firstData.countDown();
                }
              }
            }
            s.done.complete(new Reply(r.statusCode(), body.toString(), r.headers()));
          } catch (Exception e) {
            s.done.completeExceptionally(
                new AssertionError("stream failed at the transport: " + e + " after " + body, e));
          } finally {
            s.firstData.countDown();
          }
        });
    return s;
  }

  /** The proxy's record of {@code traceId}, waiting for it to be published (bounded). */
  private JsonNode awaitRecord(String traceId) {
    JsonNode[] rec = new JsonNode[1];
    await()
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(50))
        .untilAsserted(
            () -> {
              HttpResponse<String> r = get(adminUrl() + "/admin/records/" + traceId);
              assertThat(r.statusCode()).as("record " + traceId).isEqualTo(200);
              rec[0] = JSON.readTree(r.body());
            });
    return rec[0];
  }

  /** Waits (bounded) until the pool's {@code llm_upstreams_available} gauge reads {@code n}. */
  private void awaitAvailable(int n) {
    await()
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(50))
        .untilAsserted(
            () ->
                assertThat(metric("llm_upstreams_available"))
                    .as("upstreams available")
                    .isEqualTo(n));
  }

  /** The sum over its series of a metric on the proxy's admin {@code /metrics}. */
  private double metric(String name) throws Exception {
    HttpResponse<String> r = get(adminUrl() + "/metrics");
    assertThat(r.statusCode()).isEqualTo(200);
    double sum = 0;
    boolean seen = false;
    for (String line : r.body().split("\n")) {
      if (line.startsWith(name + "{") || line.startsWith(name + " ")) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        seen = true;
      }
    }
    assertThat(seen).as(name + " on /metrics").isTrue();
    return sum;
  }

  private static HttpResponse<String> get(String url) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** A CSV file with a header row, each row by column name (no quoted fields). */
  private static List<Map<String, String>> csv(Path file) throws IOException {
    List<String> lines = Files.readAllLines(file);
    String[] header = lines.get(0).split(",", -1);
    List<Map<String, String>> rows = new ArrayList<>();
    for (String line : lines.subList(1, lines.size())) {
      String[] cells = line.split(",", -1);
      assertThat(cells).as(file + ": " + line).hasSameSizeAs(header);
      Map<String, String> row = new LinkedHashMap<>();
      for (int i = 0; i < header.length; i++) {
        row.put(header[i], cells[i]);
      }
      rows.add(row);
    }
    return rows;
  }
}
