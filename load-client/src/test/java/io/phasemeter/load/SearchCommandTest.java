package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code phasemeter load search}'s refusals and its first probe's failures, through the CLI. */
class SearchCommandTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  private int search(String... args) {
    List<String> a = new ArrayList<>(List.of("search"));
    a.addAll(List.of(args));
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(a.toArray(String[]::new));
  }

  private Path budgets() throws Exception {
    Path f = dir.resolve("budgets.yaml");
    Files.writeString(
        f, "budgets:\n  - name: b\n    model: \"*\"\n    limits_ms: {client_total: 2000}\n");
    return f;
  }

  @Test
  void stepsAreRefusedTheSearchChoosesTheRates() throws Exception {
    int code =
        search(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--budgets",
            budgets().toString(),
            "--steps",
            "1,2",
            "--step-duration",
            "5s");
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("the search chooses the rates");
  }

  @Test
  void withoutBudgetsOrObjectivesThereIsNothingToHold() throws Exception {
    assertThat(search("--url", "http://127.0.0.1:1", "--model", "m")).isEqualTo(2);
    assertThat(err.toString()).contains("nothing to hold: give --budgets FILE");
    // A budgets file with no budget for the model holds nothing either.
    Path other = dir.resolve("other.yaml");
    Files.writeString(
        other, "budgets:\n  - name: b\n    model: other\n    limits_ms: {client_total: 2000}\n");
    assertThat(search("--url", "http://127.0.0.1:1", "--model", "m", "--budgets", other.toString()))
        .isEqualTo(2);
  }

  @Test
  void badSearchOptionsAreRefused() throws Exception {
    String b = budgets().toString();
    assertThat(
            search("--url", "http://x:1", "--model", "m", "--budgets", b, "--resolution", "150%"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--resolution");
    assertThat(
            search(
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--budgets",
                b,
                "--rate",
                "5",
                "--concurrency",
                "2"))
        .isEqualTo(2);
    assertThat(
            search(
                "--url",
                "http://x:1",
                "--model",
                "m",
                "--budgets",
                b,
                "--rate",
                "10",
                "--max-rate",
                "5"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--max-rate (5) must be at least the start (10)");
  }

  @Test
  void anObjectiveOnAProxyPhaseWithoutAdminIsRefusedBeforeAnyProbe() throws Exception {
    // queue is a figure of the proxy's record: without --admin no request could be judged on it.
    Path out = dir.resolve("s");
    int code =
        search(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--slo",
            "ttft=500ms,queue=100ms",
            "--out",
            out.toString());
    assertThat(code).as(this.out + "\n" + err).isEqualTo(2);
    assertThat(err.toString())
        .contains(
            "phasemeter load search: --slo: queue: a figure of the proxy's record, joined per"
                + " request: it needs --admin");
    assertThat(out).doesNotExist();
  }

  @Test
  void aWrongModelStopsAtTheFirstProbeWithTheRunsReasonNotACapacityOfZero() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      Simulator sim =
          Simulator.start(vertx, SimulatorConfig.defaults().withPort(0))
              .await(10, TimeUnit.SECONDS);
      Path out = dir.resolve("s");
      int code =
          search(
              "--url",
              "http://127.0.0.1:" + sim.port(),
              "--model",
              "no-such-model",
              "--budgets",
              budgets().toString(),
              "--rate",
              "10",
              "--duration",
              "1s",
              "--warmup-duration",
              "0s",
              "--warmup",
              "0",
              "--client-floor",
              "off",
              "--join-grace",
              "100ms",
              "--out",
              out.toString());
      assertThat(code).as(out + "\n" + this.out + err).isEqualTo(4);
      JsonNode s = new ObjectMapper().readTree(out.resolve("search.json").toFile());
      assertThat(s.path("status").asText()).isEqualTo("fatal");
      assertThat(s.path("capacity").path("rate").isNull()).isTrue();
      assertThat(s.path("probes")).hasSize(1);
      assertThat(s.path("exit_reason").asText())
          .startsWith("the search could not start: no request succeeded")
          .contains("HTTP_4XX");
      assertThat(this.out.toString()).contains("[probe 1] double");
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }
}
