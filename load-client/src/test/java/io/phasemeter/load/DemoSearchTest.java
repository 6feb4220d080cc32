package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code phasemeter demo --search}: the demo's simulator and proxy, then the capacity search
 * through its own command line, with short probes (the demo's package-private hook): search.json
 * with a capacity, the queue named, and the probe lines printed.
 */
class DemoSearchTest {
  @TempDir Path dir;

  @Test
  void theDemosSearchFindsACapacityAndNamesTheQueue() throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    Demo demo = new Demo();
    // From 12 req/s (it fails: the pool serves about 10) halving to 6, a bracket already within
    // 50 %: 2 probes, then 3 blocks of 6 and 12 req/s (--max-rate keeps 18 out). The one-second
    // probes offer at least SearchRunner.MIN_REQUESTS requests each.
    demo.searchArgs =
        List.of(
            "--rate",
            "12",
            "--max-rate",
            "12",
            "--resolution",
            "50%",
            "--warmup-duration",
            "0s",
            "--warmup",
            "20",
            "--client-floor",
            "off",
            "--join-grace",
            "1s");
    CommandLine cl = new CommandLine(demo);
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    Path o = dir.resolve("demo");

    int code = cl.execute("--search", "--probe-duration", "1s", "--out", o.toString());

    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = new ObjectMapper().readTree(o.resolve("search.json").toFile());
    assertThat(s.path("capacity").path("rate").isNumber()).as(s.toString()).isTrue();
    assertThat(s.path("capacity").path("rate").asDouble()).isPositive();
    // One-second probes without a warm-up on a busy machine: the client's own envelope can breach
    // its budget by as much as the queue does; the queue is then named among the ties. Naming the
    // queue alone is SearchQueueKneeTest's.
    JsonNode limiting = s.path("limiting_phase");
    List<String> named = new java.util.ArrayList<>(List.of(limiting.path("phase").asText()));
    limiting.path("ties").forEach(t -> named.add(t.path("phase").asText()));
    assertThat(named).as(s.toString()).contains("queue");
    assertThat(o.resolve("report.html")).exists();
    assertThat(out.toString())
        .contains("[probe 1] double    12 req/s")
        .contains("phasemeter load search: capacity ")
        .contains("limiting phase: ");
  }

  @Test
  void probeDurationGoesWithSearchOnly() {
    StringWriter err = new StringWriter();
    CommandLine cl = new CommandLine(new Demo());
    cl.setOut(new PrintWriter(new StringWriter(), true));
    cl.setErr(new PrintWriter(err, true));

    int code = cl.execute("--probe-duration", "1s", "--out", dir.resolve("d").toString());

    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("--probe-duration goes with --search");
  }
}
