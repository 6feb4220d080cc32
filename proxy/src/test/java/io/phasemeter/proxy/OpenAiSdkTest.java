package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.errors.InternalServerException;
import com.openai.errors.NotFoundException;
import com.openai.errors.OpenAIServiceException;
import com.openai.errors.RateLimitException;
import com.openai.errors.UnauthorizedException;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionCreateParams;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Promise;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The official OpenAI Java SDK pointed at the proxy, as a user would: {@code baseUrl =
 * http://proxy/v1}. Successful calls parse into the SDK's own types, streamed and not; failures
 * surface as the SDK's own exception classes with the right status and the proxy's error code.
 * Retries are off so each assertion is about one exchange.
 */
class OpenAiSdkTest extends ProxyTestBase {
  private OpenAIClient sdk;

  @AfterEach
  void closeSdk() {
    if (sdk != null) {
      sdk.close();
    }
  }

  private OpenAIClient sdk() {
    sdk =
        OpenAIOkHttpClient.builder()
            .baseUrl("http://127.0.0.1:" + proxy.port() + "/v1")
            .apiKey("sk-test-not-a-real-key")
            .maxRetries(0)
            .timeout(Duration.ofSeconds(20))
            .build();
    return sdk;
  }

  private void startWithSimulator() throws Exception {
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(4)
                    .withDecodeStepMs(1)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    startProxy(config(sim.port(), 4, null));
  }

  /** A proxy in front of an upstream that answers every request with {@code status} and body. */
  private void startWithUpstreamAnswering(int status, String body) throws Exception {
    int backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .setStatusCode(status)
                                .putHeader("content-type", "application/json")
                                .end(body)));
    startProxy(config(backend, 4, null));
  }

  private static ChatCompletionCreateParams chatParams(String model) {
    return ChatCompletionCreateParams.builder()
        .model(model)
        .addUserMessage("Say hello.")
        .maxTokens(6)
        .build();
  }

  private static String openAiError(String message, String type, String code) {
    return "{\"error\":{\"message\":\""
        + message
        + "\",\"type\":\""
        + type
        + "\",\"param\":null,\"code\":\""
        + code
        + "\"}}";
  }

  @Test
  void chatCompletionParsesIntoTheSdkTypes() throws Exception {
    startWithSimulator();
    ChatCompletion c = sdk().chat().completions().create(chatParams("sim-llama"));
    assertThat(c.choices()).hasSize(1);
    assertThat(c.choices().get(0).message().content()).isPresent();
    assertThat(c.usage()).isPresent();
    assertThat(c.usage().get().completionTokens()).isEqualTo(6);
    assertThat(awaitFinished(1).get(0).outcome()).isEqualTo("success");
  }

  @Test
  void streamedChatCompletionArrivesChunkByChunk() throws Exception {
    startWithSimulator();
    List<ChatCompletionChunk> chunks;
    try (StreamResponse<ChatCompletionChunk> stream =
        sdk().chat().completions().createStreaming(chatParams("sim-llama"))) {
      chunks = stream.stream().collect(Collectors.toList());
    }
    String text =
        chunks.stream()
            .flatMap(ch -> ch.choices().stream())
            .map(choice -> choice.delta().content().orElse(""))
            .collect(Collectors.joining());
    assertThat(text).isNotEmpty();
    assertThat(chunks.stream().flatMap(ch -> ch.choices().stream()))
        .anySatisfy(choice -> assertThat(choice.finishReason()).isPresent());
    // The proxy asked the upstream for usage to count tokens, and removed that chunk again.
    assertThat(chunks).allSatisfy(ch -> assertThat(ch.choices()).isNotEmpty());
    Finished f = awaitFinished(1).get(0);
    assertThat(f.stream()).isTrue();
    assertThat(f.outputTokens()).isEqualTo(6);
  }

  @Test
  void textCompletionsStreamedAndNot() throws Exception {
    startWithSimulator();
    CompletionCreateParams params =
        CompletionCreateParams.builder()
            .model("sim-llama")
            .prompt("Once upon")
            .maxTokens(5)
            .build();
    Completion c = sdk().completions().create(params);
    assertThat(c.choices()).hasSize(1);
    assertThat(c.choices().get(0).text()).isNotEmpty();
    try (StreamResponse<Completion> stream = sdk.completions().createStreaming(params)) {
      String text =
          stream.stream()
              .flatMap(ch -> ch.choices().stream())
              .map(choice -> choice.text())
              .collect(Collectors.joining());
      assertThat(text).isNotEmpty();
    }
    assertThat(awaitFinished(2)).allSatisfy(f -> assertThat(f.outcome()).isEqualTo("success"));
  }

  private OpenAIClient validatingSdk() {
    sdk =
        OpenAIOkHttpClient.builder()
            .baseUrl("http://127.0.0.1:" + proxy.port() + "/v1")
            .apiKey("sk-test-not-a-real-key")
            .maxRetries(0)
            .timeout(Duration.ofSeconds(20))
            .responseValidation(true)
            .build();
    return sdk;
  }

  private static com.openai.models.responses.ResponseCreateParams responseParams(int maxTokens) {
    return com.openai.models.responses.ResponseCreateParams.builder()
        .model("sim-llama")
        .input("Say hello.")
        .maxOutputTokens(maxTokens)
        .build();
  }

  @Test
  void theResponsesApiThroughTheProxyParsesIntoTheSdkTypes() throws Exception {
    startWithSimulator();
    OpenAIClient client = validatingSdk();
    com.openai.models.responses.Response r = client.responses().create(responseParams(6));
    long outputTokens = r.usage().get().outputTokens();
    assertThat(outputTokens).isBetween(1L, 6L);
    // Stored by the engine: retrieved and deleted through the proxy's pass-through.
    assertThat(client.responses().retrieve(r.id()).id()).isEqualTo(r.id());
    client.responses().delete(r.id());

    List<com.openai.models.responses.ResponseStreamEvent> events;
    try (StreamResponse<com.openai.models.responses.ResponseStreamEvent> stream =
        client.responses().createStreaming(responseParams(5))) {
      events = stream.stream().collect(Collectors.toList());
    }
    events.forEach(com.openai.models.responses.ResponseStreamEvent::validate);
    assertThat(events.get(0).isCreated()).isTrue();
    com.openai.models.responses.ResponseStreamEvent last = events.get(events.size() - 1);
    assertThat(last.isCompleted()).isTrue();
    long deltas =
        events.stream()
            .filter(com.openai.models.responses.ResponseStreamEvent::isOutputTextDelta)
            .count();

    List<Finished> done = awaitFinished(4);
    Finished whole = done.get(0);
    assertThat(whole.outcome()).isEqualTo("success");
    assertThat(whole.outputTokens()).as("the engine's usage").isEqualTo(outputTokens);
    assertThat(done.get(1).outcome()).as("GET /v1/responses/{id}").isEqualTo("success");
    assertThat(done.get(2).outcome()).as("DELETE /v1/responses/{id}").isEqualTo("success");
    Finished streamed = done.get(3);
    assertThat(streamed.stream()).isTrue();
    assertThat(streamed.outcome()).isEqualTo("success");
    assertThat(streamed.outputTokens())
        .isEqualTo(last.asCompleted().response().usage().get().outputTokens());
    assertThat(streamed.ttftNanos()).isPositive();
    if (streamed.outputTokens() > 1) {
      assertThat(streamed.tpotNanos()).isPositive();
    }
    assertThat(deltas).isPositive();
  }

  @Test
  void aResponsesStreamThatFailsIsAFailureForTheSdkAndTheProxy() throws Exception {
    startWithSimulator();
    OpenAIClient faulty =
        validatingSdk()
            .withOptions(
                b ->
                    b.putHeader("x-sim-fault", "error").putHeader("x-sim-fault-after-tokens", "2"));
    List<com.openai.models.responses.ResponseStreamEvent> events;
    try (StreamResponse<com.openai.models.responses.ResponseStreamEvent> stream =
        faulty.responses().createStreaming(responseParams(8))) {
      events = stream.stream().collect(Collectors.toList());
    }
    assertThat(events.get(events.size() - 1).isFailed()).isTrue();
    OpenAIClient erroring = sdk.withOptions(b -> b.putHeader("x-sim-fault", "error_event"));
    try (StreamResponse<com.openai.models.responses.ResponseStreamEvent> stream =
        erroring.responses().createStreaming(responseParams(8))) {
      assertThat(stream.stream().reduce((a, b) -> b).get().isError()).isTrue();
    }
    assertThat(awaitFinished(2))
        .allSatisfy(
            f -> {
              assertThat(f.outcome()).isEqualTo("upstream_error");
              assertThat(f.errorType()).isEqualTo("upstream_error");
            });
    assertIdle();
  }

  @Test
  void embeddingsThroughTheProxyParseIntoTheSdkTypes() throws Exception {
    startWithSimulator();
    com.openai.models.embeddings.CreateEmbeddingResponse e =
        validatingSdk()
            .embeddings()
            .create(
                com.openai.models.embeddings.EmbeddingCreateParams.builder()
                    .model("sim-llama")
                    .input("hello world")
                    .build());
    assertThat(e.data().get(0).embedding()).isNotEmpty();
    Finished f = awaitFinished(1).get(0);
    assertThat(f.outcome()).isEqualTo("success");
    assertThat(f.inputTokens()).isEqualTo(e.usage().promptTokens());
    assertThat(f.ttftNanos()).isEqualTo(-1);
    assertThat(f.phases()).containsKey(io.phasemeter.proxy.pipeline.Phase.QUEUE);
  }

  @Test
  void unknownModelIsTheSdksNotFoundException() throws Exception {
    startWithSimulator();
    NotFoundException e =
        catchThrowableOfType(
            NotFoundException.class,
            () -> sdk().chat().completions().create(chatParams("no-such-model")));
    assertThat(e.statusCode()).isEqualTo(404);
    assertThat(e.code()).contains("model_not_found");
  }

  @Test
  void theProxysOwnKeysAndRateLimitsAreTheSdksOwnExceptions(@TempDir Path dir) throws Exception {
    Path keys = dir.resolve("keys.yaml");
    Files.writeString(
        keys,
        "keys:\n  - {name: sdk, sha256: \""
            + io.phasemeter.proxy.gateway.HashKeyMain.hash("pm-sdk-key")
            + "\", rpm: 1}\n...\n");
    Simulator sim =
        Simulator.start(vertx, SimulatorConfig.defaults().withPort(0).withDecodeStepMs(1))
            .await(10, TimeUnit.SECONDS);
    startProxy(
        config(sim.port(), 4, null)
            .withAuth(new io.phasemeter.proxy.config.ProxyConfig.Auth(true, keys.toString())));

    UnauthorizedException wrong =
        catchThrowableOfType(
            UnauthorizedException.class,
            () -> sdk().chat().completions().create(chatParams("sim-llama")));
    assertThat(wrong.statusCode()).isEqualTo(401);
    assertThat(wrong.code()).contains("invalid_api_key");
    sdk.close();

    sdk =
        OpenAIOkHttpClient.builder()
            .baseUrl("http://127.0.0.1:" + proxy.port() + "/v1")
            .apiKey("pm-sdk-key")
            .maxRetries(0)
            .build();
    assertThat(sdk.chat().completions().create(chatParams("sim-llama")).choices()).hasSize(1);
    RateLimitException limited =
        catchThrowableOfType(
            RateLimitException.class,
            () -> sdk.chat().completions().create(chatParams("sim-llama")));
    assertThat(limited.statusCode()).isEqualTo(429);
    assertThat(limited.code()).contains("rate_limit_exceeded");
    assertThat(limited.headers().values("retry-after")).isNotEmpty();
    assertThat(limited.headers().values("x-ratelimit-limit-requests")).containsExactly("1");
  }

  @Test
  void upstream401And429PassThroughAsTheSdksOwnExceptions() throws Exception {
    // A 401 or 429 can also come from the upstream (vLLM started with --api-key, or a gateway
    // behind the proxy); the proxy passes 4xx through as is.
    startWithUpstreamAnswering(
        401,
        openAiError("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"));
    UnauthorizedException unauthorized =
        catchThrowableOfType(
            UnauthorizedException.class,
            () -> sdk().chat().completions().create(chatParams("sim-llama")));
    assertThat(unauthorized.statusCode()).isEqualTo(401);
    assertThat(unauthorized.code()).contains("invalid_api_key");
    sdk.close();
    proxy.close().await(10, TimeUnit.SECONDS);

    startWithUpstreamAnswering(
        429, openAiError("Rate limit reached.", "requests", "rate_limit_exceeded"));
    RateLimitException limited =
        catchThrowableOfType(
            RateLimitException.class,
            () -> sdk().chat().completions().create(chatParams("sim-llama")));
    assertThat(limited.statusCode()).isEqualTo(429);
    assertThat(limited.code()).contains("rate_limit_exceeded");
  }

  @Test
  void aFullQueueIsTheSdksRateLimitException() throws Exception {
    // One slot, no room to wait: while one request holds the slot, the next is refused with 429.
    Promise<Void> release = Promise.promise();
    int backend = startHeldBackend(release);
    startProxy(config(backend, 1, "    queue: {max: 0, timeout: 5s}\n"));
    var held = callAsync("/v1/chat/completions", chat("x", false));
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> proxy.slotPools().get("default").inUse() == 1);
    try {
      RateLimitException e =
          catchThrowableOfType(
              RateLimitException.class,
              () -> sdk().chat().completions().create(chatParams("sim-llama")));
      assertThat(e.statusCode()).isEqualTo(429);
      assertThat(e.code()).contains("queue_full");
      assertThat(e.headers().values("retry-after")).isNotEmpty();
    } finally {
      release.complete();
    }
    assertThat(held.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
  }

  @Test
  void anOverloadedUpstreamIsTheSdksInternalServerException() throws Exception {
    startWithUpstreamAnswering(503, openAiError("Overloaded", "server_error", "overloaded"));
    OpenAIServiceException e =
        catchThrowableOfType(
            InternalServerException.class,
            () -> sdk().chat().completions().create(chatParams("sim-llama")));
    assertThat(e.statusCode()).isEqualTo(503);
    assertThat(e.code()).contains("upstream_overloaded");
  }

  @Test
  void noSlotInTimeIsA503ForTheSdk() throws Exception {
    Promise<Void> release = Promise.promise();
    int backend = startHeldBackend(release);
    startProxy(config(backend, 1, "    queue: {max: 10, timeout: 200ms}\n"));
    var held = callAsync("/v1/chat/completions", chat("x", false));
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> proxy.slotPools().get("default").inUse() == 1);
    try {
      InternalServerException e =
          catchThrowableOfType(
              InternalServerException.class,
              () -> sdk().chat().completions().create(chatParams("sim-llama")));
      assertThat(e.statusCode()).isEqualTo(503);
      assertThat(e.code()).contains("queue_timeout");
    } finally {
      release.complete();
    }
    assertThat(held.await(10, TimeUnit.SECONDS).status()).isEqualTo(200);
  }
}
