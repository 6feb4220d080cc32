package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter load search} where the truth is known (issue 34, item 3): the simulator with no
 * batch growth serves every request in a fixed T = in ÷ prefill + (out − 1) × step, behind a proxy
 * pool of S slots, so requests wait in the proxy's queue exactly as in an M/D/S queue (Poisson
 * arrivals, deterministic service, S servers, first come first served). With a queue budget of p95
 * ≤ B the capacity must lie below S ÷ T and within ±15 % of the rate at which a discrete-event
 * simulation of that queue ({@link QueueingPool#knee}) gives a wait p95 of B; and the limiting
 * phase is the queue.
 */
class SearchQueueKneeTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  // T = 256 / 10,240 s + (2 − 1) × 25 ms = 50 ms; S = 8: at most 160 req/s. A budget of one T
  // puts the knee at ρ ≈ 0.85 (136 req/s), where a 3 s probe still holds ~400 requests.
  private static final QueueingPool.Engine ENGINE = new QueueingPool.Engine(8, 256, 10_240, 2, 25);
  private static final int SLOTS = ENGINE.slots();
  private static final int INPUT = ENGINE.input();
  private static final int OUTPUT = ENGINE.output();
  private static final double T_S = ENGINE.serviceS();
  private static final double BUDGET_MS = 50;

  private QueueingPool pool;

  @TempDir Path dir;

  @AfterEach
  void stop() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void theCapacityUnderAQueueBudgetIsTheKneeOfTheQueueAndTheQueueIsNamed() throws Exception {
    pool = QueueingPool.start(ENGINE);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: queue-knee\n    model: \"*\"\n    quantile: 0.95\n"
            + "    limits_ms: {queue: "
            + (int) BUDGET_MS
            + "}\n    max_error_rate: 0.01\n    min_join_coverage: 0.95\n");
    double bound = ENGINE.bound();
    double predicted = QueueingPool.knee(SLOTS, T_S, BUDGET_MS / 1000);
    pool.warm(dir.resolve("warm"), 100, "4s", false);
    Path out = dir.resolve("search");
    StringWriter stdout = new StringWriter();
    StringWriter stderr = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(stdout, true), new PrintWriter(stderr, true))
            .execute(
                "search",
                "--url",
                pool.url(),
                "--admin",
                pool.admin(),
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

  @Test
  void theSimulationOfTheQueueAgreesWithClosedForms() {
    Random r = new Random(1);
    double[] gaps = new double[400_000];
    for (int i = 0; i < gaps.length; i++) {
      gaps[i] = -Math.log(1 - r.nextDouble());
    }
    // M/D/1 at ρ = 0.5 (10 req/s, T = 50 ms): a request waits with probability ρ, and the mean
    // wait is ρT / (2(1 − ρ)) = T / 2 (Pollaczek–Khinchine).
    double[] w = QueueingPool.waits(gaps, 10, 1, 0.05);
    double mean = Arrays.stream(w).average().orElseThrow();
    double waiting = (double) Arrays.stream(w).filter(x -> x > 0).count() / w.length;
    assertThat(mean).isCloseTo(0.025, org.assertj.core.data.Offset.offset(0.001));
    assertThat(waiting).isCloseTo(0.5, org.assertj.core.data.Offset.offset(0.01));
    // Far below the bound, four servers leave the p95 at no wait; near it, the wait grows.
    assertThat(QueueingPool.waitP95(gaps, 10, 4, 0.05)).isZero();
    assertThat(QueueingPool.waitP95(gaps, 76, 4, 0.05))
        .isGreaterThan(QueueingPool.waitP95(gaps, 60, 4, 0.05));
  }
}
