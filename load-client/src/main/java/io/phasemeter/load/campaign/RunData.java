package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.RunMerge;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What one run left behind, read back from its own files: the counts of summary.json and the class
 * and reason of every request in pairs.csv. The campaign judges and summarises runs from these, the
 * same files a person can open.
 *
 * @param summary the run's summary.json
 * @param requests one row per request: its class ({@code NONE}, {@code INVALID}, {@code HTTP_5XX},
 *     …), the reason of an invalid one, and its TPOT in ms (NaN when unknown)
 */
public record RunData(JsonNode summary, List<Request> requests) {

  /** The metrics every run reports, in table order; units are in the names. */
  public static final List<String> METRICS =
      List.of(
          "ttft_p50_ms",
          "ttft_p95_ms",
          "tpot_p50_ms",
          "total_p50_ms",
          "total_p95_ms",
          "output_tokens_per_s_per_request_p50",
          "output_token_throughput",
          "request_throughput",
          "queue_p95_ms",
          "request_goodput",
          "output_token_goodput",
          "attainment",
          "server_attainment");

  /**
   * Goodput's metrics: their statistics take every measured run that sent its load, failed requests
   * included ({@link Validity#loadSent}), the others only valid runs.
   */
  public static final Set<String> GOODPUT =
      Set.of("request_goodput", "output_token_goodput", "attainment", "server_attainment");

  /** A share, between 0 and 1: its interval is shown clamped to [0, 1]. */
  public static final String ATTAINMENT = "attainment";

  /**
   * The proxy's own attainment over the run's joined requests it judged (summary.json {@code
   * goodput.server}): a share, as {@link #ATTAINMENT}; NaN when no record carried its verdict.
   */
  public static final String SERVER_ATTAINMENT = "server_attainment";

  /** One request as pairs.csv tells it. */
  public record Request(String errorClass, String invalidReason, double tpotMs) {}

  private static final ObjectMapper JSON = new ObjectMapper();

  /** Reads {@code summary.json} and {@code pairs.csv} from a run's directory. */
  public static RunData read(Path dir) throws IOException {
    JsonNode summary = JSON.readTree(dir.resolve("summary.json").toFile());
    List<String> lines = Files.readAllLines(dir.resolve("pairs.csv"), StandardCharsets.UTF_8);
    List<Request> requests = new ArrayList<>();
    if (!lines.isEmpty()) {
      List<String> header = Arrays.asList(lines.get(0).split(","));
      int cls = header.indexOf("class");
      int reason = header.indexOf("invalid_reason");
      int tpot = header.indexOf("tpot_ms");
      for (String line : lines.subList(1, lines.size())) {
        if (line.isEmpty()) {
          continue;
        }
        List<String> f = RunMerge.splitCsv(line);
        requests.add(
            new Request(f.get(cls), f.get(reason).isEmpty() ? null : f.get(reason), num(f, tpot)));
      }
    }
    return new RunData(summary, List.copyOf(requests));
  }

  /**
   * The run's figures: client TTFT and total (E2EL) p50/p95, TPOT p50, the median per-request
   * decode speed (1000 / TPOT), aggregate output-token and request throughput, and the proxy's
   * queue p95 when the run was joined with {@code --admin} (NaN otherwise), and goodput's good
   * requests and output tokens per second and attainment when the run had objectives (NaN
   * otherwise), with the proxy's attainment when its records carried its own verdicts.
   */
  public Map<String, Double> metrics() {
    Map<String, Double> m = new LinkedHashMap<>();
    m.put("ttft_p50_ms", phase("client_ttft", "p50_ms"));
    m.put("ttft_p95_ms", phase("client_ttft", "p95_ms"));
    m.put("tpot_p50_ms", phase("tpot", "p50_ms"));
    m.put("total_p50_ms", phase("client_total", "p50_ms"));
    m.put("total_p95_ms", phase("client_total", "p95_ms"));
    m.put("output_tokens_per_s_per_request_p50", perRequestSpeedMedian());
    m.put("output_token_throughput", value(summary.path("output_token_throughput")));
    m.put("request_throughput", value(summary.path("request_throughput")));
    m.put(
        "queue_p95_ms",
        summary.path("phases").path("queue").path("count").asLong(0) > 0
            ? phase("queue", "p95_ms")
            : Double.NaN);
    // Goodput (summary.json goodput): NaN for a run without objectives.
    JsonNode g = summary.path("goodput");
    m.put("request_goodput", value(g.path("request_goodput")));
    m.put("output_token_goodput", value(g.path("output_token_goodput")));
    m.put("attainment", value(g.path("attainment")));
    m.put(SERVER_ATTAINMENT, value(g.path("server").path("attainment")));
    return m;
  }

  private double perRequestSpeedMedian() {
    double[] speeds =
        requests.stream()
            .filter(r -> "NONE".equals(r.errorClass()) && r.tpotMs() > 0)
            .mapToDouble(r -> 1000.0 / r.tpotMs())
            .sorted()
            .toArray();
    if (speeds.length == 0) {
      return Double.NaN;
    }
    int mid = speeds.length / 2;
    return speeds.length % 2 == 1 ? speeds[mid] : (speeds[mid - 1] + speeds[mid]) / 2;
  }

  private double phase(String name, String field) {
    return value(summary.path("phases").path(name).path(field));
  }

  private static double value(JsonNode n) {
    return n.isNumber() ? n.doubleValue() : Double.NaN;
  }

  private static double num(List<String> fields, int i) {
    if (i < 0 || i >= fields.size() || fields.get(i).isEmpty()) {
      return Double.NaN;
    }
    try {
      return Double.parseDouble(fields.get(i));
    } catch (NumberFormatException e) {
      return Double.NaN;
    }
  }
}
