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

/** The runner against a scripted backend that answers exactly what each test writes. */
@ExtendWith(VertxExtension.class)
class RequestRunnerScriptedTest {
  private static final String TRACE = "0000000000000007000000000000012f";
  private static final String ROLE =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
  private static final String DONE = "data: [DONE]\n\n";

  private Vertx vertx;
  private HttpServer backend;
  private RequestRunner runner;
  private final List<Long> itl = new CopyOnWriteArrayList<>();
  private final AtomicReference<HttpServerRequest> seen = new AtomicReference<>();
  private volatile Handler<HttpServerRequest> script;

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
    runner = runner("http://127.0.0.1:" + backend.actualPort());
  }

  @AfterEach
  void stop() throws Exception {
    await(runner.close());
    await(backend.close());
  }

  @Test
  void wrongCompletionTokensIsInvalidWithReason() throws Exception {
    script = req -> sse(req.response(), chunk("a") + chunk("b") + usage(10, 298) + DONE);
    ClientResult r = run(spec(10, 300, true));
    assertThat(r.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(r.invalidReason()).isEqualTo("completion_tokens 298 != max_tokens 300");
    assertThat(r.usageCompletionTokens()).isEqualTo(298);
    assertThat(itl).isEmpty();
  }

  @Test
  void wrongPromptTokensIsInvalid() throws Exception {
    script = req -> sse(req.response(), chunk("a") + usage(9, 1) + DONE);
    ClientResult r = run(spec(10, 1, true));
    assertThat(r.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(r.invalidReason()).contains("prompt_tokens 9");
  }

  @Test
  void missingUsageIsInvalidOnlyWhenLengthsAreExact() throws Exception {
    script = req -> sse(req.response(), chunk("a") + chunk("b") + DONE);
    ClientResult exact = run(spec(10, 2, true));
    assertThat(exact.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(exact.invalidReason()).isEqualTo("no usage in the response");
    ClientResult free = run(spec(-1, 2, true));
    assertThat(free.error()).isEqualTo(ErrorClass.NONE);
    assertThat(free.usageCompletionTokens()).isEqualTo(-1);
    // Without usage, n is the number of content events: 2, so one gap.
    assertThat(free.itlCount()).isEqualTo(1);
    assertThat(free.tpotNanos()).isNotNegative();
  }

  @Test
  void aTextPromptWithAnExactOutputIsInvalidWhenTheEngineStopsEarly() throws Exception {
    // A dataset's request: the prompt is text (its tokens are the server's to count), the output
    // is exact (min_tokens = max_tokens, ignore_eos).
    RequestSpec exactOutput =
        new RequestSpec(
            Api.COMPLETIONS,
            "/v1/completions",
            Buffer.buffer("{}"),
            "sharegpt",
            -1,
            300,
            true,
            java.util.Map.of(),
            0,
            true);
    script = req -> sse(req.response(), chunk("a") + usage(57, 298) + DONE);
    ClientResult early = run(exactOutput);
    assertThat(early.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(early.invalidReason()).isEqualTo("completion_tokens 298 != max_tokens 300");

    script = req -> sse(req.response(), chunk("a") + usage(57, 300) + DONE);
    ClientResult exact = run(exactOutput);
    assertThat(exact.error()).isEqualTo(ErrorClass.NONE);
    assertThat(exact.usagePromptTokens()).isEqualTo(57);
    assertThat(exact.promptTokens()).isEqualTo(-1);

    script = req -> sse(req.response(), chunk("a") + DONE);
    assertThat(run(exactOutput).invalidReason()).isEqualTo("no usage in the response");

    // Free text without min_tokens (as chat's): the output is a cap, not checked.
    script = req -> sse(req.response(), chunk("a") + usage(57, 298) + DONE);
    RequestSpec free =
        new RequestSpec(
            Api.COMPLETIONS,
            "/v1/completions",
            Buffer.buffer("{}"),
            "free",
            -1,
            300,
            true,
            java.util.Map.of(),
            0);
    assertThat(free.exactOutput()).isFalse();
    assertThat(run(free).error()).isEqualTo(ErrorClass.NONE);
  }

  @Test
  void wholeBodyWithWrongUsageIsInvalid() throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .end(
                    "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}");
    ClientResult r = run(spec(10, 4, false));
    assertThat(r.error()).isEqualTo(ErrorClass.INVALID);
    assertThat(r.invalidReason()).isEqualTo("completion_tokens 3 != max_tokens 4");
    assertThat(r.ttftNanos()).isEqualTo(r.totalNanos());
  }

  @Test
  void wholeBodyThatIsNotJsonIsInvalid() throws Exception {
    script = req -> req.response().putHeader("content-type", "application/json").end("{not json");
    ClientResult r = run(spec(10, 4, false));
    assertThat(r.error()).isEqualTo(ErrorClass.INVALID);
  }

  @Test
  void errorEventIsStreamError() throws Exception {
    script =
        req ->
            sse(
                req.response(),
                chunk("a")
                    + "data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\n"
                    + DONE);
    ClientResult r = run(spec(-1, 4, true));
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.invalidReason()).isEqualTo("an error event: engine died");
  }

  /**
   * llama.cpp's server fails a stream with {@code data: {"error": {...}}} (older versions: an
   * {@code error:} field), then ends the response without [DONE]: the engine's message is the
   * reason, not the missing [DONE], nor the proxy's event that follows it.
   */
  @Test
  void llamaCppsErrorEventInEitherShapeGivesItsMessage() throws Exception {
    String json =
        "{\"code\":500,\"message\":\"The model produced output that does not match the"
            + " expected Content-only format\",\"type\":\"server_error\"}";
    // Behind the proxy the engine's event comes first, then the proxy's own final error event.
    String proxys =
        "data: {\"error\":{\"message\":\"The upstream reported an error mid-stream and ended its"
            + " response.\",\"type\":\"upstream_error\",\"code\":\"upstream_error\"}}\n\n";
    for (String event :
        List.of(
            "data: {\"error\":" + json + "}\n\n",
            "error: " + json + "\n\n",
            "data: {\"error\":" + json + "}\n\n" + proxys)) {
      script = req -> sse(req.response(), ROLE + chunk("a") + event);
      ClientResult r = run(spec(-1, 4, true));
      assertThat(r.error()).as(event).isEqualTo(ErrorClass.STREAM_ERROR);
      assertThat(r.invalidReason())
          .as(event)
          .isEqualTo(
              "an error event: The model produced output that does not match the expected"
                  + " Content-only format");
    }
  }

  @Test
  void anOverLongMessageWithControlCharactersIsCleanedAndCut() throws Exception {
    // An ANSI colour (removed whole), a line break, a carriage return, a NUL, a bidi override, a
    // tab; then 1 MB.
    String message =
        "\\u001b[31mred\\nnext line\\r\\u0000nul \\u202Eevil\\tend " + "x".repeat(1 << 20);
    script =
        req ->
            sse(
                req.response(),
                chunk("a") + "data: {\"error\":{\"message\":\"" + message + "\"}}\n\n");
    String reason = run(spec(-1, 4, true)).invalidReason();
    assertThat(reason)
        .startsWith("an error event: red next line nul evil end xxx")
        .endsWith("x\u2026")
        .doesNotContainPattern("\\p{Cntrl}|\\p{Cf}");
    assertThat(reason.codePointCount(0, reason.length())).isEqualTo(FailureReason.MAX_CHARS + 1);
  }

  /**
   * An engine that sends an error event and then holds the stream open until the client gives up,
   * or closes the connection: the engine's message is the reason, not the timeout or the reset that
   * followed it.
   */
  @Test
  void anErrorEventThenATimeoutOrAResetKeepsTheEnginesMessage() throws Exception {
    String event = "data: {\"error\":{\"message\":\"slot 0 crashed\",\"code\":500}}\n\n";
    RequestRunner quick =
        new RequestRunner(
            vertx,
            URI.create("http://127.0.0.1:" + backend.actualPort()),
            1,
            Duration.ofMillis(300),
            itl::add);
    try {
      script =
          req ->
              req.response()
                  .setChunked(true)
                  .putHeader("content-type", "text/event-stream")
                  .write(ROLE + chunk("a") + event); // then nothing, the connection kept open
      assertThat(await(quick.run(1, spec(-1, 4, true), TRACE, null, 0, System.nanoTime())))
          .extracting(ClientResult::error, ClientResult::invalidReason)
          .containsExactly(ErrorClass.STREAM_ERROR, "an error event: slot 0 crashed");
      script =
          req ->
              req.response()
                  .setChunked(true)
                  .putHeader("content-type", "text/event-stream")
                  .write(ROLE + chunk("a") + event)
                  .onComplete(v -> req.connection().close());
      assertThat(await(quick.run(2, spec(-1, 4, true), TRACE, null, 0, System.nanoTime())))
          .extracting(ClientResult::error, ClientResult::invalidReason)
          .containsExactly(ErrorClass.STREAM_ERROR, "an error event: slot 0 crashed");
    } finally {
      await(quick.close());
    }
  }

  /** An HTTP error whose body the server cut keeps its class and its status in the reason. */
  @Test
  void anHttpErrorWhoseBodyIsCutKeepsItsStatus() throws Exception {
    script =
        req ->
            req.response()
                .setStatusCode(500)
                .setChunked(true)
                .putHeader("content-type", "application/json")
                .write("{\"error\":{\"message\":\"slot")
                .onComplete(v -> req.connection().close());
    for (boolean stream : List.of(true, false)) {
      assertThat(run(spec(10, 4, stream)))
          .extracting(ClientResult::error, ClientResult::status, ClientResult::invalidReason)
          .containsExactly(
              ErrorClass.HTTP_5XX, 500, "HTTP 500 (body cut: connection closed mid-response)");
    }
  }

  /**
   * Failures with the same reason share one String: the pairs keep every failure's reason for the
   * whole run. The client's own phrases and an engine's cleaned message alike.
   */
  @Test
  void identicalReasonsAreOneString() throws Exception {
    script =
        req ->
            req.response()
                .setStatusCode(503)
                .putHeader("content-type", "application/json")
                .end("{\"error\":{\"message\":\"\\u001b[1mno slot\\u001b[0m available\"}}");
    ClientResult a = run(spec(10, 4, false));
    ClientResult b = run(spec(10, 4, false));
    assertThat(a.invalidReason()).isEqualTo("HTTP 503: no slot available");
    assertThat(b.invalidReason()).isSameAs(a.invalidReason());
    script = req -> sse(req.response(), chunk("a") + usage(10, 1));
    ClientResult c = run(spec(10, 1, true));
    ClientResult d = run(spec(10, 1, true));
    assertThat(c.invalidReason()).isEqualTo("the stream ended without [DONE]");
    assertThat(d.invalidReason()).isSameAs(c.invalidReason());
  }

  /**
   * An engine's message that quotes the request (a validation error's rejected value) or what it
   * generated (llama.cpp's {@code Invalid diff}) keeps neither: a run of 16 or more characters of
   * the request's text becomes [prompt], a quoted span longer than 32 characters '…'. The model's
   * name stays.
   */
  @Test
  void aMessageQuotingThePromptOrTheCompletionKeepsNeither() throws Exception {
    String prompt = "Tell me\\nabout the secret recipe of grandma's \\\"plum\\\" cake, please";
    Buffer body =
        Buffer.buffer(
            "{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"prompt\":\""
                + prompt
                + "\",\"max_tokens\":4,\"stream\":false}");
    RequestSpec spec = new RequestSpec("/v1/completions", body, "b", 10, 4, false);
    script =
        req ->
            req.response()
                .setStatusCode(400)
                .putHeader("content-type", "application/json")
                .end(
                    "{\"error\":{\"message\":\"model meta-llama/Llama-3.1-8B-Instruct rejects"
                        + " input: Tell me about the secret recipe of grandma's \\\"plum\\\""
                        + " cake (3 tokens too many)\"}}");
    assertThat(run(spec).invalidReason())
        .isEqualTo(
            "HTTP 400: model meta-llama/Llama-3.1-8B-Instruct rejects input: [prompt] (3 tokens"
                + " too many)");
    String completion = "I cannot share the recipe, but here is one for an apple pie instead";
    script =
        req ->
            sse(
                req.response(),
                chunk("a")
                    + "data: {\"error\":{\"message\":\"Invalid diff: '"
                    + completion
                    + "' not found at start of 'I can'\"}}\n\n");
    assertThat(run(spec(-1, 4, true)).invalidReason())
        .isEqualTo("an error event: Invalid diff: '\u2026' not found at start of 'I can'");
  }

  @Test
  void streamEndingWithoutDoneIsStreamError() throws Exception {
    script = req -> sse(req.response(), chunk("a") + usage(10, 1));
    ClientResult r = run(spec(10, 1, true));
    assertThat(r.error()).isEqualTo(ErrorClass.STREAM_ERROR);
    assertThat(r.invalidReason()).isEqualTo("the stream ended without [DONE]");
    assertThat(r.ttftNanos()).isPositive();
  }

  @Test
  void anHttpErrorGivesTheMessageOfItsBody() throws Exception {
    record Case(int status, String type, String body, ErrorClass error, String reason) {}
    List<Case> cases =
        List.of(
            new Case(
                500,
                "application/json",
                "{\"error\":{\"code\":500,\"message\":\"failed to decode\",\"type\":\"server_error\"}}",
                ErrorClass.HTTP_5XX,
                "HTTP 500: failed to decode"),
            // vLLM's older error body: the message at the top.
            new Case(
                400,
                "application/json",
                "{\"object\":\"error\",\"message\":\"max_tokens is too large\",\"code\":400}",
                ErrorClass.HTTP_4XX,
                "HTTP 400: max_tokens is too large"),
            new Case(
                404,
                "application/json",
                "{\"detail\":\"Not Found\"}",
                ErrorClass.HTTP_4XX,
                "HTTP 404: Not Found"),
            new Case(
                503,
                "text/plain",
                "upstream connect error\r\nor disconnect",
                ErrorClass.HTTP_5XX,
                "HTTP 503: upstream connect error or disconnect"),
            new Case(502, "text/html", "<html>bad gateway</html>", ErrorClass.HTTP_5XX, "HTTP 502"),
            new Case(
                429,
                "application/json",
                "{\"error\":{\"message\":\"" + "y".repeat(70_000) + "\"}}",
                ErrorClass.HTTP_4XX,
                "HTTP 429 (error body over 64 KiB, not read)"));
    for (Case c : cases) {
      script =
          req ->
              req.response()
                  .setStatusCode(c.status())
                  .putHeader("content-type", c.type())
                  .end(c.body());
      for (boolean stream : List.of(true, false)) {
        ClientResult r = run(spec(10, 4, stream));
        assertThat(r.error()).as(c.body()).isEqualTo(c.error());
        assertThat(r.status()).isEqualTo(c.status());
        assertThat(r.invalidReason()).as(c.type()).isEqualTo(c.reason());
      }
    }
  }

  @Test
  void aMessageQuotingTheRequestsKeyKeepsItOut() throws Exception {
    String key = "my-secret-key-0123456789";
    script =
        req ->
            req.response()
                .setStatusCode(401)
                .putHeader("content-type", "application/json")
                .end(
                    "{\"error\":{\"message\":\"Incorrect API key provided: "
                        + req.getHeader("authorization").substring(7)
                        + "; also sk-proj-abcdefghijklmnop\"}}");
    ClientResult r =
        run(spec(10, 4, false).withHeaders(java.util.Map.of("authorization", "Bearer " + key)));
    assertThat(r.error()).isEqualTo(ErrorClass.HTTP_4XX);
    assertThat(r.invalidReason())
        .isEqualTo("HTTP 401: Incorrect API key provided: [key]; also sk-[key]");
  }

  @Test
  void aTimeoutSaysWhereTheRequestStood() throws Exception {
    RequestRunner quick =
        new RequestRunner(
            vertx,
            URI.create("http://127.0.0.1:" + backend.actualPort()),
            1,
            Duration.ofMillis(300),
            itl::add);
    try {
      script = req -> {}; // never answers
      assertThat(await(quick.run(1, spec(10, 4, true), TRACE, null, 0, System.nanoTime())))
          .extracting(ClientResult::error, ClientResult::invalidReason)
          .containsExactly(ErrorClass.TIMEOUT, "timed out before the response headers");
      script =
          req ->
              req.response()
                  .setChunked(true)
                  .putHeader("content-type", "text/event-stream")
                  .write(ROLE); // headers and the role chunk, then nothing
      assertThat(await(quick.run(2, spec(10, 4, true), TRACE, null, 0, System.nanoTime())))
          .extracting(ClientResult::error, ClientResult::invalidReason)
          .containsExactly(ErrorClass.TIMEOUT, "timed out before the response ended");
    } finally {
      await(quick.close());
    }
  }

  @Test
  void eventsSplitAcrossWritesWithCrlfAndCommentsAreParsed() throws Exception {
    String stream =
        (": ping\n\n"
                + ROLE
                + chunk("a")
                + ": ping\n\n"
                + chunk("b")
                + chunk("c")
                + usage(10, 3)
                + DONE)
            .replace("\n", "\r\n");
    script =
        req -> {
          HttpServerResponse res = req.response();
          res.setChunked(true).putHeader("content-type", "text/event-stream");
          // One write per byte, each after the previous one: the client sees many small reads.
          writeSlowly(res, stream, 0);
        };
    ClientResult r = run(spec(10, 3, true));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    assertThat(r.itlCount()).isEqualTo(2);
    assertThat(itl).hasSize(2);
    assertThat(r.usageCompletionTokens()).isEqualTo(3);
    assertThat(r.ttftNanos()).isGreaterThanOrEqualTo(r.ttfbNanos()).isLessThan(r.totalNanos());
  }

  @Test
  void roleChunkEosChunkAndUsageChunkAreNotContentButReasoningAndToolCallsAre() throws Exception {
    String eos = "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n";
    String reasoning =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n";
    String tool =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n";
    script = req -> sse(req.response(), ROLE + reasoning + tool + eos + usage(-1, 0) + DONE);
    ClientResult r = run(spec(-1, 8, true));
    assertThat(r.error()).isEqualTo(ErrorClass.NONE);
    // Two content events: reasoning and the tool call.
    assertThat(r.itlCount()).isEqualTo(1);
  }

  @Test
  void requestCarriesTraceparentAndExtraHeadersAndServerTimingIsKept() throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .putHeader("Server-Timing", "queue;dur=12.5, generation;dur=100")
                .end("{\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
    RequestSpec spec = spec(10, 4, false).withHeaders(java.util.Map.of("x-tenant", "t1"));
    ClientResult r = run(spec);
    assertThat(r.ok()).isTrue();
    assertThat(r.serverTiming()).isEqualTo("queue;dur=12.5, generation;dur=100");
    HttpServerRequest req = seen.get();
    assertThat(req.getHeader("traceparent")).isEqualTo("00-" + TRACE + "-00f067aa0ba902b7-01");
    assertThat(req.getHeader("x-tenant")).isEqualTo("t1");
    assertThat(req.getHeader("content-type")).isEqualTo("application/json");
    assertThat(req.path()).isEqualTo("/v1/completions");
  }

  @Test
  void baseUrlPathIsKeptAndATrailingV1IsNotDoubled() throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .end("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
    RequestRunner prefixed = runner("http://127.0.0.1:" + backend.actualPort() + "/gw/v1/");
    try {
      assertThat(await(prefixed.run(1, spec(10, 4, false), TRACE, null, 0, System.nanoTime())).ok())
          .isTrue();
      assertThat(seen.get().path()).isEqualTo("/gw/v1/completions");
    } finally {
      await(prefixed.close());
    }
  }

  @Test
  void connectionIsKeptAlive() throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .end("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
    run(spec(10, 4, false));
    var first = seen.get().connection();
    run(spec(10, 4, false));
    assertThat(seen.get().connection()).isSameAs(first);
  }

  @Test
  void aResponseSayingConnectionCloseIsNotReused() throws Exception {
    assertNextRequestOnANewConnectionAfter("connection", "close");
  }

  @Test
  void aServerKeepAliveTimeoutIsHonoured() throws Exception {
    assertNextRequestOnANewConnectionAfter("keep-alive", "timeout=0");
  }

  /** Two requests whose responses carry {@code header: value} go out on two connections. */
  private void assertNextRequestOnANewConnectionAfter(String header, String value)
      throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .putHeader(header, value)
                .end("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
    assertThat(run(spec(10, 4, false)).ok()).isTrue();
    var first = seen.get().connection();
    assertThat(run(spec(10, 4, false)).ok()).isTrue();
    assertThat(seen.get().connection()).isNotSameAs(first);
  }

  @Test
  void anIdleConnectionTheServerClosedIsReplaced() throws Exception {
    script =
        req ->
            req.response()
                .putHeader("content-type", "application/json")
                .end("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
    assertThat(run(spec(10, 4, false)).ok()).isTrue();
    var first = seen.get().connection();
    await(first.close());
    // The client learns of the close from the socket; a request taken before that would fail.
    Thread.sleep(200);
    ClientResult again = run(spec(10, 4, false));
    assertThat(again.ok()).isTrue();
    assertThat(seen.get().connection()).isNotSameAs(first);
  }

  @Test
  void aTimedOutRequestsConnectionIsClosedAndTheNextOneGetsAFreshConnection() throws Exception {
    RequestRunner quick =
        new RequestRunner(
            vertx,
            URI.create("http://127.0.0.1:" + backend.actualPort()),
            1,
            Duration.ofMillis(300),
            itl::add);
    try {
      script = req -> {}; // never answers
      ClientResult stalled =
          await(quick.run(1, spec(10, 4, false), TRACE, null, 0, System.nanoTime()));
      assertThat(stalled.error()).isEqualTo(ErrorClass.TIMEOUT);
      var first = seen.get().connection();
      script =
          req ->
              req.response()
                  .putHeader("content-type", "application/json")
                  .end("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}}");
      // One connection at most: the stalled one must have been given up for this to go through.
      ClientResult next =
          await(quick.run(2, spec(10, 4, false), TRACE, null, 0, System.nanoTime()));
      assertThat(next.ok()).isTrue();
      assertThat(seen.get().connection()).isNotSameAs(first);
    } finally {
      await(quick.close());
    }
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

  private static String chunk(String text) {
    return "data: {\"choices\":[{\"index\":0,\"text\":\""
        + text
        + "\",\"finish_reason\":null}]}\n\n";
  }

  private static String usage(int prompt, int completion) {
    String p = prompt < 0 ? "" : "\"prompt_tokens\":" + prompt + ",";
    return "data: {\"choices\":[],\"usage\":{"
        + p
        + "\"completion_tokens\":"
        + completion
        + "}}\n\n";
  }

  private static RequestSpec spec(int promptTokens, int maxTokens, boolean stream) {
    return new RequestSpec(
        "/v1/completions", Buffer.buffer("{}"), "b", promptTokens, maxTokens, stream);
  }

  private RequestRunner runner(String url) {
    return new RequestRunner(vertx, URI.create(url), 2, Duration.ofSeconds(30), itl::add);
  }

  private ClientResult run(RequestSpec spec) throws Exception {
    return await(
        runner.run(1, spec, TRACE, "00-" + TRACE + "-00f067aa0ba902b7-01", 0, System.nanoTime()));
  }
}
