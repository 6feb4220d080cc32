package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.load.schedule.Series;
import io.phasemeter.load.schedule.Sessions;
import io.phasemeter.load.schedule.StepInfo;
import io.phasemeter.load.schedule.StepRunner;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.TraceIds;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.RequestOptions;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Multi-turn sessions end to end: {@code load run --sessions} through the proxy (with --admin: the
 * join) to the simulator, with a relay between the two that records what reaches the simulator (the
 * session header, the bodies) and fails a chosen turn on purpose. The simulator decodes 5 ms per
 * token with an instant prefill, and reports exact usage for token-id prompts.
 */
class SessionsRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static Vertx servers;
  private static Simulator sim;
  private static Relay relay;
  private static PhasemeterProxy proxy;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  /**
   * Forwards every request to the simulator as it came, the response back as it streams, and
   * records the session header and body of each POST; the {@code failTurn}-th request of the
   * session whose id ends with {@code failSession} goes with {@code x-sim-fault: error} (a 500).
   */
  static final class Relay {
    /** One request that reached the simulator. */
    record Seen(String session, JsonNode body) {}

    final List<Seen> seen = new CopyOnWriteArrayList<>();
    final Map<String, AtomicInteger> perSession = new ConcurrentHashMap<>();
    volatile String failSession;
    volatile int failTurn;
    HttpServer server;

    void start(Vertx vertx, int simPort) throws Exception {
      HttpClient client = vertx.createHttpClient();
      server =
          vertx
              .createHttpServer()
              .requestHandler(
                  req ->
                      req.body()
                          .onSuccess(
                              body -> {
                                String session = req.getHeader(Workload.SESSION_HEADER);
                                JsonNode json;
                                try {
                                  json = JSON.readTree(body.getBytes());
                                } catch (Exception e) {
                                  json = null;
                                }
                                if (req.method() == HttpMethod.POST) {
                                  // Not the proxy's own scrapes of the engine's metrics.
                                  seen.add(new Seen(session, json));
                                }
                                int nth =
                                    session == null
                                        ? 0
                                        : perSession
                                            .computeIfAbsent(session, k -> new AtomicInteger())
                                            .incrementAndGet();
                                RequestOptions ro =
                                    new RequestOptions()
                                        .setMethod(req.method())
                                        .setHost("127.0.0.1")
                                        .setPort(simPort)
                                        .setURI(req.uri());
                                req.headers()
                                    .forEach(
                                        (k, v) -> {
                                          if (!k.equalsIgnoreCase("host")
                                              && !k.equalsIgnoreCase("content-length")
                                              && !k.equalsIgnoreCase("transfer-encoding")
                                              && !k.equalsIgnoreCase("connection")) {
                                            ro.putHeader(k, v);
                                          }
                                        });
                                String fail = failSession;
                                if (fail != null
                                    && session != null
                                    && session.endsWith(fail)
                                    && nth == failTurn) {
                                  ro.putHeader("x-sim-fault", "error");
                                }
                                relay(client, ro, body, req.response());
                              }))
              .listen(0, "127.0.0.1")
              .await(10, TimeUnit.SECONDS);
    }

    private static void relay(
        HttpClient client, RequestOptions ro, Buffer body, HttpServerResponse to) {
      client
          .request(ro)
          .compose(r -> r.send(body))
          .onSuccess(
              resp -> {
                to.setStatusCode(resp.statusCode());
                resp.headers()
                    .forEach(
                        (k, v) -> {
                          if (!k.equalsIgnoreCase("transfer-encoding")
                              && !k.equalsIgnoreCase("connection")) {
                            to.putHeader(k, v);
                          }
                        });
                if (resp.getHeader("content-length") == null) {
                  to.setChunked(true);
                }
                resp.pipeTo(to);
              })
          .onFailure(e -> to.setStatusCode(502).end());
    }

    int port() {
      return server.actualPort();
    }
  }

  @BeforeAll
  static void startServers() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(16)
                    .withDecodeStepMs(5)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000)
                    .withSeed(3))
            .await(10, TimeUnit.SECONDS);
    relay = new Relay();
    relay.start(servers, sim.port());
    proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n    upstreams:"
                        + " [http://127.0.0.1:"
                        + relay.port()
                        + "]\n    slots: 16\n",
                    "sessions.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stopServers() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  @BeforeEach
  void clearRelay() {
    relay.seen.clear();
    relay.perSession.clear();
    relay.failSession = null;
  }

  private int run(String... args) {
    List<String> all =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + proxy.port(),
                "--admin",
                "http://127.0.0.1:" + proxy.adminPort(),
                "--model",
                "sim-llama",
                "--report-interval",
                "1s",
                "--join-grace",
                "1s",
                "--out",
                dir.toString()));
    all.addAll(List.of(args));
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(all));
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  private List<List<String>> rows() throws Exception {
    List<List<String>> rows = new ArrayList<>();
    for (String line : Files.readAllLines(dir.resolve("pairs.csv"))) {
      rows.add(RunMerge.splitCsv(line));
    }
    return rows;
  }

  @Test
  void completionsSessionsSendEveryTurnWithTheHistoryAsAnExactPrefix() throws Exception {
    int code =
        run(
            "--sessions",
            "3",
            "--turns",
            "4",
            "--think-time",
            "100ms",
            "--input-tokens",
            "32",
            "--output-tokens",
            "4");
    assertThat(code).as(out + "\n" + err).isZero();

    JsonNode s = summary();
    assertThat(s.get("requests").get("sent").asLong()).isEqualTo(12);
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(12);
    assertThat(s.get("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(s.get("sessions").get("started").asLong()).isEqualTo(3);
    assertThat(s.get("sessions").get("completed").asLong()).isEqualTo(3);
    assertThat(s.get("sessions").get("cut").asLong()).isZero();
    assertThat(s.get("sessions").get("at_max_tokens").asLong()).isZero();
    assertThat(s.get("sessions").get("turns_not_sent").asLong()).isZero();
    JsonNode turns = s.get("turns");
    assertThat(turns.size()).isEqualTo(4);
    for (int k = 0; k < 4; k++) {
      JsonNode t = turns.get(k);
      assertThat(t.get("turn").asInt()).isEqualTo(k + 1);
      assertThat(t.get("finished").asLong()).isEqualTo(3);
      assertThat(t.get("ok").asLong()).isEqualTo(3);
      assertThat(t.get("client_ttft_ms").get("count").asLong()).isEqualTo(3);
      assertThat(t.get("client_ttft_ms").get("p50").asDouble()).isPositive();
      // Exact lengths: 32, then + 4 answered + 32 new at every turn.
      assertThat(t.get("prompt_tokens_mean").asDouble()).isEqualTo(32 + 36.0 * k);
    }
    JsonNode c = s.get("conditions");
    assertThat(c.get("arrival").asText()).isEqualTo("sessions: 3 × 4 turns, think 0.1 s");
    assertThat(c.get("sessions").asInt()).isEqualTo(3);
    assertThat(c.get("turns").asInt()).isEqualTo(4);
    assertThat(c.get("think_time_s").asDouble()).isEqualTo(0.1);
    assertThat(c.get("session_max_tokens").asInt()).isEqualTo(32_768);

    // What reached the simulator: every request with its session's header, each session's
    // prompts growing with the previous one as their prefix.
    assertThat(relay.seen).hasSize(12).allMatch(r -> r.session() != null);
    Map<String, List<Relay.Seen>> bySession =
        relay.seen.stream().collect(Collectors.groupingBy(Relay.Seen::session));
    assertThat(bySession).hasSize(3);
    String prefix = c.get("trace_id_prefix").asText();
    assertThat(bySession.keySet())
        .containsExactlyInAnyOrder(prefix + "-s1", prefix + "-s2", prefix + "-s3");
    for (List<Relay.Seen> session : bySession.values()) {
      assertThat(session).hasSize(4);
      List<Relay.Seen> byLength =
          session.stream()
              .sorted(Comparator.comparingInt(r -> r.body().get("prompt").size()))
              .toList();
      for (int k = 1; k < 4; k++) {
        JsonNode before = byLength.get(k - 1).body().get("prompt");
        JsonNode now = byLength.get(k).body().get("prompt");
        assertThat(now.size()).isEqualTo(before.size() + 36);
        for (int i = 0; i < before.size(); i++) {
          assertThat(now.get(i).asInt()).isEqualTo(before.get(i).asInt());
        }
      }
    }

    // pairs.csv: the session and the turn, side by side (before the connection's dns, connect,
    // tls).
    List<List<String>> rows = rows();
    List<String> h = rows.get(0);
    int session = h.indexOf("session");
    int turn = h.indexOf("turn");
    assertThat(session).isPositive();
    assertThat(turn).isEqualTo(session + 1);
    Map<String, List<String>> turnsOf =
        rows.subList(1, rows.size()).stream()
            .collect(
                Collectors.groupingBy(
                    r -> r.get(session),
                    Collectors.mapping(r -> r.get(turn), Collectors.toList())));
    assertThat(turnsOf.keySet()).isEqualTo(bySession.keySet());
    turnsOf.values().forEach(t -> assertThat(t).containsExactlyInAnyOrder("1", "2", "3", "4"));

    // The final table's lines per turn, and the report's Turns table.
    assertThat(out.toString()).contains("  turn 4 ").contains("sessions: 3 started, 3 completed");
    assertThat(Files.readString(dir.resolve("report.html"))).contains("<h2>Turns</h2>");
  }

  @Test
  void chatSessionsSendTheAnswersBackAndTheirPromptsGrow() throws Exception {
    int code = run("--sessions", "2", "--turns", "3", "--api", "chat", "--output-tokens", "16");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(6);
    JsonNode turns = s.get("turns");
    assertThat(turns.size()).isEqualTo(3);
    // The simulator's reported prompt_tokens grow turn by turn.
    for (int k = 1; k < 3; k++) {
      assertThat(turns.get(k).get("prompt_tokens_mean").asDouble())
          .isGreaterThan(turns.get(k - 1).get("prompt_tokens_mean").asDouble());
    }
    assertThat(s.get("conditions").get("session_max_tokens").isNull()).isTrue();
    assertThat(s.get("sessions").get("answers_truncated").asLong()).isZero();

    Map<String, List<Relay.Seen>> bySession =
        relay.seen.stream().collect(Collectors.groupingBy(Relay.Seen::session));
    assertThat(bySession).hasSize(2);
    List<String> answers = new ArrayList<>();
    for (List<Relay.Seen> session : bySession.values()) {
      List<JsonNode> messages =
          session.stream()
              .map(r -> r.body().get("messages"))
              .sorted(Comparator.comparingInt(JsonNode::size))
              .toList();
      assertThat(messages).extracting(JsonNode::size).containsExactly(1, 3, 5);
      // Each turn's messages begin with the previous turn's, then its answer, as received.
      for (int k = 1; k < 3; k++) {
        JsonNode before = messages.get(k - 1);
        JsonNode now = messages.get(k);
        for (int i = 0; i < before.size(); i++) {
          assertThat(now.get(i)).isEqualTo(before.get(i));
        }
        JsonNode answer = now.get(before.size());
        assertThat(answer.get("role").asText()).isEqualTo("assistant");
        assertThat(answer.get("content").asText()).isNotBlank();
        answers.add(answer.get("content").asText());
      }
    }
    // The answers' text stays out of the outputs.
    String written =
        Files.readString(dir.resolve("summary.json"))
            + Files.readString(dir.resolve("pairs.csv"))
            + Files.readString(dir.resolve("report.html"))
            + out;
    // Only answers long enough to be found by chance nowhere else: a one-word answer ("network")
    // is in any report.
    List<String> telling = answers.stream().filter(a -> a.length() >= 24).toList();
    assertThat(telling).isNotEmpty();
    for (String a : telling) {
      assertThat(written).doesNotContain(a);
    }
  }

  @Test
  void aFailedTurnCutsItsSessionAndIsCounted() throws Exception {
    relay.failSession = "-s2";
    relay.failTurn = 2;
    int code =
        run(
            "--sessions",
            "3",
            "--turns",
            "4",
            "--input-tokens",
            "16",
            "--output-tokens",
            "2",
            "--max-error-rate",
            "100%");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.get("requests").get("sent").asLong()).isEqualTo(10);
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(9);
    JsonNode sessions = s.get("sessions");
    assertThat(sessions.get("started").asLong()).isEqualTo(3);
    assertThat(sessions.get("completed").asLong()).isEqualTo(2);
    assertThat(sessions.get("cut").asLong()).isEqualTo(1);
    assertThat(sessions.get("turns_not_sent").asLong()).isEqualTo(2);
    JsonNode turns = s.get("turns");
    assertThat(turns.get(1).get("finished").asLong()).isEqualTo(3);
    assertThat(turns.get(1).get("ok").asLong()).isEqualTo(2);
    assertThat(turns.get(2).get("finished").asLong()).isEqualTo(2);
    assertThat(turns.get(3).get("finished").asLong()).isEqualTo(2);
    String cut = s.get("conditions").get("trace_id_prefix").asText() + "-s2";
    assertThat(relay.perSession.get(cut).get()).isEqualTo(2);
  }

  @Test
  void eachTurnLeavesTheThinkTimeAfterThePreviousAnswersLastByte() throws Exception {
    // The runner itself, without the proxy, so that each turn's client clock is at hand.
    List<ClientResult> results = new CopyOnWriteArrayList<>();
    Conversation.Shape shape =
        new Conversation.Shape(
            "sim-llama",
            Api.COMPLETIONS,
            Mix.parse("24:3=1"),
            0,
            true,
            5,
            Map.of(),
            new SessionSpec(3, 4, Duration.ofMillis(100), SessionSpec.DEFAULT_MAX_TOKENS),
            PromptSalt.NONE);
    Vertx vertx = Vertx.vertx();
    StepInfo step;
    try (StepRunner runner =
        new StepRunner(
            vertx,
            URI.create("http://127.0.0.1:" + relay.port()),
            16,
            Duration.ofSeconds(10),
            true,
            1)) {
      Series series =
          Series.measured(
              TraceIds.random(),
              new AtomicLong(),
              Workload.completions("sim-llama", Mix.parse("24:3=1"), true, 5),
              gap -> {},
              results::add);
      step =
          runner.sessions(series, new Sessions(shape, "clock", null)).await(10, TimeUnit.SECONDS);
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
    assertThat(step.sent()).isEqualTo(12);
    assertThat(results).hasSize(12).allMatch(ClientResult::ok);
    Map<String, List<ClientResult>> bySession =
        results.stream().collect(Collectors.groupingBy(ClientResult::session));
    assertThat(bySession).hasSize(3);
    for (List<ClientResult> session : bySession.values()) {
      List<ClientResult> turns =
          session.stream().sorted(Comparator.comparingInt(ClientResult::turn)).toList();
      assertThat(turns).extracting(ClientResult::turn).containsExactly(1, 2, 3, 4);
      for (int k = 1; k < 4; k++) {
        long end = turns.get(k - 1).endNanos();
        ClientResult next = turns.get(k);
        assertThat(next.intendedNanos()).isEqualTo(end + 100_000_000L);
        assertThat(next.actualNanos()).isGreaterThanOrEqualTo(end + 100_000_000L);
      }
    }
  }
}
