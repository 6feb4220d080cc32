package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Whole {@code load run --api responses|embeddings} runs against a small server in this JVM that
 * answers in vLLM's formats, without the proxy (the client alone; {@link ApiProxyJoinTest} goes
 * through it): what summary.json, pairs.csv and the exit code say.
 */
class ApiRunScriptedTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx vertx;
  private HttpServer server;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  /** What the server answers on /v1/responses: {@code completed}, {@code failed}, or no end. */
  private volatile String ending = "completed";

  @BeforeEach
  void start() throws Exception {
    vertx = Vertx.vertx();
    server =
        vertx
            .createHttpServer()
            .requestHandler(req -> req.body().onSuccess(b -> answer(req, b.toJsonObject())))
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private void answer(HttpServerRequest req, JsonObject body) {
    switch (req.path()) {
      case "/v1/responses" -> responses(req, body);
      case "/v1/embeddings" -> {
        int n = body.getJsonArray("input").size();
        req.response()
            .putHeader("content-type", "application/json")
            .end(
                "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"embedding\":[0.1,0.2],"
                    + "\"index\":0}],\"model\":\"m\",\"usage\":{\"prompt_tokens\":"
                    + n
                    + ",\"total_tokens\":"
                    + n
                    + ",\"completion_tokens\":0}}");
      }
      default -> req.response().setStatusCode(404).end();
    }
  }

  private void responses(HttpServerRequest req, JsonObject body) {
    int max = body.getInteger("max_output_tokens");
    String usage = "{\"input_tokens\":17,\"output_tokens\":" + max + ",\"total_tokens\":0}";
    if (!body.getBoolean("stream")) {
      req.response()
          .putHeader("content-type", "application/json")
          .end(
              "{\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":"
                  + "{\"reason\":\"max_output_tokens\"},\"usage\":"
                  + usage
                  + ",\"error\":null}");
      return;
    }
    StringBuilder s = new StringBuilder();
    int seq = 0;
    s.append(event("response.created", seq++, "\"response\":{\"status\":\"in_progress\"}"));
    for (int i = 0; i < max; i++) {
      s.append(event("response.output_text.delta", seq++, "\"delta\":\"t" + i + "\""));
    }
    switch (ending) {
      case "completed" ->
          s.append(
              event(
                  "response.completed",
                  seq,
                  "\"response\":{\"status\":\"completed\",\"usage\":" + usage + "}"));
      case "failed" ->
          s.append(
              event(
                  "response.failed",
                  seq,
                  "\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\"}}"));
      default -> {} // no terminal event
    }
    req.response().putHeader("content-type", "text/event-stream").end(s.toString());
  }

  private static String event(String type, int seq, String fields) {
    return "event: "
        + type
        + "\ndata: {\"type\":\""
        + type
        + "\",\"sequence_number\":"
        + seq
        + ","
        + fields
        + "}\n\n";
  }

  private int run(String... extra) {
    List<String> args =
        new java.util.ArrayList<>(
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
                "--out",
                dir.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(args));
  }

  private JsonNode summary() throws Exception {
    return JSON.readTree(dir.resolve("summary.json").toFile());
  }

  private List<List<String>> csv() throws Exception {
    return Files.readAllLines(dir.resolve("pairs.csv")).stream()
        .map(io.phasemeter.load.report.RunMerge::splitCsv)
        .toList();
  }

  @Test
  void aStreamedResponsesRunMeasuresTtftTpotAndItl() throws Exception {
    assertThat(run("--api", "responses", "--output-tokens", "5")).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.get("api").asText()).isEqualTo("responses");
    assertThat(s.get("conditions").get("api").asText()).isEqualTo("responses");
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    long ok = s.get("requests").get("ok").asLong();
    assertThat(ok).isPositive();
    assertThat(s.get("phases").get("client_ttft").get("count").asLong()).isEqualTo(ok);
    assertThat(s.get("phases").get("tpot").get("count").asLong()).isEqualTo(ok);
    // Five deltas a request: four gaps each.
    assertThat(s.get("phases").get("itl").get("count").asLong()).isEqualTo(4 * ok);
    assertThat(s.get("total_output_tokens").asLong()).isEqualTo(5 * ok);
    assertThat(s.has("not_applicable")).isFalse();
  }

  @Test
  void aWholeIncompleteResponseIsASuccess() throws Exception {
    assertThat(run("--api", "responses", "--no-stream", "--output-tokens", "3"))
        .as(out + "\n" + err)
        .isZero();
    JsonNode s = summary();
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    assertThat(s.get("conditions").get("streaming").asBoolean()).isFalse();
    assertThat(s.get("phases").get("tpot").get("count").asLong()).isZero();
  }

  @Test
  void failedOrUnfinishedResponseStreamsAreErrorsAndTheRunIsInvalid() throws Exception {
    for (String end : List.of("failed", "none")) {
      ending = end;
      assertThat(run("--api", "responses", "--output-tokens", "2")).as(end).isEqualTo(4);
      JsonNode s = summary();
      assertThat(s.get("requests").get("ok").asLong()).as(end).isZero();
      assertThat(s.get("phases").get("client_ttft").get("count").asLong()).isZero();
      List<List<String>> rows = csv();
      int cls = rows.get(0).indexOf("class");
      int reason = rows.get(0).indexOf("invalid_reason");
      for (List<String> r : rows.subList(1, rows.size())) {
        assertThat(r.get(cls)).isEqualTo("STREAM_ERROR");
        assertThat(r.get(reason))
            .isEqualTo(
                end.equals("failed")
                    ? "response.failed (server_error)"
                    : "the stream ended without response.completed, response.incomplete or"
                        + " response.failed");
      }
    }
  }

  @Test
  void anEmbeddingsRunHasExactInputsAndNoTokenFigures() throws Exception {
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: embed\n    quantile: 0.95\n    window: 1m\n"
            + "    limits_ms: {client_ttft: 1000, tpot: 100, client_total: 60000}\n"
            + "    max_error_rate: 0.01\n    min_join_coverage: 0\n");
    int code = run("--api", "embeddings", "--input-tokens", "64", "--budgets", budgets.toString());
    assertThat(code).as(out + "\n" + err).isZero();
    JsonNode s = summary();
    assertThat(s.get("api").asText()).isEqualTo("embeddings");
    assertThat(s.get("requests").get("errors").asLong()).isZero();
    assertThat(s.get("requests").get("ok").asLong()).isPositive();
    assertThat(s.get("conditions").get("streaming").asBoolean()).isFalse();
    assertThat(s.get("conditions").get("workload").asText())
        .isEqualTo("embeddings, 64 tokens in, whole responses");
    for (String name : List.of("client_ttft", "ttft_envelope", "server_ttft", "tpot", "itl")) {
      assertThat(s.get("phases").get(name).isNull()).as(name).isTrue();
    }
    assertThat(s.get("phases").get("client_total").get("count").asLong())
        .isEqualTo(s.get("requests").get("ok").asLong());
    assertThat(s.get("total_output_tokens").isNull()).isTrue();
    for (JsonNode b : s.get("budgets")) {
      switch (b.get("phase").asText()) {
        case "client_ttft", "tpot" -> {
          assertThat(b.get("breached").isNull()).isTrue();
          assertThat(b.get("not_applicable").asText()).startsWith("embeddings generate no tokens");
        }
        default -> assertThat(b.get("breached").asBoolean()).as(b.toString()).isFalse();
      }
    }
    List<List<String>> rows = csv();
    int ttft = rows.get(0).indexOf("client_ttft_ms");
    int tpot = rows.get(0).indexOf("tpot_ms");
    int bucket = rows.get(0).indexOf("bucket");
    for (List<String> r : rows.subList(1, rows.size())) {
      assertThat(r.get(ttft)).isEmpty();
      assertThat(r.get(tpot)).isEmpty();
      assertThat(r.get(bucket)).isEqualTo("64");
    }
    assertThat(out.toString()).contains("not applicable (embeddings generate no tokens");
    assertThat(Files.readString(dir.resolve("report.html"))).contains("not applicable");
  }

  @Test
  void streamedEmbeddingsAreRefusedBeforeAnythingIsSent() {
    assertThat(run("--api", "embeddings", "--stream")).isEqualTo(2);
    assertThat(err.toString())
        .isEqualTo(
            "phasemeter load: --stream cannot go with --api embeddings: embeddings are never"
                + " streamed"
                + System.lineSeparator());
    assertThat(dir.resolve("summary.json")).doesNotExist();
  }
}
