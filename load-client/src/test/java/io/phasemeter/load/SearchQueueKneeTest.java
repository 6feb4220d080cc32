package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.PriorityQueue;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter load search} where the truth is known (issue 34, item 3): the simulator with no
 * batch growth serves every request in a fixed T = in ÷ prefill + (out − 1) × step, behind a proxy
 * pool of S slots, so requests wait in the proxy's queue exactly as in an M/D/S queue (Poisson
 * arrivals, deterministic service, S servers, first come first served). With a queue budget of p95
 * ≤ B the capacity must lie below S ÷ T and within ±15 % of the rate at which a discrete-event
 * simulation of that queue, in this test, gives a wait p95 of B; and the limiting phase is the
 * queue.
 */
class SearchQueueKneeTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  // T = 256 / 10,240 s + (2 − 1) × 25 ms = 50 ms; S = 8: at most 160 req/s. A budget of one T
  // puts the knee at ρ ≈ 0.85 (136 req/s), where a 3 s probe still holds ~400 requests.
  private static final int SLOTS = 8;
  private static final int INPUT = 256;
  private static final double PREFILL_TPS = 10_240;
  private static final int OUTPUT = 2;
  private static final double STEP_MS = 25;
  private static final double T_S = INPUT / PREFILL_TPS + (OUTPUT - 1) * STEP_MS / 1000;
  private static final double BUDGET_MS = 50;

  private Vertx servers;

  @TempDir Path dir;

  @AfterEach
  void stop() throws Exception {
    if (servers != null) {
      servers.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void theCapacityUnderAQueueBudgetIsTheKneeOfTheQueueAndTheQueueIsNamed() throws Exception {
    servers = Vertx.vertx();
    Simulator sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(64)
                    .withDecodeStepMs(STEP_MS)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(PREFILL_TPS))
            .await(10, TimeUnit.SECONDS);
    PhasemeterProxy proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "pools:\n  - name: default\n    models: [sim-llama]\n"
                        + "    upstreams: [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: "
                        + SLOTS
                        + "\n    queue: {max: 1000, timeout: 60s}\n",
                    "test.yaml"))
            .start()
            .await(10, TimeUnit.SECONDS);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: queue-knee\n    model: \"*\"\n    quantile: 0.95\n"
            + "    limits_ms: {queue: "
            + (int) BUDGET_MS
            + "}\n    max_error_rate: 0.01\n    min_join_coverage: 0.95\n");
    double bound = SLOTS / T_S;
    double predicted = knee(SLOTS, T_S, BUDGET_MS / 1000);
    // The proxy and the simulator run in this JVM, cold: as the long-running servers a search
    // meets, they get warm first (a cold JIT made the first probe's service time 180 ms at p95).
    int warm =
        LoadMain.commandLine(
                new PrintWriter(new StringWriter(), true),
                new PrintWriter(new StringWriter(), true))
            .execute(
                RunArgs.quiet(
                    "run",
                    "--url",
                    "http://127.0.0.1:" + proxy.port(),
                    "--model",
                    "sim-llama",
                    "--input-tokens",
                    "" + INPUT,
                    "--output-tokens",
                    "" + OUTPUT,
                    "--rate",
                    "100",
                    "--duration",
                    "4s",
                    "--out",
                    dir.resolve("warm").toString()));
    assertThat(warm).isZero();
    Path out = dir.resolve("search");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
            .execute(
                "search",
                "--url",
                "http://127.0.0.1:" + proxy.port(),
                "--admin",
                "http://127.0.0.1:" + proxy.adminPort(),
                "--model",
                "sim-llama",
                "--input-tokens",
                "" + INPUT,
                "--output-tokens",
                "" + OUTPUT,
                "--budgets",
                budgets.toString(),
                // Near the answer, up to the bound: a short search.
                "--rate",
                "" + Math.round(predicted * 0.8),
                "--max-rate",
                "" + (int) bound,
                "--duration",
                "3s",
                "--warmup-duration",
                "1s",
                "--resolution",
                "10%",
                "--repeats",
                "3",
                "--join-grace",
                "500ms",
                "--warmup",
                "0",
                "--client-floor",
                "off",
                "--report-interval",
                "1s",
                "--out",
                out.toString());
    String log = stdout + "\n" + stderr;
    assertThat(code).as(log).isZero();
    JsonNode s = JSON.readTree(out.resolve("search.json").toFile());
    double rate = s.path("capacity").path("rate").asDouble();
    String figures =
        String.format(
            java.util.Locale.ROOT,
            "found %.1f req/s (95 %% interval %.1f-%.1f), M/D/%d predicts %.1f, bound %.1f;"
                + " generation p95 by probe %s%n%s",
            rate,
            s.path("capacity").path("ci95_low").asDouble(),
            s.path("capacity").path("ci95_high").asDouble(),
            SLOTS,
            predicted,
            bound,
            s.path("probes").findValues("generation").toString(),
            log);
    System.out.println(figures);
    assertThat(rate).as(figures).isLessThan(bound);
    assertThat(rate).as(figures).isBetween(predicted * 0.85, predicted * 1.15);
    assertThat(s.path("limiting_phase").path("phase").asText()).as(figures).isEqualTo("queue");
    assertThat(s.path("limiting_phase").path("owner").asText())
        .isEqualTo("inference-pool capacity");
    assertThat(s.path("capacity").path("unit").asText()).isEqualTo("req/s");
    assertThat(s.path("probes").size()).isGreaterThanOrEqualTo(2 + 3 * 2);
    assertThat(s.path("probes").get(0).path("p95_ms").has("queue")).isTrue();
    assertThat(out.resolve("report.html")).exists();
    assertThat(Files.readString(out.resolve("report.html")))
        .contains("The limiting phase is <b>queue</b>");
    assertThat(stdout.toString()).contains("[probe 1] double").contains("limiting phase: queue");
  }

  /**
   * The rate at which an M/D/S queue's wait p95 is {@code budget}: bisection on a discrete-event
   * simulation with common random numbers (the same unit-rate arrival stream scaled to each rate,
   * so the p95 grows with the rate).
   */
  static double knee(int servers, double service, double budget) {
    Random r = new Random(34);
    int n = 200_000;
    double[] unitGaps = new double[n];
    for (int i = 0; i < n; i++) {
      unitGaps[i] = -Math.log(1 - r.nextDouble());
    }
    double lo = 0;
    double hi = servers / service;
    for (int i = 0; i < 40; i++) {
      double mid = (lo + hi) / 2;
      if (waitP95(unitGaps, mid, servers, service) <= budget) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** p95 of the wait for a server, FIFO, after the first tenth (the start from empty). */
  static double waitP95(double[] unitGaps, double rate, int servers, double service) {
    double[] w = waits(unitGaps, rate, servers, service);
    Arrays.sort(w);
    return w[(int) Math.ceil(0.95 * w.length) - 1];
  }

  /** Every wait for a server, FIFO, after the first tenth (the start from empty). */
  static double[] waits(double[] unitGaps, double rate, int servers, double service) {
    PriorityQueue<Double> free = new PriorityQueue<>();
    for (int i = 0; i < servers; i++) {
      free.add(0.0);
    }
    double t = 0;
    int skip = unitGaps.length / 10;
    double[] waits = new double[unitGaps.length - skip];
    for (int i = 0; i < unitGaps.length; i++) {
      t += unitGaps[i] / rate;
      double start = Math.max(t, free.poll());
      free.add(start + service);
      if (i >= skip) {
        waits[i - skip] = start - t;
      }
    }
    return waits;
  }

  @Test
  void theSimulationOfTheQueueAgreesWithClosedForms() {
    Random r = new Random(1);
    double[] gaps = new double[400_000];
    for (int i = 0; i < gaps.length; i++) {
      gaps[i] = -Math.log(1 - r.nextDouble());
    }
    // M/D/1 at ρ = 0.5 (10 req/s, T = 50 ms): a request waits with probability ρ, and the mean
    // wait is ρT / (2(1 − ρ)) = T / 2 (Pollaczek–Khinchine).
    double[] w = waits(gaps, 10, 1, 0.05);
    double mean = Arrays.stream(w).average().orElseThrow();
    double waiting = (double) Arrays.stream(w).filter(x -> x > 0).count() / w.length;
    assertThat(mean).isCloseTo(0.025, org.assertj.core.data.Offset.offset(0.001));
    assertThat(waiting).isCloseTo(0.5, org.assertj.core.data.Offset.offset(0.01));
    // Far below the bound, four servers leave the p95 at no wait; near it, the wait grows.
    assertThat(waitP95(gaps, 10, 4, 0.05)).isZero();
    assertThat(waitP95(gaps, 76, 4, 0.05)).isGreaterThan(waitP95(gaps, 60, 4, 0.05));
  }
}
