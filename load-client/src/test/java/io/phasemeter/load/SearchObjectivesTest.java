package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter load search} on objectives alone (issue 34, item 2: "the objective missed most
 * often and the server phase whose p95 grew most since the last passing probe"), through the CLI:
 * {@code --slo}, no budgets file, against the {@link QueueingPool} whose truth is known. A
 * request's client TTFT is its wait in the proxy's queue plus the prefill, its end-to-end latency
 * the wait plus T; the TTFT objective leaves the wait less room than e2el's, so queueing breaks it
 * first, and the queue is the phase that grows.
 */
class SearchObjectivesTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  // Prefill 256 / 10,240 s = 25 ms, T = 25 + (2 − 1) × 25 = 50 ms, S = 4: at most 80 req/s.
  private static final QueueingPool.Engine ENGINE = new QueueingPool.Engine(4, 256, 10_240, 2, 25);
  // TTFT leaves the wait 100 ms (2 T: the knee at ρ ≈ 0.84, where the queue's p95 is steep, so
  // it grows well above the other phases' noise between probes), e2el leaves it 950 ms.
  private static final double TTFT_MS = 125;
  private static final double E2EL_MS = 1000;

  private QueueingPool pool;

  @TempDir Path dir;

  @AfterEach
  void stop() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void theObjectiveQueueingBreaksFirstIsNamedWithTheQueueAndEachProbesAttainmentIsItsRuns()
      throws Exception {
    double ttftRoom = TTFT_MS / 1000 - ENGINE.prefillS();
    double e2elRoom = E2EL_MS / 1000 - ENGINE.serviceS();
    String breaksFirst = ttftRoom < e2elRoom ? "client_ttft" : "client_total";
    // At least 95 % good ⇔ the wait's p95 within the smaller room: the M/D/S knee for it.
    double knee =
        QueueingPool.knee(ENGINE.slots(), ENGINE.serviceS(), Math.min(ttftRoom, e2elRoom));
    double bound = ENGINE.bound();
    pool = QueueingPool.start(ENGINE);
    pool.warm(dir.resolve("warm"), knee, "2s", true);
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
                "" + ENGINE.input(),
                "--output-tokens",
                "" + ENGINE.output(),
                "--slo",
                String.format(Locale.ROOT, "ttft=%.0fms,e2el=%.0fms", TTFT_MS, E2EL_MS),
                // Below the answer (a first probe that fails halves: more probes), up to the
                // bound: a short search.
                "--rate",
                "" + Math.round(knee * 0.75),
                "--max-rate",
                "" + (int) bound,
                "--duration",
                "2s",
                "--warmup-duration",
                "500ms",
                "--resolution",
                "20%",
                "--repeats",
                "3",
                "--join-grace",
                "200ms",
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
    JsonNode l = s.path("limiting_phase");
    String figures =
        String.format(
            Locale.ROOT,
            "found %.1f req/s (M/D/%d knee %.1f, bound %.1f); limiting %s%n%s",
            s.path("capacity").path("rate").asDouble(),
            ENGINE.slots(),
            knee,
            bound,
            l,
            log);
    System.out.println(figures);
    assertThat(s.path("status").asText()).as(figures).isEqualTo("found");
    assertThat(s.path("capacity").path("rate").asDouble())
        .as(figures)
        .isPositive()
        .isLessThan(bound);
    assertThat(s.path("capacity").path("goodput").isNumber()).as(figures).isTrue();

    JsonNode criteria = s.path("criteria");
    assertThat(criteria.path("budgets_file").isNull()).isTrue();
    assertThat(criteria.path("min_attainment").asDouble()).isEqualTo(0.95);
    assertThat(criteria.path("objectives").path("source").asText()).isEqualTo("--slo");
    JsonNode objectives = criteria.path("objectives").path("objectives_ms");
    assertThat(objectives.path("client_ttft").asDouble()).isEqualTo(TTFT_MS);
    assertThat(objectives.path("client_total").asDouble()).isEqualTo(E2EL_MS);
    assertThat(objectives.size()).isEqualTo(2);

    assertThat(l.path("basis").asText()).as(figures).isEqualTo("objectives");
    assertThat(l.path("objective").asText()).as(figures).isEqualTo(breaksFirst);
    assertThat(l.path("phase").asText()).as(figures).isEqualTo("queue");
    assertThat(l.path("owner").asText()).isEqualTo("inference-pool capacity");
    assertThat(l.path("reason").asText())
        .as(figures)
        .contains(breaksFirst + " missed most often")
        .contains("of the server's phases, queue p95");
    // The failing probe named: its run's own counts say the same.
    JsonNode failing = null;
    for (JsonNode p : s.path("probes")) {
      if (p.path("index").asInt() == l.path("fail_probe").asInt()) {
        failing = p;
      }
    }
    assertThat(failing).as(figures).isNotNull();
    JsonNode missed =
        JSON.readTree(out.resolve(failing.path("dir").asText()).resolve("summary.json").toFile())
            .path("goodput")
            .path("missed");
    assertThat(missed.path(breaksFirst).asLong())
        .as(figures)
        .isGreaterThan(
            missed
                .path("client_ttft".equals(breaksFirst) ? "client_total" : "client_ttft")
                .asLong());

    // Every probe's attainment is its run's, as summary.json gives it.
    assertThat(s.path("probes").size()).isGreaterThanOrEqualTo(2 + 3 * 2);
    for (JsonNode p : s.path("probes")) {
      Path summary = out.resolve(p.path("dir").asText()).resolve("summary.json");
      JsonNode attainment =
          Files.exists(summary)
              ? JSON.readTree(summary.toFile()).path("goodput").path("attainment")
              : NullNode.getInstance();
      assertThat(p.path("attainment")).as("probe %s", p.path("index")).isEqualTo(attainment);
      if (!p.path("verdict").asText().equals("invalid")) {
        assertThat(p.path("p95_ms").has("queue")).as("probe %s", p.path("index")).isTrue();
      }
    }
    assertThat(stdout.toString()).contains("limiting phase: queue");
  }
}
