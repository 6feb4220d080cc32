package io.phasemeter.accuracy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Injected-truth accuracy: the simulator, the proxy and the load client run as three separate JVM
 * processes; a {@link DelayRelay} in this JVM delays the bytes between the load client and the
 * proxy's public port. Each factor (one-way delay, prefill, decode step, proxy queue wait) is
 * varied on its own across three levels; the client's paired report must recover each truth within
 * a stated tolerance, and the phases a factor does not own must stay at their baseline. A run with
 * the proxy and the client in different time zones must give the baseline's results. The suite
 * writes docs/accuracy.md, then asserts.
 */
class AccuracySuiteTest {
  static final String MODEL = "sim-llama";
  static final int PROMPT_TOKENS = 1000;
  static final int OUTPUT_TOKENS = 11;
  static final int BASE_DELAY_MS = 0;
  static final int BASE_PREFILL_MS = 100;
  static final int BASE_STEP_MS = 10;
  static final int BASE_CONCURRENCY = 1;
  static final int TARGET_REQUESTS = 24;

  // Tolerances (ms and fractions), justified in docs/accuracy.md from the measured spread.
  /** Same-host overhead above an injected server time: proxy + simulator code and late timers. */
  static final double SERVER_SLACK_MS = 15;

  static final double SERVER_SLACK_FRACTION = 0.05;

  /** Above 2d + the d=0 base for the envelopes: late relay timers on a loaded machine. */
  static final double ENVELOPE_SLACK_MS = 6;

  static final double MIN_ENVELOPE_BASE_MS = 9;

  static final double ENVELOPE_SLACK_FRACTION = 0.10;

  /** A phase a factor does not own may move this much from its baseline p50. */
  static final double UNCHANGED_MS = 8;

  static final double UNCHANGED_FRACTION = 0.05;

  /** The queue's lower bound: the re-arriving client's own round trip is not waited for. */
  static final double QUEUE_EARLY_MS = 5;

  static final Path ROOT =
      Path.of(System.getProperty("phasemeter.root", "..")).toAbsolutePath().normalize();
  static final Path SIM_JAR = ROOT.resolve("simulator/target/phasemeter-sim.jar");
  static final Path PROXY_JAR = ROOT.resolve("proxy/target/phasemeter-proxy.jar");
  static final Path LOAD_JAR = ROOT.resolve("load-client/target/phasemeter-load.jar");

  record Level(
      String name,
      String factor,
      String injected,
      int delayMs,
      int prefillMs,
      int stepMs,
      int concurrency,
      boolean skewedZones) {
    double generationTruth() {
      return prefillMs + (OUTPUT_TOKENS - 1) * (double) stepMs;
    }

    double queueTruth() {
      return (concurrency - 1) * generationTruth();
    }

    double serviceMs() {
      return generationTruth() + 2 * delayMs;
    }
  }

  record Check(
      String level,
      String phase,
      String expectation,
      double expected,
      double lo,
      double hi,
      double p50,
      double p95,
      long count) {
    boolean pass() {
      return p50 >= lo && p50 <= hi;
    }
  }

  private final ObjectMapper json = new ObjectMapper();
  private final List<Check> checks = new ArrayList<>();
  private final List<String> notes = new ArrayList<>();
  private Path work;
  private Process sim;
  private Process proxy;
  private int simPort;
  private int proxyPort;
  private int adminPort;
  private String simArgsNow = "";
  private JsonNode samplingBias;

  @Test
  void theClientsPairedReportRecoversEveryInjectedTruth() throws Exception {
    assertThat(SIM_JAR).as("build the modules first (mvn install)").exists();
    assertThat(PROXY_JAR).exists();
    assertThat(LOAD_JAR).exists();
    work = ROOT.resolve("accuracy/target/accuracy");
    deleteTree(work);
    Files.createDirectories(work);
    long started = System.nanoTime();

    List<Level> levels = new ArrayList<>();
    Level base = level("baseline", "baseline", "d=0, prefill=100, step=10, c=1", 0, 100, 10, 1);
    levels.add(base);
    levels.add(level("delay-10", "network", "d=10 ms", 10, 100, 10, 1));
    levels.add(level("delay-25", "network", "d=25 ms", 25, 100, 10, 1));
    levels.add(level("queue-c2", "queue", "slots=1, c=2", 0, 100, 10, 2));
    levels.add(level("queue-c3", "queue", "slots=1, c=3", 0, 100, 10, 3));
    levels.add(level("prefill-50", "prefill", "prefill=50 ms", 0, 50, 10, 1));
    levels.add(level("prefill-200", "prefill", "prefill=200 ms", 0, 200, 10, 1));
    levels.add(level("step-5", "decode", "step=5 ms", 0, 100, 5, 1));
    levels.add(level("step-20", "decode", "step=20 ms", 0, 100, 20, 1));
    Level clock =
        new Level(
            "clock-zones",
            "clock",
            "proxy TZ=Pacific/Kiritimati (UTC+14) and span clock +5 h, client TZ=Pacific/Pago_Pago (UTC-11)",
            0,
            100,
            10,
            1,
            true);
    levels.add(clock);

    Map<String, JsonNode> summaries = new LinkedHashMap<>();
    Vertx vertx = Vertx.vertx();
    DelayRelay relay = null;
    try {
      simPort = Procs.freePort();
      proxyPort = Procs.freePort();
      adminPort = Procs.freePort();
      startSim(base);
      startProxy(false);
      relay = DelayRelay.start(vertx, "127.0.0.1", proxyPort, 0);
      // A run that is not judged: the proxy's and the simulator's JIT warm up once.
      runLoad(relay, base, "jit-warmup", 10);
      for (Level l : levels) {
        boolean restarted = false;
        if (!simArgs(l).equals(simArgsNow)) {
          startSim(l);
          restarted = true;
        }
        if (l.skewedZones()) {
          startProxy(true);
          restarted = true;
        }
        summaries.put(l.name(), runLoad(relay, l, l.name(), restarted ? 10 : 3));
      }
      samplingBias = samplingBiasRun(relay);
    } finally {
      if (relay != null) {
        relay.close();
      }
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
      Procs.stop(proxy);
      Procs.stop(sim);
    }

    JsonNode b = summaries.get("baseline");
    for (Level l : levels) {
      judge(l, summaries.get(l.name()), b);
    }
    double seconds = (System.nanoTime() - started) / 1e9;
    Files.createDirectories(ROOT.resolve("docs"));
    Files.writeString(ROOT.resolve("docs/accuracy.md"), report(levels, summaries, seconds));

    // Sampling bias: only traces slower than 250 ms are exported, half the requests are (about
    // 400 ms) and half are not (about 120 ms); joined against exported traces only, the report
    // must cover about half, say its envelope describes the tail, and its generation must be
    // the long one.
    double coverage = samplingBias.at("/join_coverage").asDouble();
    assertThat(coverage).as("sampled-only join coverage").isBetween(0.3, 0.7);
    assertThat(samplingBias.at("/conditions/join_basis").asText()).contains("describe the tail");
    assertThat(p50(samplingBias, "generation")).as("joined generation p50").isGreaterThan(300.0);

    List<Check> failed = checks.stream().filter(c -> !c.pass()).toList();
    assertThat(failed).as("checks outside tolerance (see docs/accuracy.md)").isEmpty();
    for (Level l : levels) {
      JsonNode s = summaries.get(l.name());
      assertThat(s.at("/requests/errors").asLong()).as(l.name() + " errors").isZero();
      assertThat(s.at("/join_coverage").asDouble()).as(l.name() + " join coverage").isEqualTo(1.0);
      assertThat(s.at("/phases/network_envelope/count").asLong())
          .as(l.name() + " joined requests")
          .isGreaterThanOrEqualTo(20);
      if (l.delayMs() > 0) {
        // With d > 0 every envelope is at least 2d: a negative one would be a real error.
        assertThat(s.at("/phases/network_envelope/negative").asLong())
            .as(l.name() + " negative envelopes")
            .isZero();
      } else {
        // At d = 0 the root ends when the proxy's end() completes, which can run after the
        // client has already read the last byte (seen once in 240 requests: -0.69 ms with a
        // 3.4 ms write phase). Such an envelope is shown, not clipped; it must stay within
        // the request's own write phase + 1 ms.
        for (String[] row : negativeEnvelopes(l.name())) {
          assertThat(Double.parseDouble(row[0]))
              .as(l.name() + " negative envelope vs its write phase (ms)")
              .isGreaterThanOrEqualTo(-(Double.parseDouble(row[1]) + 1));
        }
      }
    }
  }

  /** {network_envelope_ms, write_ms} of each request of a run whose envelope is negative. */
  private List<String[]> negativeEnvelopes(String run) throws Exception {
    List<String> lines = Files.readAllLines(work.resolve("runs").resolve(run).resolve("pairs.csv"));
    List<String> head = List.of(lines.get(0).split(",", -1));
    int env = head.indexOf("network_envelope_ms");
    int write = head.indexOf("write_ms");
    List<String[]> out = new ArrayList<>();
    for (String line : lines.subList(1, lines.size())) {
      String[] f = line.split(",", -1);
      if (f.length > Math.max(env, write) && !f[env].isEmpty() && Double.parseDouble(f[env]) < 0) {
        out.add(new String[] {f[env], f[write]});
      }
    }
    return out;
  }

  private static Level level(
      String name, String factor, String injected, int d, int prefill, int step, int c) {
    return new Level(name, factor, injected, d, prefill, step, c, false);
  }

  // ---------------------------------------------------------------- processes

  private static String simArgs(Level l) {
    double rate = PROMPT_TOKENS * 1000.0 / l.prefillMs();
    return String.format(
        Locale.ROOT,
        "--prefill-tokens-per-s %s --decode-step-ms %d",
        Double.toString(rate),
        l.stepMs());
  }

  private void startSim(Level l) throws Exception {
    if (sim != null) {
      Procs.stop(sim);
      Procs.awaitPortFree(simPort, Duration.ofSeconds(20));
    }
    double rate = PROMPT_TOKENS * 1000.0 / l.prefillMs();
    sim =
        Procs.start(
            SIM_JAR,
            List.of(),
            List.of(
                "--host",
                "127.0.0.1",
                "--port",
                Integer.toString(simPort),
                "--model",
                MODEL,
                "--slots",
                "8",
                "--decode-step-ms",
                Integer.toString(l.stepMs()),
                "--decode-step-growth",
                "0",
                "--prefill-tokens-per-s",
                Double.toString(rate),
                // The injected prefill is every request's: the runs send the same seed's prompts
                // again, which the prefix cache would serve.
                "--prefix-cache-blocks",
                "0"),
            Map.of(),
            work,
            "simulator");
    Procs.awaitOk("http://127.0.0.1:" + simPort + "/health", sim, Duration.ofSeconds(60));
    simArgsNow = simArgs(l);
  }

  private void startProxy(boolean skewedZone) throws Exception {
    startProxy(skewedZone, "{ratio: 1.0, keep_errors: true, keep_slower_than: 2s}");
  }

  private void startProxy(boolean skewedZone, String sampling) throws Exception {
    if (proxy != null) {
      Procs.stop(proxy);
      Procs.awaitPortFree(proxyPort, Duration.ofSeconds(20));
      Procs.awaitPortFree(adminPort, Duration.ofSeconds(20));
    }
    Path config = work.resolve("proxy.yaml");
    Files.writeString(
        config,
        Procs.proxyConfig(
            proxyPort,
            adminPort,
            "pools:",
            "  - name: default",
            "    models: [" + MODEL + "]",
            "    upstreams: [http://127.0.0.1:" + simPort + "]",
            "    slots: 1",
            "    queue: {max: 1000, timeout: 30s}",
            "telemetry:",
            "  sampling: " + sampling,
            ""));
    // The skew shifts every wall-clock timestamp the proxy stamps (its spans) by five hours.
    List<String> jvm =
        skewedZone
            ? List.of("-Duser.timezone=Pacific/Kiritimati", "-Dphasemeter.clock.skew-ms=18000000")
            : List.<String>of();
    Map<String, String> env =
        skewedZone ? Map.of("TZ", "Pacific/Kiritimati") : Map.<String, String>of();
    proxy = Procs.start(PROXY_JAR, jvm, List.of("--config", config.toString()), env, work, "proxy");
    Procs.awaitOk("http://127.0.0.1:" + adminPort + "/health/ready", proxy, Duration.ofSeconds(60));
  }

  /** The proxy exports only slow traces; the client joins only those. */
  private JsonNode samplingBiasRun(DelayRelay relay) throws Exception {
    startProxy(false, "{ratio: 0.0, keep_errors: true, keep_slower_than: 250ms}");
    relay.setDelayMs(0);
    Path out = work.resolve("runs").resolve("sampling-bias");
    Files.createDirectories(out);
    Process p =
        Procs.start(
            LOAD_JAR,
            List.of(),
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + relay.port(),
                "--admin",
                "http://127.0.0.1:" + adminPort,
                "--model",
                MODEL,
                "--concurrency",
                "1",
                "--duration",
                "8s",
                "--mix",
                PROMPT_TOKENS + ":3=0.5," + PROMPT_TOKENS + ":31=0.5",
                "--join-sampled-only",
                "--warmup",
                "5",
                "--warmup-target",
                "server",
                "--join-grace",
                "1s",
                "--report-interval",
                "60s",
                "--out",
                out.toString()),
            Map.of(),
            work,
            "load-sampling-bias");
    try {
      assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("sampling run finished").isTrue();
      assertThat(p.exitValue()).as("sampling run exit code (see target/accuracy)").isZero();
    } finally {
      Procs.stop(p);
    }
    return json.readTree(out.resolve("summary.json").toFile());
  }

  private JsonNode runLoad(DelayRelay relay, Level l, String name, int warmup) throws Exception {
    relay.setDelayMs(l.delayMs());
    // Closed model: one request per service time per client; slots=1 serialises the clients.
    double perRequestMs = l.serviceMs();
    long durationMs = Math.max(3000, Math.round(TARGET_REQUESTS * perRequestMs));
    Path out = work.resolve("runs").resolve(name);
    Files.createDirectories(out);
    List<String> jvm =
        l.skewedZones() ? List.of("-Duser.timezone=Pacific/Pago_Pago") : List.<String>of();
    Map<String, String> env =
        l.skewedZones() ? Map.of("TZ", "Pacific/Pago_Pago") : Map.<String, String>of();
    Process p =
        Procs.start(
            LOAD_JAR,
            jvm,
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + relay.port(),
                "--admin",
                "http://127.0.0.1:" + adminPort,
                "--model",
                MODEL,
                "--concurrency",
                Integer.toString(l.concurrency()),
                "--duration",
                durationMs + "ms",
                "--input-tokens",
                Integer.toString(PROMPT_TOKENS),
                "--output-tokens",
                Integer.toString(OUTPUT_TOKENS),
                "--warmup",
                Integer.toString(warmup),
                "--warmup-target",
                "server",
                "--join-grace",
                "1s",
                "--report-interval",
                "60s",
                "--out",
                out.toString()),
            env,
            work,
            "load-" + name);
    try {
      assertThat(p.waitFor(120, TimeUnit.SECONDS)).as(name + ": load client finished").isTrue();
      assertThat(p.exitValue()).as(name + ": load client exit code (see target/accuracy)").isZero();
    } finally {
      Procs.stop(p);
    }
    return json.readTree(out.resolve("summary.json").toFile());
  }

  // ---------------------------------------------------------------- judging

  private static double p50(JsonNode s, String phase) {
    return s.at("/phases/" + phase + "/p50_ms").asDouble(Double.NaN);
  }

  private static double p95(JsonNode s, String phase) {
    return s.at("/phases/" + phase + "/p95_ms").asDouble(Double.NaN);
  }

  private static long count(JsonNode s, String phase) {
    return s.at("/phases/" + phase + "/count").asLong();
  }

  private void check(
      Level l,
      JsonNode s,
      String phase,
      String expectation,
      double expected,
      double lo,
      double hi) {
    checks.add(
        new Check(
            l.name(),
            phase,
            expectation,
            expected,
            lo,
            hi,
            p50(s, phase),
            p95(s, phase),
            count(s, phase)));
  }

  private void judge(Level l, JsonNode s, JsonNode base) {
    double d = l.delayMs();
    // The same-host base moved between 5 and 9 ms across runs on this machine; the band's upper
    // edge uses at least 9 ms so a quiet baseline does not make the later runs look slow.
    double envBase = Math.max(MIN_ENVELOPE_BASE_MS, p50(base, "network_envelope"));
    double ttftEnvBase = Math.max(MIN_ENVELOPE_BASE_MS, p50(base, "ttft_envelope"));
    double gen = l.generationTruth();
    double queue = l.queueTruth();
    double ttft = queue + l.prefillMs();
    String f = l.factor();
    boolean baseline = f.equals("baseline");

    // Owned phases, against the injected truth.
    if (baseline || f.equals("network") || f.equals("clock")) {
      check(
          l,
          s,
          "network_envelope",
          "2d + base(d=0)",
          2 * d + envBase,
          2 * d,
          2 * d + envBase + ENVELOPE_SLACK_MS + ENVELOPE_SLACK_FRACTION * 2 * d);
      check(
          l,
          s,
          "ttft_envelope",
          "2d + base(d=0)",
          2 * d + ttftEnvBase,
          2 * d,
          2 * d + ttftEnvBase + ENVELOPE_SLACK_MS + ENVELOPE_SLACK_FRACTION * 2 * d);
    }
    if (!f.equals("network") && !f.equals("clock") && !baseline) {
      unchanged(l, s, base, "network_envelope");
      unchanged(l, s, base, "ttft_envelope");
    }
    if (!f.equals("queue")) {
      check(
          l,
          s,
          "generation",
          "prefill + (n-1) step",
          gen,
          gen,
          gen + SERVER_SLACK_MS + SERVER_SLACK_FRACTION * gen);
    } else {
      unchanged(l, s, base, "generation");
    }
    check(
        l,
        s,
        "server_ttft",
        "queue + prefill",
        ttft,
        ttft - (queue > 0 ? QUEUE_EARLY_MS : 0),
        ttft + SERVER_SLACK_MS * l.concurrency() + SERVER_SLACK_FRACTION * ttft);
    check(
        l,
        s,
        "queue",
        "(c-1)(prefill + (n-1) step)",
        queue,
        Math.max(0, queue - QUEUE_EARLY_MS),
        queue + 2 + (queue > 0 ? SERVER_SLACK_MS * (l.concurrency() - 1) : 0) + 0.05 * queue);
    check(
        l,
        s,
        "tpot",
        "step",
        l.stepMs(),
        l.stepMs() - 1 - 0.1 * l.stepMs(),
        l.stepMs() + 1 + 0.1 * l.stepMs());
    double root = p50(s, "server_root");
    check(l, s, "unattributed", "~0 (< 5 ms + 5% root)", 0, -0.5, 5 + 0.05 * root);
    if (f.equals("clock")) {
      for (String phase : List.of("server_ttft", "generation", "queue", "server_root")) {
        unchanged(l, s, base, phase);
      }
    }
  }

  private void unchanged(Level l, JsonNode s, JsonNode base, String phase) {
    double b = p50(base, phase);
    double tol = UNCHANGED_MS + UNCHANGED_FRACTION * Math.abs(b);
    check(l, s, phase, "unchanged from baseline", b, b - tol, b + tol);
  }

  // ---------------------------------------------------------------- report

  private String report(List<Level> levels, Map<String, JsonNode> sums, double seconds) {
    StringBuilder md = new StringBuilder();
    String commit = Procs.run(ROOT, "git", "rev-parse", "--short=12", "HEAD");
    String dirty = Procs.run(ROOT, "git", "status", "--porcelain");
    md.append("# Accuracy: injected truth vs the paired report\n\n");
    md.append(
        "_Generated by `accuracy/src/test/java/io/phasemeter/accuracy/AccuracySuiteTest.java`"
            + " (`cd accuracy && mvn -B -o test`); do not edit by hand._\n\n");
    md.append("## Conditions of this run\n\n");
    md.append("| | |\n|---|---|\n");
    md.append("| date (UTC) | ")
        .append(OffsetDateTime.now(ZoneOffset.UTC).withNano(0))
        .append(" |\n");
    md.append("| git commit | `")
        .append(commit)
        .append("`")
        .append(dirty.isEmpty() || dirty.equals("unknown") ? "" : " (working tree modified)")
        .append(" |\n");
    md.append("| JVM | ")
        .append(System.getProperty("java.vm.name"))
        .append(' ')
        .append(System.getProperty("java.runtime.version"))
        .append(" |\n");
    md.append("| OS | ")
        .append(System.getProperty("os.name"))
        .append(' ')
        .append(System.getProperty("os.version"))
        .append(", ")
        .append(Runtime.getRuntime().availableProcessors())
        .append(" CPUs |\n");
    md.append(String.format(Locale.ROOT, "| suite wall time | %.0f s |%n", seconds));
    long pass = checks.stream().filter(Check::pass).count();
    md.append("| checks passed | ")
        .append(pass)
        .append(" / ")
        .append(checks.size())
        .append(" |\n\n");

    md.append("## Method\n\n");
    md.append(
        """
        Three separate JVM processes on one host: the simulator (`phasemeter-sim.jar`), the proxy \
        (`phasemeter-proxy.jar`, pool `slots: 1`) and the load client (`phasemeter-load.jar run`, \
        closed model, `--input-tokens %d --output-tokens %d`, token-id prompts, so the prompt \
        length is exact). Between the load client and the proxy's public port sits `DelayRelay`, a \
        TCP relay in the test JVM that holds every byte of each direction for a fixed one-way delay \
        *d*, order preserved (a FIFO per connection and direction, drained by one timer that is \
        never early). This kernel has no `netem` qdisc; the relay stands in for it. The admin \
        record feed goes direct: the join is by trace id, so the feed's own latency does not \
        matter. The simulator is restarted on the same port whenever its settings change; the \
        proxy stays up (its upstream connections are re-made). Before the judged runs, one \
        unjudged run warms the JITs; each run then sends `--warmup` requests one by one (3, or 10 \
        right after a process restart) before its clock starts. Each run lasts about %d request \
        times (at least 20 requests are joined and judged).

        Each factor is varied on its own across three levels (the baseline is the middle level of \
        prefill and decode step and the lowest of delay and concurrency): one-way delay d ∈ {0, \
        10, 25} ms; prefill ∈ {50, 100, 200} ms (`--prefill-tokens-per-s` = %d × 1000 / prefill, \
        `--prefix-cache-blocks 0`: the runs repeat the seed's prompts); decode step ∈ {5, 10, 20} ms (`--decode-step-growth 0`); proxy queue wait through `slots: \
        1` and concurrency c ∈ {1, 2, 3}. Every figure judged is the p50 of the load client's \
        per-request values in `summary.json` (envelopes are per-request differences after the \
        join, never differences of quantiles).

        """
            .formatted(PROMPT_TOKENS, OUTPUT_TOKENS, TARGET_REQUESTS, PROMPT_TOKENS));

    md.append("## Expectations\n\n");
    md.append(
        """
        - **network_envelope = client_total − server_root ≈ 2d + base.** The client reuses a \
        kept-alive connection after its first request; that request opens it, and the relay \
        delays bytes, not the TCP handshake, so the connect costs loopback time only. The request crosses the relay once (d) before the proxy parses its headers (root \
        start), and the response's last byte crosses it once (d) after the proxy's `end()` (root \
        end): one round trip, 2d. A streamed response does not cost more round trips: its chunks \
        are pipelined behind each other in the same direction, each held d. *base* is the envelope \
        measured at d = 0 in the baseline run (same-host socket and parsing time on both ends). \
        Lower bound exact: 2d (the relay is never early). Upper: 2d + base + %.0f ms + %.0f %% of \
        2d (late relay timers and scheduling on a loaded machine).
        - **ttft_envelope = client_ttft − server_ttft ≈ 2d + base_ttft**, for the same reason: the \
        request's d before the root starts, the first content chunk's d after the proxy writes it. \
        Same bounds.
        - **generation ≈ prefill + (n − 1) · step** with n = %d output tokens: the simulator emits \
        the first token when the prefill is done (the first token costs no decode step; \
        `Engine.start` sets due = start + prefill), then one token per step on a schedule that \
        does not drift (due += step). Lower bound exact (timers are late, never early). Upper: \
        + %.0f ms + %.0f %% (the proxy→simulator hop, request parsing, late timers: the measured \
        same-host overhead is 5–13 ms at the baseline on a 2-CPU machine).
        - **server_ttft ≈ queue + prefill** (no decode step in it, so changing the step must \
        not move it). Lower bound prefill (minus %.0f ms when there is a queue, see below); \
        upper: + %.0f ms per service time it contains (the prefill's and each queued request's: \
        the queue-c3 run measured 522 ms against 500, i.e. about 11 ms of same-host overhead per \
        queued service time) + 5 %%.
        - **queue ≈ (c − 1) · (prefill + (n − 1) · step)** with one slot and c closed-model \
        clients: when a request finishes, its client's next request arrives behind the c − 2 \
        still waiting and the one that just took the slot, so it waits about c − 1 service times, \
        less its own client's turn-around (so the lower bound is truth − %.0f ms). Each service \
        time is the injected one plus the same-host overhead, so the upper bound is truth + 2 ms + \
        %.0f ms per queued request + 5 %%.
        - **tpot ≈ step** within ±(1 ms + 10 %%) (the proxy times the tokens as it relays them).
        - **unattributed** (root − Σ phases) < 5 ms + 5 %% of server_root, the bound the proxy's \
        own tests hold.
        - **Only the factor's own phases move.** A phase a factor does not own must stay within \
        ±(%.0f ms + %.0f %%) of its baseline p50: the envelopes for prefill, decode and queue \
        levels; generation for queue levels. The envelopes cannot be recomputed from the truth at \
        other levels, so they are compared with the baseline; the server phases are always \
        compared with the truth.
        - **Clock independence.** The proxy runs with `-Duser.timezone=Pacific/Kiritimati` and \
        `TZ=Pacific/Kiritimati` (UTC+14) and `-Dphasemeter.clock.skew-ms=18000000` (its span \
        timestamps five hours ahead), the load client with `Pacific/Pago_Pago` (UTC−11), 25 \
        hours apart on the wall clock. Every duration is taken on each process's monotonic clock \
        and only durations are subtracted, so all phases must match the baseline within the \
        same tolerances.

        """
            .formatted(
                ENVELOPE_SLACK_MS,
                ENVELOPE_SLACK_FRACTION * 100,
                OUTPUT_TOKENS,
                SERVER_SLACK_MS,
                SERVER_SLACK_FRACTION * 100,
                QUEUE_EARLY_MS,
                SERVER_SLACK_MS,
                QUEUE_EARLY_MS,
                SERVER_SLACK_MS,
                UNCHANGED_MS,
                UNCHANGED_FRACTION * 100));

    md.append("## Injected vs measured\n\n");
    md.append(
        "p50 and p95 in ms over the run's joined successful requests; *n* is the number of"
            + " requests (for tpot: requests; the band is what the p50 must fall in).\n\n");
    md.append(
        "| level | injected | phase | expectation | expected | band [lo, hi] | p50 | p95 | n |"
            + " result |\n");
    md.append("|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
    for (Level l : levels) {
      for (Check c : checks) {
        if (!c.level().equals(l.name())) {
          continue;
        }
        md.append(
            String.format(
                Locale.ROOT,
                "| %s | %s | %s | %s | %.1f | [%.1f, %.1f] | %.2f | %.2f | %d | %s |%n",
                l.name(),
                l.injected(),
                c.phase(),
                c.expectation(),
                c.expected(),
                c.lo(),
                c.hi(),
                c.p50(),
                c.p95(),
                c.count(),
                c.pass() ? "pass" : "**FAIL**"));
      }
    }
    md.append("\n## Every run at a glance (p50 ms)\n\n");
    List<String> phases =
        List.of(
            "network_envelope",
            "ttft_envelope",
            "server_root",
            "server_ttft",
            "queue",
            "generation",
            "gateway",
            "write",
            "unattributed",
            "tpot");
    md.append("| level | requests | join coverage | negative envelopes |");
    phases.forEach(p -> md.append(' ').append(p).append(" |"));
    md.append("\n|---|---:|---:|---:|");
    phases.forEach(p -> md.append("---:|"));
    md.append('\n');
    for (Level l : levels) {
      JsonNode s = sums.get(l.name());
      md.append("| ")
          .append(l.name())
          .append(" | ")
          .append(s.at("/requests/ok").asLong())
          .append(" | ")
          .append(String.format(Locale.ROOT, "%.3f", s.at("/join_coverage").asDouble()))
          .append(" | ")
          .append(s.at("/phases/network_envelope/negative").asLong())
          .append(" |");
      phases.forEach(p -> md.append(String.format(Locale.ROOT, " %.2f |", p50(s, p))));
      md.append('\n');
    }
    md.append('\n');
    md.append(
        "A negative envelope is allowed only at d = 0 and only within the request's own write"
            + " phase + 1 ms: the root ends when the proxy's `end()` completes, and on a loaded"
            + " host the client can read the last byte before that callback runs. With d > 0 every"
            + " envelope must be at least 2d, and none may be negative.\n\n");
    JsonNode floorRun = sums.get("baseline");
    if (floorRun != null && floorRun.path("client_floor").isObject()) {
      JsonNode f = floorRun.path("client_floor");
      md.append("## The client's floor\n\n")
          .append(
              "Before its clock, each run measured the load client's own floor against its"
                  + " in-process endpoint on loopback (`--client-floor`, on by default): the same"
                  + " connection pool, exchange, parsing and validation as the run's requests, the"
                  + " run's own request bodies, and an endpoint that answers at once. Medians, in"
                  + " the baseline run (d = 0):\n\n")
          .append(
              String.format(
                  Locale.ROOT,
                  "| floor TTFT | floor connect | floor per chunk | requests | took |"
                      + " network_envelope p50 | ttft_envelope p50 |\n"
                      + "|---:|---:|---:|---:|---:|---:|---:|\n"
                      + "| %.3f ms | %.3f ms | %.3f ms | %d | %.0f ms | %.2f ms | %.2f ms |\n\n",
                  f.path("ttft_ms").asDouble(Double.NaN),
                  f.path("connect_ms").asDouble(Double.NaN),
                  f.path("chunk_ms").asDouble(Double.NaN),
                  f.path("requests").asLong(),
                  f.path("took_ms").asDouble(Double.NaN),
                  p50(floorRun, "network_envelope"),
                  p50(floorRun, "ttft_envelope")))
          .append(
              "How to read it: the floor TTFT is what the client itself costs between starting a"
                  + " request and seeing its first token when nothing else costs anything (its"
                  + " send, loopback both ways, its read and parse); an envelope within a few"
                  + " floors of it says the network and the proxy's two ends added almost"
                  + " nothing, and an envelope far above it is theirs, not the client's. The"
                  + " floor's connect is what `transport_setup` costs at the least with"
                  + " `--connection-reuse off` on this machine. At d = 0 the envelope holds more"
                  + " than the floor: the proxy's own work before its root starts and after it"
                  + " writes, and waking idle threads on both sides of a loopback hop (hundreds of"
                  + " microseconds each on a small VM at low rates; docs/performance.md, \"The"
                  + " load client's own overhead\").\n\n");
    }
    if (samplingBias != null) {
      md.append("## Sampling bias\n\n")
          .append(
              "The proxy restarted with `sampling: {ratio: 0.0, keep_errors: true,"
                  + " keep_slower_than: 250ms}`; the load client sent a mix of short (3 tokens,"
                  + " about 120 ms) and long (31 tokens, about 400 ms) answers and joined with"
                  + " `--join-sampled-only`, as a join against a trace backend would.\n\n")
          .append(
              String.format(
                  Locale.ROOT,
                  "| join coverage | generation p50 of joined (ms) | client_total p50, all (ms) |\n"
                      + "|---:|---:|---:|\n| %.3f | %.1f | %.1f |\n\n",
                  samplingBias.at("/join_coverage").asDouble(),
                  p50(samplingBias, "generation"),
                  p50(samplingBias, "client_total")))
          .append("The report's own words: _")
          .append(samplingBias.at("/conditions/join_basis").asText())
          .append("_\n\n");
    }
    notes.forEach(n -> md.append("- ").append(n).append('\n'));
    return md.toString();
  }

  static void deleteTree(Path p) throws Exception {
    if (!Files.exists(p)) {
      return;
    }
    try (var walk = Files.walk(p)) {
      for (Path x : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(x);
      }
    }
  }
}
