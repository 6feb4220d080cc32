package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.FailureReason;
import io.phasemeter.load.report.RunMerge;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every failed request of a whole {@code load run} says why, in every output: the live FAIL line's
 * {@code reason=}, pairs.csv's {@code invalid_reason}, summary.json's {@code failures} (bounded)
 * and report.html's failure table. The server is a small one in this JVM, over real sockets, that
 * fails each request as llama.cpp's server and others do.
 */
class FailureReasonRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** llama.cpp's message when its output does not parse (seen with its random-weight model). */
  private static final String LLAMA =
      "The model produced output that does not match the expected Content-only format";

  private static final String ROLE =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
  private static final String CHUNK =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"text\":\"a\"}]}\n\n";

  private Vertx vertx;
  private HttpServer server;
  private final AtomicLong served = new AtomicLong();
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    vertx = Vertx.vertx();
    server =
        vertx
            .createHttpServer()
            .requestHandler(req -> req.body().onSuccess(b -> answer(req)))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private void answer(HttpServerRequest req) {
    long n = served.getAndIncrement();
    if (req.path().equals("/v1/completions")) {
      // A message of its own for every request: more reasons than summary.json names.
      sse(req, ROLE + CHUNK + errorEvent("slot " + n + " failed"));
      return;
    }
    switch ((int) (n % 6)) {
      case 0 -> sse(req, ROLE + CHUNK + errorEvent(LLAMA));
      case 1 -> sse(req, ROLE + CHUNK + "error: {\"code\":500,\"message\":\"older shape\"}\n\n");
      case 2 ->
          sse(
              req,
              ROLE
                  + CHUNK
                  + errorEvent(
                      "\\u001b[2J\\r\\nfake, \\\"quoted\\\" line\\u0000 " + "z".repeat(300)));
      case 3 -> sse(req, ROLE + CHUNK);
      case 4 ->
          req.response()
              .setStatusCode(500)
              .putHeader("content-type", "application/json")
              .end(
                  "{\"error\":{\"code\":500,\"message\":\"slot crashed\",\"type\":\"server_error\"}}");
      default ->
          req.response()
              .setStatusCode(400)
              .putHeader("content-type", "application/json")
              .end("{\"object\":\"error\",\"message\":\"context too long\",\"code\":400}");
    }
  }

  private static String errorEvent(String message) {
    return "data: {\"error\":{\"code\":500,\"message\":\""
        + message
        + "\",\"type\":\"server_error\"}}\n\n";
  }

  private static void sse(HttpServerRequest req, String body) {
    // As llama.cpp's server: the stream ends after the error, without [DONE].
    req.response().putHeader("content-type", "text/event-stream").end(body);
  }

  private int run(Path out, String... extra) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + server.actualPort(),
                "--model",
                "m",
                // Open model: the number sent does not depend on how fast a busy machine answers.
                "--rate",
                "30",
                "--duration",
                "1s",
                "--out",
                out.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    return LoadMain.commandLine(new PrintWriter(this.out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(args));
  }

  /** pairs.csv's class and invalid_reason of every row; each row must be one line. */
  private static List<List<String>> classAndReason(Path run) throws Exception {
    List<String> lines = Files.readAllLines(run.resolve("pairs.csv"));
    List<String> header = RunMerge.splitCsv(lines.get(0));
    int cls = header.indexOf("class");
    int reason = header.indexOf("invalid_reason");
    List<List<String>> rows = new ArrayList<>();
    for (String line : lines.subList(1, lines.size())) {
      List<String> f = RunMerge.splitCsv(line);
      assertThat(f).as(line).hasSameSizeAs(header);
      rows.add(List.of(f.get(cls), f.get(reason)));
    }
    return rows;
  }

  @Test
  void everyFailureOfAChatRunSaysWhyInEveryOutput() throws Exception {
    Path run = dir.resolve("chat");
    assertThat(run(run, "--api", "chat", "--output-tokens", "4")).as(out + "\n" + err).isEqualTo(4);
    String cut =
        "an error event: fake, \"quoted\" line "
            + "z"
                .repeat(FailureReason.MAX_CHARS - "an error event: fake, \"quoted\" line ".length())
            + "\u2026";
    Set<List<String>> expected =
        Set.of(
            List.of("STREAM_ERROR", "an error event: " + LLAMA),
            List.of("STREAM_ERROR", "an error event: older shape"),
            List.of("STREAM_ERROR", cut),
            List.of("STREAM_ERROR", "the stream ended without [DONE]"),
            List.of("HTTP_5XX", "HTTP 500: slot crashed"),
            List.of("HTTP_4XX", "HTTP 400: context too long"));
    List<List<String>> rows = classAndReason(run);
    assertThat(rows.size()).as(out + "\n" + err).isGreaterThanOrEqualTo(6);
    assertThat(new HashSet<>(rows)).isEqualTo(expected);

    JsonNode failures = JSON.readTree(run.resolve("summary.json").toFile()).get("failures");
    JsonNode requests = JSON.readTree(run.resolve("summary.json").toFile()).get("requests");
    assertThat(failures.get("failed").asLong())
        .isEqualTo(requests.get("errors").asLong())
        .isEqualTo(rows.size());
    assertThat(failures.get("limit").asInt()).isEqualTo(10);
    Set<List<String>> named = new HashSet<>();
    long sum = 0;
    for (JsonNode r : failures.get("reasons")) {
      named.add(List.of(r.get("class").asText(), r.get("reason").asText()));
      sum += r.get("count").asLong();
      assertThat(r.get("first_trace_id").asText()).matches("[0-9a-f]{32}");
    }
    assertThat(named).isEqualTo(expected);
    assertThat(sum).isEqualTo(rows.size());
    assertThat(failures.get("other").get("count").asLong()).isZero();

    // The FAIL lines: at most 10 an interval, of whichever requests failed first, so which
    // reasons they show depends on the order the answers came in; each shows one of the run's.
    List<List<String>> failLines =
        out.toString()
            .lines()
            .filter(l -> l.startsWith("  FAIL trace="))
            .map(
                l ->
                    List.of(
                        l.substring(l.indexOf(" class=") + 7, l.indexOf(" status=")),
                        l.substring(l.indexOf(" reason=") + 8)))
            .toList();
    assertThat(failLines).as(out.toString()).isNotEmpty();
    assertThat(expected).containsAll(failLines);
    assertThat(out.toString()).doesNotContain("\u001b");
    String html = Files.readString(run.resolve("report.html"));
    assertThat(html)
        .contains("<section id=\"failures\">")
        .contains(LLAMA)
        .contains("the stream ended without [DONE]")
        .contains("fake, &quot;quoted&quot; line");
  }

  @Test
  void aCompletionsRunNamesTheTenMostFrequentReasonsAndCountsTheRest() throws Exception {
    Path run = dir.resolve("completions");
    assertThat(run(run, "--api", "completions", "--input-tokens", "8", "--output-tokens", "4"))
        .as(out + "\n" + err)
        .isEqualTo(4);
    List<List<String>> rows = classAndReason(run);
    assertThat(rows.size()).isGreaterThan(10);
    for (List<String> r : rows) {
      assertThat(r.get(0)).isEqualTo("STREAM_ERROR");
      assertThat(r.get(1)).matches("an error event: slot \\d+ failed");
    }
    long distinct = new HashSet<>(rows).size();
    JsonNode failures = JSON.readTree(run.resolve("summary.json").toFile()).get("failures");
    assertThat(failures.get("reasons")).hasSize(10);
    long named = 0;
    for (JsonNode r : failures.get("reasons")) {
      named += r.get("count").asLong();
    }
    assertThat(failures.get("other").get("count").asLong()).isEqualTo(rows.size() - named);
    assertThat(failures.get("other").get("reasons").asLong()).isEqualTo(distinct - 10);
    assertThat(Files.readString(run.resolve("report.html")))
        .contains("other (" + (distinct - 10) + " more reasons)");
  }
}
