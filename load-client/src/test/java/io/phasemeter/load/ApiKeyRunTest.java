package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run --api-key-env NAME} and the plan key {@code api_key_env}: the key travels as
 * {@code Authorization: Bearer} on every generation request and nowhere else. Runs go to a small
 * server in this JVM that answers {@code /v1/completions} as vLLM does and refuses a wrong key, and
 * once through the proxy with auth on; the environment is a map handed to the command line.
 */
class ApiKeyRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String VAR = "PHASEMETER_TEST_API_KEY";

  /** A value that cannot turn up by chance: any trace of it in an output is a leak. */
  private final String canary = "sk-canary-" + UUID.randomUUID();

  private Vertx vertx;
  private HttpServer server;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  /** What each request to the server carried: {@code path authorization-or-"none"}. */
  private final List<String> seen = new CopyOnWriteArrayList<>();

  /** The key the server wants; null: it takes any request. */
  private volatile String requiredKey;

  /** Every Nth completion gets a 500 (0: none), so the run prints FAIL lines too. */
  private volatile int failEvery;

  private final AtomicLong completions = new AtomicLong();

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    vertx = Vertx.vertx();
    server =
        vertx
            .createHttpServer()
            .requestHandler(req -> req.body().onSuccess(b -> answer(req, b.toString())))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private void answer(HttpServerRequest req, String body) {
    String auth = req.getHeader("authorization");
    seen.add(req.path() + " " + (auth == null ? "none" : auth));
    if (requiredKey != null && !("Bearer " + requiredKey).equals(auth)) {
      req.response()
          .setStatusCode(401)
          .putHeader("content-type", "application/json")
          .end("{\"error\":{\"message\":\"invalid api key\",\"type\":\"authentication_error\"}}");
      return;
    }
    switch (req.path()) {
      case "/v1/models" ->
          req.response()
              .putHeader("content-type", "application/json")
              .end("{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\"}]}");
      case "/v1/completions" -> completion(req, new JsonObject(body));
      default -> req.response().setStatusCode(404).end();
    }
  }

  /** Streamed exact-length answers: one text event per token, then the usage. */
  private void completion(HttpServerRequest req, JsonObject body) {
    long n = completions.incrementAndGet();
    if (failEvery > 0 && n % failEvery == 0) {
      req.response().setStatusCode(500).end("{\"error\":{\"message\":\"scripted failure\"}}");
      return;
    }
    int prompt = body.getJsonArray("prompt").size();
    int max = body.getInteger("max_tokens");
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < max; i++) {
      s.append("data: {\"choices\":[{\"index\":0,\"text\":\"t")
          .append(i)
          .append("\",\"finish_reason\":null}]}\n\n");
    }
    s.append("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":")
        .append(prompt)
        .append(",\"completion_tokens\":")
        .append(max)
        .append("}}\n\ndata: [DONE]\n\n");
    req.response().putHeader("content-type", "text/event-stream").end(s.toString());
  }

  private int execute(Map<String, String> env, String... args) {
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true), env)
        .execute(RunArgs.quiet(args));
  }

  private int run(Map<String, String> env, String... extra) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + server.actualPort(),
                "--model",
                "m",
                "--concurrency",
                "2",
                "--duration",
                "1s",
                "--input-tokens",
                "32",
                "--output-tokens",
                "3",
                "--out",
                dir.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    return execute(env, args.toArray(String[]::new));
  }

  private JsonNode summary() throws IOException {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  /** Every file under {@code root} and the command's output that holds the canary. */
  private List<String> leaks(Path root) throws IOException {
    List<String> found = new ArrayList<>();
    try (Stream<Path> files = Files.walk(root)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        // Latin-1 reads any bytes; the key is ASCII, so a match is the key's own bytes.
        if (new String(Files.readAllBytes(f), StandardCharsets.ISO_8859_1).contains(canary)) {
          found.add(root.relativize(f).toString());
        }
      }
    }
    if (out.toString().contains(canary)) {
      found.add("stdout");
    }
    if (err.toString().contains(canary)) {
      found.add("stderr");
    }
    return found;
  }

  @Test
  void everyGenerationRequestCarriesTheKeyWarmUpIncluded() throws Exception {
    requiredKey = canary;
    int code =
        run(
            Map.of(VAR, canary),
            "--api-key-env",
            VAR,
            "--warmup",
            "2",
            "--warmup-target",
            "server");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    long sent = s.path("requests").path("sent").asLong();
    assertThat(sent).isPositive();
    assertThat(s.path("requests").path("errors").asLong()).isZero();
    assertThat(seen).hasSize((int) sent + 2).containsOnly("/v1/completions Bearer " + canary);
    assertThat(s.path("conditions").path("api_key_env").asText()).isEqualTo(VAR);
  }

  @Test
  void theKeyIsInNoOutputFileNorOnStdoutOrStderr() throws Exception {
    // Failed requests too, so the FAIL lines and the report's error paths are written.
    requiredKey = canary;
    failEvery = 3;
    // A third failing is the point here: the limit is raised so the run still holds.
    int code =
        run(Map.of(VAR, canary), "--api-key-env", VAR, "--warmup", "1", "--max-error-rate", "50%");
    assertThat(code).as(out + "\n" + err).isZero();
    assertThat(summary().path("requests").path("errors").asLong()).isPositive();
    try (Stream<Path> files = Files.list(dir)) {
      assertThat(files.map(p -> p.getFileName().toString()))
          .contains("summary.json", "pairs.csv", "phases.hlog", "report.html");
    }
    assertThat(Files.readString(dir.resolve("report.html"))).contains(VAR);
    assertThat(leaks(dir)).isEmpty();
  }

  @Test
  void anUnsetOrEmptyVariableIsOneLineAndExit2BeforeAnyRequest() {
    assertThat(run(Map.of(), "--api-key-env", VAR)).isEqualTo(2);
    assertThat(err.toString())
        .isEqualTo(
            "phasemeter load: --api-key-env: environment variable "
                + VAR
                + " is not set"
                + System.lineSeparator());
    err.getBuffer().setLength(0);
    assertThat(run(Map.of(VAR, ""), "--api-key-env", VAR)).isEqualTo(2);
    assertThat(err.toString())
        .isEqualTo(
            "phasemeter load: --api-key-env: environment variable "
                + VAR
                + " is empty"
                + System.lineSeparator());
    assertThat(seen).isEmpty();
    assertThat(out.toString()).isEmpty();
    assertThat(dir.resolve("summary.json")).doesNotExist();
  }

  @Test
  void aKeyGivenWhereItsVariableBelongsIsRefusedWithoutEchoingIt() {
    assertThat(run(Map.of(VAR, canary), "--api-key-env", canary)).isEqualTo(2);
    assertThat(err.toString())
        .startsWith("phasemeter load: --api-key-env takes the name of an environment variable")
        .doesNotContain(canary);
    err.getBuffer().setLength(0);
    assertThat(run(Map.of(VAR, canary + "\n"), "--api-key-env", VAR)).isEqualTo(2);
    assertThat(err.toString()).contains("a newline").doesNotContain(canary);
    assertThat(seen).isEmpty();
  }

  @Test
  void withoutTheFlagNothingCarriesAnAuthorization() throws Exception {
    int code = run(Map.of(VAR, canary));
    assertThat(code).as(out + "\n" + err).isZero();
    assertThat(seen).isNotEmpty().allMatch(r -> r.endsWith(" none"));
    assertThat(summary().path("conditions").has("api_key_env")).isFalse();
  }

  @Test
  void aCampaignSendsThePlansKeyOnEveryRequestAndRecordsOnlyItsName() throws Exception {
    requiredKey = canary;
    Path plan = dir.resolve("plan.yaml");
    Files.writeString(
        plan,
        "model: m\nrepeats: 3\nduration: 300ms\nwarmup_duration: 200ms\nprofiles: [32:3]\n"
            + "concurrency: [1]\napi_key_env: "
            + VAR
            + "\n");
    Path outDir = dir.resolve("campaign");
    String[] args = {
      "campaign",
      "--plan",
      plan.toString(),
      "--url",
      "http://127.0.0.1:" + server.actualPort(),
      "--out",
      outDir.toString()
    };
    assertThat(execute(Map.of(VAR, canary), args)).as(out + "\n" + err).isZero();
    assertThat(seen)
        .contains("/v1/models Bearer " + canary)
        .allMatch(r -> r.endsWith(" Bearer " + canary));
    assertThat(seen.stream().filter(r -> r.startsWith("/v1/completions"))).hasSizeGreaterThan(4);
    JsonNode c = JSON.readTree(outDir.resolve("campaign.json").toFile());
    assertThat(c.path("plan").path("api_key_env").asText()).isEqualTo(VAR);
    assertThat(c.path("conditions").path("upstream_models").path("status").asInt()).isEqualTo(200);
    assertThat(c.path("invalid_runs")).isEmpty();
    try (Stream<Path> runs = Files.list(outDir.resolve("runs"))) {
      for (Path r : runs.toList()) {
        JsonNode s = JSON.readTree(r.resolve("summary.json").toFile());
        assertThat(s.path("conditions").path("api_key_env").asText())
            .as(r.toString())
            .isEqualTo(VAR);
      }
    }
    assertThat(leaks(outDir)).isEmpty();

    // The same plan without the variable: one line naming the plan's key, exit 2, nothing sent.
    seen.clear();
    out.getBuffer().setLength(0);
    err.getBuffer().setLength(0);
    assertThat(execute(Map.of(), args)).isEqualTo(2);
    assertThat(err.toString())
        .isEqualTo(
            "phasemeter load campaign: "
                + plan
                + ": key 'api_key_env': environment variable "
                + VAR
                + " is not set"
                + System.lineSeparator());
    assertThat(seen).isEmpty();
  }

  @Test
  void aProxyWithAuthOnIsLoadedAndJoinedWithTheAdminTokenNotTheKey() throws Exception {
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(8)
                    .withDecodeStepMs(2)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000))
            .await(10, TimeUnit.SECONDS);
    Path keys = dir.resolve("keys.yaml");
    String hash =
        HexFormat.of()
            .formatHex(
                MessageDigest.getInstance("SHA-256")
                    .digest(canary.getBytes(StandardCharsets.UTF_8)));
    Files.writeString(keys, "keys:\n  - {name: load, sha256: \"" + hash + "\"}\n...\n");
    PhasemeterProxy proxy =
        PhasemeterProxy.builder(
                vertx,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\n"
                        + "admin: {host: 127.0.0.1, port: 0, token: admin-secret}\n"
                        + "auth: {enabled: true, keys_file: "
                        + keys
                        + "}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n"
                        + "    upstreams: [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: 8\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
    Path runDir = dir.resolve("proxied");
    int code =
        execute(
            Map.of(VAR, canary),
            "run",
            "--url",
            "http://127.0.0.1:" + proxy.port(),
            "--admin",
            "http://127.0.0.1:" + proxy.adminPort(),
            "--admin-token",
            "admin-secret",
            "--api-key-env",
            VAR,
            "--model",
            "sim-llama",
            "--concurrency",
            "2",
            "--duration",
            "1s",
            "--input-tokens",
            "32",
            "--output-tokens",
            "4",
            "--out",
            runDir.toString(),
            "--report-interval",
            "1s");
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = JSON.readTree(runDir.resolve("summary.json").toFile());
    assertThat(s.path("requests").path("errors").asLong()).isZero();
    assertThat(s.path("requests").path("ok").asLong()).isPositive();
    assertThat(s.path("join_coverage").asDouble()).isEqualTo(1.0);
    assertThat(leaks(runDir)).isEmpty();
  }
}
