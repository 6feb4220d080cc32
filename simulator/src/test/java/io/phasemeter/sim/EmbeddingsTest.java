package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@code /v1/embeddings} in vLLM's shape, its vectors, its cost through the engine, faults. */
class EmbeddingsTest extends SimTestBase {

  static JsonObject embed(Object input) {
    return new JsonObject().put("model", "sim-llama").put("input", input);
  }

  static float[] floats(JsonObject datum) {
    JsonArray values = datum.getJsonArray("embedding");
    float[] v = new float[values.size()];
    for (int i = 0; i < v.length; i++) {
      v[i] = values.getNumber(i).floatValue();
    }
    return v;
  }

  @Test
  void floatEmbeddingsHaveVllmsShapeAndUnitVectors() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = post(sim, "/v1/embeddings", embed(new JsonArray().add("abcde").add("xy")));

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.contentType()).startsWith("application/json");
    JsonObject json = reply.json();
    assertThat(json.fieldNames())
        .containsExactly("id", "object", "created", "model", "data", "usage");
    assertThat(json.getString("id")).matches("embd-[0-9a-f]{32}");
    assertThat(json.getString("object")).isEqualTo("list");
    assertThat(json.getLong("created")).isPositive();
    assertThat(json.getString("model")).isEqualTo("sim-llama");
    JsonArray data = json.getJsonArray("data");
    assertThat(data).hasSize(2);
    for (int i = 0; i < 2; i++) {
      JsonObject datum = data.getJsonObject(i);
      assertThat(datum.fieldNames()).containsExactly("index", "object", "embedding");
      assertThat(datum.getInteger("index")).isEqualTo(i);
      assertThat(datum.getString("object")).isEqualTo("embedding");
      float[] v = floats(datum);
      assertThat(v).hasSize(Embeddings.DEFAULT_DIMENSIONS);
      double norm = 0;
      for (float f : v) {
        norm += f * f;
      }
      assertThat(Math.sqrt(norm)).isCloseTo(1.0, org.assertj.core.data.Offset.offset(1e-5));
    }
    assertThat(floats(data.getJsonObject(0))).isNotEqualTo(floats(data.getJsonObject(1)));
    // ceil(5 / 4) + ceil(2 / 4)
    assertThat(json.getJsonObject("usage"))
        .isEqualTo(
            new JsonObject()
                .put("prompt_tokens", 3)
                .put("total_tokens", 3)
                .put("completion_tokens", 0)
                .put("prompt_tokens_details", null));
  }

  @Test
  void base64IsFloat32LittleEndianOfTheSameVector() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject asFloats = post(sim, "/v1/embeddings", embed("same input")).json();
    JsonObject asBase64 =
        post(sim, "/v1/embeddings", embed("same input").put("encoding_format", "base64")).json();

    float[] expected = floats(asFloats.getJsonArray("data").getJsonObject(0));
    byte[] bytes =
        Base64.getDecoder()
            .decode(asBase64.getJsonArray("data").getJsonObject(0).getString("embedding"));
    assertThat(bytes).hasSize(expected.length * 4);
    ByteBuffer buffer = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    float[] decoded = new float[expected.length];
    for (int i = 0; i < decoded.length; i++) {
      decoded[i] = buffer.getFloat();
    }
    assertThat(decoded).isEqualTo(expected);
    assertThat(asBase64.getJsonObject("usage")).isEqualTo(asFloats.getJsonObject("usage"));
  }

  @Test
  void tokenIdInputsCountExactlyAndDimensionsAreHonoured() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject ids = post(sim, "/v1/embeddings", embed(new JsonArray(List.of(5, 6, 7)))).json();
    assertThat(ids.getJsonArray("data")).hasSize(1);
    assertThat(ids.getJsonObject("usage").getInteger("prompt_tokens")).isEqualTo(3);

    JsonArray lists =
        new JsonArray().add(new JsonArray(List.of(1, 2))).add(new JsonArray(List.of(3)));
    JsonObject many = post(sim, "/v1/embeddings", embed(lists)).json();
    assertThat(many.getJsonArray("data")).hasSize(2);
    assertThat(many.getJsonObject("usage").getInteger("prompt_tokens")).isEqualTo(3);

    JsonObject wide = post(sim, "/v1/embeddings", embed("x").put("dimensions", 1024)).json();
    assertThat(floats(wide.getJsonArray("data").getJsonObject(0))).hasSize(1024);

    // deterministic: same input, same vector, across simulators with the same seed
    Simulator other = startSimulator(FAST);
    assertThat(
            post(other, "/v1/embeddings", embed("x").put("dimensions", 1024))
                .json()
                .getJsonArray("data"))
        .isEqualTo(wide.getJsonArray("data"));
  }

  @Test
  void badRequestsAre400AndUnknownModel404() throws Exception {
    Simulator sim = startSimulator(FAST.withDefaultMaxTokens(10).withMaxModelLen(100));
    for (JsonObject body :
        List.of(
            new JsonObject().put("model", "sim-llama"),
            embed(new JsonArray()),
            embed(new JsonArray().add("a").add(1)),
            embed(new JsonArray().add(-1)),
            embed(42),
            embed("x").put("encoding_format", "bytes"),
            embed("x").put("dimensions", 0),
            embed("x").put("dimensions", Embeddings.MAX_DIMENSIONS + 1),
            embed("y".repeat(401)))) {
      Reply reply = post(sim, "/v1/embeddings", body);
      assertThat(reply.status()).as(body.encode()).isEqualTo(400);
      assertThat(reply.json().getJsonObject("error").getString("type"))
          .isEqualTo("BadRequestError");
    }
    assertThat(post(sim, "/v1/embeddings", embed("x").put("model", "nope")).status())
        .isEqualTo(404);
  }

  @Test
  void prefillTimeDelaysTheAnswerAndTheEngineCountsIt() throws Exception {
    Simulator sim = startSimulator(FAST.withPrefillTokensPerSecond(1000));
    // two inputs of 50 tokens each: 100 prompt tokens at 1000 tok/s = 100 ms
    long start = System.nanoTime();
    Reply reply =
        post(
            sim,
            "/v1/embeddings",
            embed(new JsonArray().add("z".repeat(200)).add("w".repeat(200))));
    assertThat((System.nanoTime() - start) / 1e6).isGreaterThanOrEqualTo(100);
    assertThat(reply.json().getJsonObject("usage").getInteger("prompt_tokens")).isEqualTo(100);
    eventually(
        () -> sim.stats().equals(new SimulatorStats(0, 0, 1, 0, 0, 1)), "counted as completed");
    String metrics = get(sim, "/metrics").body();
    assertThat(ProtocolTest.sample(metrics, "vllm:prompt_tokens_total{model_name=\"sim-llama\"}"))
        .isEqualTo(100);
    assertThat(
            ProtocolTest.sample(
                metrics,
                "vllm:request_success_total{finished_reason=\"stop\",model_name=\"sim-llama\"}"))
        .isEqualTo(1);
  }

  @Test
  void embeddingsWaitForASlotLikeGenerations() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(1));
    Future<Reply> holder =
        send(
            sim,
            HttpMethod.POST,
            "/v1/chat/completions",
            chat("hold", 1).encode(),
            Map.of("x-sim-ttft-ms", "300"),
            null);
    eventually(() -> sim.stats().running() == 1, "the chat holds the slot");
    Future<Reply> embedding =
        send(sim, HttpMethod.POST, "/v1/embeddings", embed("x").encode(), Map.of(), null);
    eventually(() -> sim.stats().waiting() == 1, "the embedding waits");
    assertThat(embedding.await(TIMEOUT_S, TimeUnit.SECONDS).status()).isEqualTo(200);
    assertThat(holder.await(TIMEOUT_S, TimeUnit.SECONDS).status()).isEqualTo(200);
  }

  @Test
  void faults() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply error = post(sim, "/v1/embeddings", embed("x"), Map.of("x-sim-fault", "error"));
    assertThat(error.status()).isEqualTo(500);
    Reply inBand = post(sim, "/v1/embeddings", embed("x"), Map.of("x-sim-fault", "error_event"));
    assertThat(inBand.status()).isEqualTo(500);
    assertThat(inBand.json().getJsonObject("error").getString("message"))
        .isEqualTo("Internal server error");
    Reply malformed = post(sim, "/v1/embeddings", embed("x"), Map.of("x-sim-fault", "malformed"));
    assertThat(malformed.status()).isEqualTo(200);
    assertThat(malformed.body()).isEqualTo("{not json");
    for (String kind : List.of("reset", "disconnect")) {
      Throwable failure =
          send(
                  sim,
                  HttpMethod.POST,
                  "/v1/embeddings",
                  embed("x").encode(),
                  Map.of("x-sim-fault", kind),
                  null)
              .transform(ar -> Future.succeededFuture(ar.cause()))
              .await(TIMEOUT_S, TimeUnit.SECONDS);
      assertThat(failure).as(kind).isNotNull();
    }
    eventually(() -> sim.stats().failed() == 4, "counted as failed");
    assertThat(sim.stats().running()).isZero();
  }
}
