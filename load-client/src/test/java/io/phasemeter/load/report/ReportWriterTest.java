package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.join.Pair;
import java.io.ByteArrayInputStream;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import javax.xml.parsers.DocumentBuilderFactory;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;

class ReportWriterTest {

  @TempDir static Path out;
  static ReportInput input;

  @BeforeAll
  static void writeOnce() throws Exception {
    input = Scenario.build(1);
    ReportWriter.write(out, input);
  }

  @Test
  void writesEveryFile() {
    for (String f : ReportWriter.FILES) {
      assertThat(out.resolve(f)).isNotEmptyFile();
    }
  }

  @Test
  void summaryHoldsTheContractFieldsWithNullForNaN() throws Exception {
    JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
    JsonNode req = s.get("requests");
    assertThat(req.get("sent").asLong()).isEqualTo(input.sent());
    assertThat(req.get("ok").asLong()).isEqualTo(input.ok());
    assertThat(req.get("errors").asLong()).isEqualTo(input.errors());
    assertThat(req.get("dropped").asLong()).isEqualTo(3);
    assertThat(req.get("invalid").asLong()).isEqualTo(1);
    assertThat(s.get("join_coverage").asDouble()).isBetween(0.9, 1.0);
    assertThat(s.get("join_coverage").asDouble())
        .isEqualTo(input.phaseStats().joinCoverage(), within(1e-12));
    assertThat(s.get("achieved_rate").asDouble()).isEqualTo(input.achievedRate(), within(1e-9));

    // No record waited for an engine span: the coverage is unknown, not 0.
    assertThat(s.get("engine_coverage").isNull()).isTrue();

    JsonNode phases = s.get("phases");
    assertThat(phases.size()).isEqualTo(22);
    for (String name : PhaseStats.NAMES) {
      JsonNode p = phases.get(name);
      assertThat(p).as(name).isNotNull();
      for (String f : List.of("count", "p50_ms", "p95_ms", "p99_ms", "max_ms")) {
        assertThat(p.has(f)).as(name + "." + f).isTrue();
      }
      assertThat(p.get("count").asLong()).isEqualTo(input.phaseStats().count(name));
      if (p.get("count").asLong() == 0) {
        // engine_queue, prefill, decode: no record here carries the engine's split.
        assertThat(p.get("p95_ms").isNull()).as(name + ".p95_ms").isTrue();
        continue;
      }
      assertThat(p.get("p95_ms").asDouble())
          .isEqualTo(input.phaseStats().summary(name).p95(), within(1e-9));
    }
    assertThat(s.at("/negative_envelopes/network_envelope").asLong()).isEqualTo(2);
    assertThat(phases.at("/network_envelope/negative").asLong()).isEqualTo(2);

    JsonNode budgets = s.get("budgets");
    assertThat(budgets.size()).isEqualTo(6);
    assertThat(budgets.get(1).get("phase").asText()).isEqualTo("queue");
    assertThat(budgets.get(1).get("breached").asBoolean()).isTrue();
    assertThat(budgets.get(1).get("limit_ms").asDouble()).isEqualTo(250);
    assertThat(budgets.get(3).get("observed_ms").isNull()).isTrue(); // NaN
    assertThat(s.at("/conditions/not_a_number").isNull()).isTrue();
    assertThat(s.at("/conditions/admin_url").isNull()).isTrue();
    assertThat(s.at("/conditions/workload/max_tokens").asInt()).isEqualTo(100);
    assertThat(s.at("/phases/itl/count").asLong()).isPositive();

    JsonNode steps = s.get("steps");
    assertThat(steps.size()).isEqualTo(3);
    assertThat(steps.get(2).get("offered_rate").asDouble()).isEqualTo(16);
    assertThat(steps.get(2).get("achieved_rate").asDouble()).isCloseTo(16, within(0.5));
    assertThat(steps.get(2).get("dropped").asLong()).isEqualTo(3);
    assertThat(steps.get(2).at("/phases/queue/p95_ms").asDouble())
        .isGreaterThan(steps.get(0).at("/phases/queue/p95_ms").asDouble() + 1000);
    assertThat(steps.get(0).at("/phases/client_total/p50_ms").isNumber()).isTrue();

    long tokens = input.pairs().stream().filter(p -> p.client().ok()).count() * 100;
    assertThat(s.get("output_token_throughput").asDouble())
        .isEqualTo(tokens / input.durationSeconds(), within(1e-9));
    assertThat(s.get("request_throughput").asDouble())
        .isEqualTo(input.ok() / input.durationSeconds(), within(1e-9));
    assertThat(s.at("/definitions/note").asText()).contains("vllm bench serve", "intended");

    JsonNode slowest = s.get("slowest");
    assertThat(slowest.size()).isEqualTo(10);
    double previous = Double.MAX_VALUE;
    for (JsonNode r : slowest) {
      double total = r.get("client_total_ms").asDouble();
      assertThat(total).isLessThanOrEqualTo(previous);
      previous = total;
      if (r.get("joined").asBoolean()) {
        assertThat(r.get("residual_ms").asDouble()).isCloseTo(0, within(1e-6));
      }
    }
    String text = Files.readString(out.resolve("summary.json"));
    assertThat(text).doesNotContain("NaN").doesNotContain("Infinity");
  }

  @Test
  void pairsCsvHasOneQuotedRowPerRequest() throws Exception {
    List<List<String>> rows = parseCsv(Files.readString(out.resolve("pairs.csv")));
    assertThat(rows.get(0)).containsExactlyElementsOf(PairsCsv.HEADER);
    assertThat(rows).hasSize(input.pairs().size() + 1);
    Map<String, Integer> col = new HashMap<>();
    for (int i = 0; i < rows.get(0).size(); i++) {
      col.put(rows.get(0).get(i), i);
    }
    for (List<String> row : rows) {
      assertThat(row).hasSize(PairsCsv.HEADER.size());
    }
    List<String> invalid =
        rows.stream()
            .filter(r -> r.get(col.get("class")).equals("INVALID"))
            .findFirst()
            .orElseThrow();
    assertThat(invalid.get(col.get("invalid_reason")))
        .isEqualTo("usage.completion_tokens 12, \"expected\" 100");
    List<String> unjoined =
        rows.stream()
            .filter(r -> r.get(col.get("joined")).equals("false"))
            .findFirst()
            .orElseThrow();
    assertThat(unjoined.get(col.get("server_root_ms"))).isEmpty();
    assertThat(unjoined.get(col.get("network_envelope_ms"))).isEmpty();
    assertThat(unjoined.get(col.get("client_total_ms"))).isNotEmpty();
    List<String> negative = rows.get(1 + 17);
    assertThat(Double.parseDouble(negative.get(col.get("network_envelope_ms")))).isEqualTo(-4.0);
  }

  @Test
  void phaseLogReadsBackPerTagWithTheSameCounts() throws Exception {
    Map<String, Long> counts = new HashMap<>();
    Set<String> tags = new HashSet<>();
    HistogramLogReader reader = new HistogramLogReader(out.resolve("phases.hlog").toFile());
    Histogram h;
    while ((h = (Histogram) reader.nextIntervalHistogram()) != null) {
      tags.add(h.getTag());
      counts.merge(h.getTag(), h.getTotalCount(), Long::sum);
    }
    assertThat(tags).contains("client_total", "queue", "itl", "network_envelope_negative");
    PhaseStats stats = input.phaseStats();
    for (String name : PhaseStats.NAMES) {
      long total = counts.getOrDefault(name, 0L) + counts.getOrDefault(name + "_negative", 0L);
      assertThat(total).as(name).isEqualTo(stats.count(name));
    }
    assertThat(counts.get("network_envelope_negative")).isEqualTo(2);
    assertThat(Files.readString(out.resolve("phases.hlog"))).contains("microseconds", "_negative");
  }

  @Test
  void htmlIsWellFormedEscapedAndHasEverySection() throws Exception {
    String html = Files.readString(out.resolve("report.html"));
    DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
    Document doc =
        f.newDocumentBuilder()
            .parse(new ByteArrayInputStream(html.getBytes(StandardCharsets.UTF_8)));
    assertThat(doc.getDocumentElement().getTagName()).isEqualTo("html");
    assertThat(count(html, "<svg")).isEqualTo(count(html, "</svg>")).isGreaterThan(5);
    for (String id : HtmlReport.SECTIONS) {
      assertThat(html).contains("id=\"" + id + "\"");
    }
    assertThat(html).doesNotContain("<script").contains("&lt;script&gt;alert(&#39;x&#39;)");
    assertThat(html).contains("class=\"breach\"").contains("BREACHED");
    assertThat(html).contains("Join coverage").contains("Negative envelopes");
    assertThat(html).doesNotContain("http://cdn").doesNotContain("<link ");
    assertThat(html).doesNotContain("NaN");
    for (var r : input.slowest()) {
      assertThat(html).contains(r.traceId());
    }
  }

  @Test
  void negativeEnvelopesAreDrawnBelowZeroAndTheHtmlStillParses(@TempDir Path dir) throws Exception {
    List<Pair> pairs = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      pairs.add(
          Fixtures.joined(i, i * 100.0, 500 + i, -30)); // client clock slower than the proxy's
    }
    PhaseStats stats = PhaseStats.of(pairs);
    ReportInput in =
        new ReportInput(
            pairs,
            List.of(
                new io.phasemeter.load.schedule.StepInfo(0, -1, 4, 0, Fixtures.ns(4900), 50, 0)),
            0,
            Fixtures.ns(6000),
            Map.of("model", "m"),
            50,
            50,
            0,
            0,
            0,
            50 / 6.0,
            List.of(),
            stats);
    ReportWriter.write(dir, in);
    String html = Files.readString(dir.resolve("report.html"));
    DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(html.getBytes(StandardCharsets.UTF_8)));
    assertThat(html).contains("network_envelope (negative)").contains("concurrency");
    assertThat(stats.summary("network_envelope").p95()).isCloseTo(-30, within(0.3));
    JsonNode s = new ObjectMapper().readTree(dir.resolve("summary.json").toFile());
    assertThat(s.at("/negative_envelopes/network_envelope").asLong()).isEqualTo(50);
    assertThat(s.at("/phases/network_envelope/p50_ms").asDouble()).isCloseTo(-30, within(0.3));
    assertThat(s.at("/steps/0/offered_rate").isNull()).isTrue();
  }

  @Test
  void anEmptyRunStillWritesEveryFile(@TempDir Path dir) throws Exception {
    ReportInput empty =
        new ReportInput(
            List.<Pair>of(), List.of(), 0, 0, Map.of(), 0, 0, 0, 0, 0, 0, List.of(), null);
    ReportWriter.write(dir, empty);
    for (String f : ReportWriter.FILES) {
      assertThat(dir.resolve(f)).exists();
    }
    JsonNode s = new ObjectMapper().readTree(dir.resolve("summary.json").toFile());
    assertThat(s.get("join_coverage").isNull()).isTrue();
    assertThat(s.at("/phases/client_total/p95_ms").isNull()).isTrue();
    DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(dir.resolve("report.html").toFile());
  }

  @Test
  void rendersWithHeadlessChromiumWhenInstalled() throws Exception {
    String chromium = findOnPath("chromium", "chromium-browser", "google-chrome");
    Assumptions.assumeTrue(chromium != null, "no headless Chromium installed");
    Path shots = Paths.get("target", "report-screenshots").toAbsolutePath();
    Files.createDirectories(shots);
    Files.copy(
        out.resolve("report.html"),
        shots.resolve("report.html"),
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    Path png = shots.resolve("report.png");
    Files.deleteIfExists(png);
    Process p =
        new ProcessBuilder(
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1280,6000",
                "--screenshot=" + png,
                shots.resolve("report.html").toUri().toString())
            .redirectErrorStream(true)
            .redirectOutput(shots.resolve("chromium.log").toFile())
            .start();
    // A bound so a stuck browser cannot hang the build; not a performance threshold.
    Assumptions.assumeTrue(p.waitFor(120, TimeUnit.SECONDS), "chromium did not finish");
    assertThat(png).isNotEmptyFile();
  }

  private static String findOnPath(String... names) {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      for (String n : names) {
        File f = new File(dir, n);
        if (f.canExecute()) {
          return f.getPath();
        }
      }
    }
    return null;
  }

  private static int count(String s, String needle) {
    int n = 0;
    for (int i = s.indexOf(needle); i >= 0; i = s.indexOf(needle, i + 1)) {
      n++;
    }
    return n;
  }

  /** RFC 4180, enough for the test: quoted fields, doubled quotes, CRLF rows. */
  static List<List<String>> parseCsv(String text) {
    List<List<String>> rows = new ArrayList<>();
    List<String> row = new ArrayList<>();
    StringBuilder field = new StringBuilder();
    boolean quoted = false;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (quoted) {
        if (c == '"' && i + 1 < text.length() && text.charAt(i + 1) == '"') {
          field.append('"');
          i++;
        } else if (c == '"') {
          quoted = false;
        } else {
          field.append(c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        row.add(field.toString());
        field.setLength(0);
      } else if (c == '\r') {
        continue;
      } else if (c == '\n') {
        row.add(field.toString());
        field.setLength(0);
        rows.add(row);
        row = new ArrayList<>();
      } else {
        field.append(c);
      }
    }
    return rows;
  }
}
