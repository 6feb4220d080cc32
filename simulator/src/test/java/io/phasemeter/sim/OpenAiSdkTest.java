package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.models.embeddings.CreateEmbeddingResponse;
import com.openai.models.embeddings.EmbeddingCreateParams;
import com.openai.models.models.Model;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseStatus;
import com.openai.models.responses.ResponseStreamEvent;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The official OpenAI Java SDK against the simulator, response validation on: every shape the SDK
 * parses here (the response, each stream event, the embeddings in the SDK's default base64, a
 * model) is proven by the SDK itself.
 */
class OpenAiSdkTest extends SimTestBase {
  private Simulator sim;
  private OpenAIClient sdk;

  @BeforeEach
  void startSdk() throws Exception {
    sim = startSimulator(FAST);
    sdk =
        OpenAIOkHttpClient.builder()
            .baseUrl("http://127.0.0.1:" + sim.port() + "/v1")
            .apiKey("sk-test-not-a-real-key")
            .maxRetries(0)
            .timeout(Duration.ofSeconds(20))
            .responseValidation(true)
            .build();
  }

  @AfterEach
  void closeSdk() {
    sdk.close();
  }

  private static ResponseCreateParams params(String input, long maxOutputTokens) {
    return ResponseCreateParams.builder()
        .model("sim-llama")
        .input(input)
        .maxOutputTokens(maxOutputTokens)
        .build();
  }

  @Test
  void responsesCreateRetrieveAndDelete() {
    Response response = sdk.responses().create(params("hello there", 5));

    assertThat(response.id()).startsWith("resp_");
    assertThat(response.status()).isPresent();
    assertThat(response.status().get()).isIn(ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE);
    String text = response.output().get(0).asMessage().content().get(0).asOutputText().text();
    assertThat(text).isNotBlank();
    assertThat(response.usage().get().inputTokens()).isEqualTo(3 + 4 + 3);
    assertThat(response.usage().get().totalTokens())
        .isEqualTo(response.usage().get().inputTokens() + response.usage().get().outputTokens());

    Response read = sdk.responses().retrieve(response.id());
    assertThat(read.id()).isEqualTo(response.id());
    assertThat(read.output().get(0).asMessage().content().get(0).asOutputText().text())
        .isEqualTo(text);
    sdk.responses().delete(response.id());
  }

  @Test
  void responsesCreateStreaming() {
    List<ResponseStreamEvent> events;
    try (StreamResponse<ResponseStreamEvent> stream =
        sdk.responses().createStreaming(params("hello there", 4))) {
      events = stream.stream().toList();
    }
    events.forEach(ResponseStreamEvent::validate);

    assertThat(events.get(0).isCreated()).isTrue();
    assertThat(events.get(1).isInProgress()).isTrue();
    assertThat(events.get(2).isOutputItemAdded()).isTrue();
    assertThat(events.get(3).isContentPartAdded()).isTrue();
    ResponseStreamEvent last = events.get(events.size() - 1);
    assertThat(last.isCompleted()).isTrue();
    StringBuilder text = new StringBuilder();
    events.stream()
        .filter(ResponseStreamEvent::isOutputTextDelta)
        .forEach(e -> text.append(e.asOutputTextDelta().delta()));
    Response done = last.asCompleted().response();
    assertThat(done.output().get(0).asMessage().content().get(0).asOutputText().text())
        .isEqualTo(text.toString());
    for (int i = 0; i < events.size(); i++) {
      assertThat(sequenceNumber(events.get(i))).isEqualTo(i);
    }
  }

  @Test
  void failedAndErrorEventsParse() {
    OpenAIClient faulty =
        sdk.withOptions(
            b -> b.putHeader("x-sim-fault", "error").putHeader("x-sim-fault-after-tokens", "1"));
    List<ResponseStreamEvent> failed;
    try (StreamResponse<ResponseStreamEvent> stream =
        faulty.responses().createStreaming(params("x", 5))) {
      failed = stream.stream().toList();
    }
    failed.forEach(ResponseStreamEvent::validate);
    ResponseStreamEvent end = failed.get(failed.size() - 1);
    assertThat(end.isFailed()).isTrue();
    assertThat(end.asFailed().response().error().get().message()).contains("x-sim-fault");

    List<ResponseStreamEvent> errored;
    try (StreamResponse<ResponseStreamEvent> stream =
        sdk.withOptions(b -> b.putHeader("x-sim-fault", "error_event"))
            .responses()
            .createStreaming(params("x", 5))) {
      errored = stream.stream().toList();
    }
    errored.forEach(ResponseStreamEvent::validate);
    ResponseStreamEvent error = errored.get(errored.size() - 1);
    assertThat(error.isError()).isTrue();
    assertThat(error.asError().code()).contains("server_error");
  }

  @Test
  void embeddingsInTheSdksDefaultBase64DecodeToTheFloatVector() throws Exception {
    CreateEmbeddingResponse sdkDefault =
        sdk.embeddings()
            .create(EmbeddingCreateParams.builder().model("sim-llama").input("hello").build());
    CreateEmbeddingResponse floats =
        sdk.embeddings()
            .create(
                EmbeddingCreateParams.builder()
                    .model("sim-llama")
                    .input("hello")
                    .encodingFormat(EmbeddingCreateParams.EncodingFormat.FLOAT)
                    .build());

    List<Float> decoded = sdkDefault.data().get(0).embedding();
    assertThat(decoded).hasSize(Embeddings.DEFAULT_DIMENSIONS);
    assertThat(decoded).isEqualTo(floats.data().get(0).embedding());
    float[] raw =
        EmbeddingsTest.floats(
            post(sim, "/v1/embeddings", EmbeddingsTest.embed("hello"))
                .json()
                .getJsonArray("data")
                .getJsonObject(0));
    for (int i = 0; i < raw.length; i++) {
      assertThat(decoded.get(i)).isEqualTo(raw[i]);
    }
    assertThat(sdkDefault.usage().promptTokens()).isEqualTo(2);
  }

  @Test
  void modelsRetrieve() {
    Model model = sdk.models().retrieve("sim-llama");
    assertThat(model.id()).isEqualTo("sim-llama");
    assertThat(model.ownedBy()).isEqualTo("vllm");
  }

  private static long sequenceNumber(ResponseStreamEvent e) {
    if (e.isCreated()) {
      return e.asCreated().sequenceNumber();
    } else if (e.isInProgress()) {
      return e.asInProgress().sequenceNumber();
    } else if (e.isOutputItemAdded()) {
      return e.asOutputItemAdded().sequenceNumber();
    } else if (e.isContentPartAdded()) {
      return e.asContentPartAdded().sequenceNumber();
    } else if (e.isOutputTextDelta()) {
      return e.asOutputTextDelta().sequenceNumber();
    } else if (e.isOutputTextDone()) {
      return e.asOutputTextDone().sequenceNumber();
    } else if (e.isContentPartDone()) {
      return e.asContentPartDone().sequenceNumber();
    } else if (e.isOutputItemDone()) {
      return e.asOutputItemDone().sequenceNumber();
    } else if (e.isCompleted()) {
      return e.asCompleted().sequenceNumber();
    }
    throw new AssertionError("unexpected event " + e);
  }
}
