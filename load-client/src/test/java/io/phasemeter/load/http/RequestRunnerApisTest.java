package io.phasemeter.load.http;

import static io.phasemeter.load.http.RequestRunnerSimulatorTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.RequestSpec;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.junit5.VertxExtension;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The runner on {@code /v1/responses} and {@code /v1/embeddings}, against a scripted backend that
 * answers exactly what each test writes: what succeeds, what fails, and what each figure is.
 */
@ExtendWith(VertxExtension.class)
class RequestRunnerApisTest {
  private static final String TRACE = "0000000000000007000000000000012f";

  private Vertx vertx;
  private HttpServer backend;
  private RequestRunner runner;
  private final List<Long> itl = new CopyOnWriteArrayList<>();
  private final AtomicReference<HttpServerRequest> seen = new AtomicReference<>();
  private volatile Handler<HttpServerRequest> script;
  private int seq;

  @BeforeEach
  void start(Vertx vertx) throws Exception {
    this.vertx = vertx;
    backend =
        await(
            vertx
                .createHttpServer()
                .requestHandler(
                    req -> {
                      seen.set(req);
                      req.body().onSuccess(b -> script.handle(req));
                    })
                .listen(0, "127.0.0.1"));
    runner =
        new RequestRunner(
            vertx,
            URI.create("http://127.0.0.1:" + backend.actualPort()),
            2,
            Duration.ofSeconds(30),
            itl::add);
  }

  @AfterEach
  void stop() throws Exception {
    await(runner.close());
    await(backend.close());
  }

  // ---------------------------------------------------------------- responses, streamed

  @Test
  void aCompletedResponseStreamSucceedsAndTimesEveryDelta() throws Exception {
    String stream = opening() + delta("a") + delta("b") + delta("c") + terminal("completed", 12, 3);
    script =
        req -> {
          HttpServerResponse res = req.response();
          res.setChunked(true).putHeader("content-type", "text/event-stream");
          // One write per byte: events reach the client split at every position.
          writeSlowly(res, stream, 0);
        };
    ClientResult r = run(responses(true));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.invalidReason()).isNull();
    assertThat(r.usagePromptTokens()).isEqualTo(12);
    assertThat(r.usageCompletionTokens()).isEqualTo(3);
    // Three content events: TTFT at the first delta, never at response.created; two gaps.
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(r.ttfbNanos()).isLessThan(r.totalNanos());
    assertThat(r.itlCount()).isEqualTo(2);
    assertThat(itl).hasSize(2);
    assertThat(r.tpotNanos()).isNotNegative();
    assertThat(seen.get().path()).isEqualTo("/v1/responses");
    assertThat(seen.get().getHeader("accept")).isEqualTo("text/event-stream");
  }

  @Test
  void anIncompleteResponseStreamIsASuccessAtTheLength() throws Exception {
    script =
        req ->
            sse(
                req.response(),
                opening()
                    + delta("a")
                    + delta("b")
                    + event(
                        "response.incomplete",
                        "\"response\":{\"object\":\"response\",\"status\":\"incomplete\","
                            + "\"incomplete_details\":{\"reason\":\"max_output_tokens\"},"
                            + "\"usage\":{\"input_tokens\":9,\"output_tokens\":2}}"));
    ClientResult r = run(responses(true));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.usageCompletionTokens()).isEqualTo(2);
    assertThat(r.itlCount()).isEqualTo(1);
  }

  @Test
  void aFailedResponseStreamIsAStreamErrorAndKeepsNoGaps() throws Exception {
    script =
        req ->
            sse(
                req.response(),
                opening()
                    + delta("a")
                    + delta("b")
                    + event(
                        "response.failed",
                        "\"response\":{\"object\":\"response\",\"status\":\"failed\","
                            + "\"error\":{\"code\":\"server_error\",\"message\":\"died\"}}"));
    ClientResult r = run(responses(true));
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.ok()).isFalse();
    assertThat(r.invalidReason()).isEqualTo("response.failed (server_error): died");
    assertThat(r.itlCount()).isZero();
    assertThat(itl).isEmpty();
  }

  @Test
  void anErrorEventIsAStreamError() throws Exception {
    script =
        req ->
            sse(
                req.response(),
                opening()
                    + delta("a")
                    + event("error", "\"code\":\"server_error\",\"message\":\"died\""));
    ClientResult r = run(responses(true));
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.invalidReason()).isEqualTo("an error event (server_error): died");
  }

  @Test
  void aResponseStreamWithoutATerminalEventIsAStreamError() throws Exception {
    // A chat stream's end: of no meaning here, and no terminal event follows.
    script = req -> sse(req.response(), opening() + delta("a") + delta("b") + "data: [DONE]\n\n");
    ClientResult r = run(responses(true));
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.invalidReason()).startsWith("the stream ended without response.completed");
    assertThat(r.ttftNanos()).isPositive();
    assertThat(itl).isEmpty();
  }

  @Test
  void anHttpErrorOnResponsesIsAnHttpError() throws Exception {
    script =
        req ->
            req.response()
                .setStatusCode(400)
                .putHeader("content-type", "application/json")
                .end("{\"error\":{\"message\":\"bad\",\"code\":\"invalid_request\"}}");
    assertThat(run(responses(true)).error()).isEqualTo(ErrorClass.HTTP_4XX);
  }

  // ---------------------------------------------------------------- responses, whole

  @Test
  void aWholeCompletedOrIncompleteResponseSucceedsWithItsUsage() throws Exception {
    for (String status : List.of("completed", "incomplete")) {
      script = req -> json(req.response(), responseObject(status, "null", 11, 4));
      ClientResult r = run(responses(false));
      assertThat(r.error()).as(status).isEqualTo(ErrorClass.NONE);
      assertThat(r.usagePromptTokens()).isEqualTo(11);
      assertThat(r.usageCompletionTokens()).isEqualTo(4);
      assertThat(r.ttftNanos()).isEqualTo(r.totalNanos());
      assertThat(r.tpotNanos()).isEqualTo(-1);
      assertThat(seen.get().getHeader("accept")).isEqualTo("application/json");
    }
  }

  @Test
  void aWholeFailedOrUnfinishedResponseIsNeverASuccess() throws Exception {
    script =
        req ->
            json(
                req.response(),
                responseObject("failed", "{\"code\":\"server_error\",\"message\":\"x\"}", 11, 0));
    ClientResult failed = run(responses(false));
    assertThat(failed.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(failed.invalidReason()).isEqualTo("response failed (server_error): x");

    script = req -> json(req.response(), responseObject("in_progress", "null", 11, 0));
    ClientResult unfinished = run(responses(false));
    assertThat(unfinished.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(unfinished.invalidReason())
        .isEqualTo("response status in_progress, not completed or incomplete");

    script = req -> json(req.response(), "{\"object\":\"response\",\"output\":[]}");
    assertThat(run(responses(false)).invalidReason()).isEqualTo("response body has no status");

    script = req -> json(req.response(), "{not json");
    assertThat(run(responses(false)).error()).isEqualTo(ErrorClass.INVALID);
  }

  // ---------------------------------------------------------------- embeddings

  @Test
  void anEmbeddingWithTheExactInputSucceedsAndHasNoTokenFigures() throws Exception {
    script = req -> json(req.response(), embeddingsBody(8, ""));
    ClientResult r = run(embeddings(8));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.usagePromptTokens()).isEqualTo(8);
    // Nothing is generated: no first token, no time per token, no gaps, no output tokens.
    assertThat(r.ttftNanos()).isEqualTo(-1);
    assertThat(r.tpotNanos()).isEqualTo(-1);
    assertThat(r.itlCount()).isZero();
    assertThat(r.usageCompletionTokens()).isEqualTo(-1);
    assertThat(r.maxTokens()).isZero();
    assertThat(r.totalNanos()).isPositive();
    assertThat(seen.get().path()).isEqualTo("/v1/embeddings");
    assertThat(seen.get().getHeader("accept")).isEqualTo("application/json");
  }

  @Test
  void anEmbeddingWithAnotherInputLengthIsInvalid() throws Exception {
    script = req -> json(req.response(), embeddingsBody(7, ""));
    ClientResult r = run(embeddings(8));
    assertThat(r.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(r.invalidReason()).isEqualTo("prompt_tokens 7 != prompt tokens sent 8");

    script = req -> json(req.response(), "{\"object\":\"list\",\"data\":[{\"embedding\":[0.1]}]}");
    assertThat(run(embeddings(8)).invalidReason()).isEqualTo("no usage in the response");
  }

  @Test
  void anEmbeddingsAnswerWithoutAnEmbeddingOrWithAnErrorIsNeverASuccess() throws Exception {
    script =
        req ->
            json(
                req.response(),
                "{\"object\":\"list\",\"data\":[],\"usage\":{\"prompt_tokens\":8,"
                    + "\"total_tokens\":8}}");
    assertThat(run(embeddings(8)).invalidReason()).isEqualTo("no embedding in the response");

    script = req -> json(req.response(), embeddingsBody(8, ",\"error\":{\"message\":\"x\"}"));
    assertThat(run(embeddings(8)).invalidReason()).isEqualTo("response body carries an error: x");

    script = req -> sse(req.response(), "data: " + embeddingsBody(8, "") + "\n\ndata: [DONE]\n\n");
    ClientResult streamed = run(embeddings(8));
    assertThat(streamed.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(streamed.invalidReason())
        .isEqualTo("an event stream answered an embeddings request");

    script = req -> req.response().setStatusCode(503).end();
    assertThat(run(embeddings(8)).error()).isEqualTo(ErrorClass.HTTP_5XX);
  }

  // ---------------------------------------------------------------- fixtures

  private String event(String type, String fields) {
    return "event: "
        + type
        + "\ndata: {\"type\":\""
        + type
        + "\",\"sequence_number\":"
        + seq++
        + (fields.isEmpty() ? "" : "," + fields)
        + "}\n\n";
  }

  private String opening() {
    String created =
        "\"response\":{\"object\":\"response\",\"status\":\"in_progress\",\"usage\":null}";
    return event("response.created", created)
        + event("response.in_progress", created)
        + event("response.output_item.added", "\"output_index\":0,\"item\":{}")
        + event("response.content_part.added", "\"output_index\":0,\"content_index\":0");
  }

  private String delta(String text) {
    return event(
        "response.output_text.delta",
        "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"" + text + "\"");
  }

  private String terminal(String status, int in, int out) {
    return event("response.output_text.done", "\"text\":\"abc\"")
        + event("response.content_part.done", "\"part\":{}")
        + event("response.output_item.done", "\"item\":{}")
        + event("response." + status, "\"response\":" + responseObject(status, "null", in, out));
  }

  private static String responseObject(String status, String error, int in, int out) {
    return "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\""
        + status
        + "\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
        + "\"text\":\"abcd\"}]}],\"usage\":{\"input_tokens\":"
        + in
        + ",\"output_tokens\":"
        + out
        + ",\"total_tokens\":"
        + (in + out)
        + "},\"error\":"
        + error
        + "}";
  }

  private static String embeddingsBody(int promptTokens, String extra) {
    return "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"embedding\":[0.1,-0.2,"
        + "0.3],\"index\":0}],\"model\":\"m\",\"usage\":{\"prompt_tokens\":"
        + promptTokens
        + ",\"total_tokens\":"
        + promptTokens
        + ",\"completion_tokens\":0}"
        + extra
        + "}";
  }

  private static RequestSpec responses(boolean stream) {
    return new RequestSpec(
        Api.RESPONSES, "/v1/responses", Buffer.buffer("{}"), "responses", -1, 16, stream, null);
  }

  private static RequestSpec embeddings(int promptTokens) {
    return new RequestSpec(
        Api.EMBEDDINGS, "/v1/embeddings", Buffer.buffer("{}"), "8", promptTokens, 0, false, null);
  }

  private void writeSlowly(HttpServerResponse res, String text, int at) {
    if (at == text.length()) {
      res.end();
      return;
    }
    res.write(text.substring(at, at + 1)).onComplete(v -> writeSlowly(res, text, at + 1));
  }

  private static void sse(HttpServerResponse res, String body) {
    res.putHeader("content-type", "text/event-stream").end(body);
  }

  private static void json(HttpServerResponse res, String body) {
    res.putHeader("content-type", "application/json").end(body);
  }

  private ClientResult run(RequestSpec spec) throws Exception {
    return await(
        runner.run(1, spec, TRACE, "00-" + TRACE + "-00f067aa0ba902b7-01", 0, System.nanoTime()));
  }
}
