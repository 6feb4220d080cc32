package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What a client of vLLM's OpenAI server sees: shapes, streams, token counts, errors. */
class ProtocolTest extends SimTestBase {

  @Test
  void chatStreamHasRoleChunkContentChunksFinishUsageAndDone() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body = streamed(chat("hello there", 5), true).put("ignore_eos", true);

    Reply reply = post(sim, "/v1/chat/completions", body);

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.contentType()).startsWith("text/event-stream");
    List<String> data = reply.data();
    assertThat(data).hasSize(1 + 5 + 1 + 1);
    assertThat(data.get(data.size() - 1)).isEqualTo("[DONE]");

    JsonObject role = new JsonObject(data.get(0));
    assertThat(role.getString("id")).startsWith("chatcmpl-");
    assertThat(role.getString("object")).isEqualTo("chat.completion.chunk");
    assertThat(role.getString("model")).isEqualTo("sim-llama");
    assertThat(role.getLong("created")).isPositive();
    JsonObject roleChoice = role.getJsonArray("choices").getJsonObject(0);
    assertThat(roleChoice.getJsonObject("delta"))
        .isEqualTo(new JsonObject().put("role", "assistant").put("content", ""));
    assertThat(roleChoice.containsKey("logprobs")).isTrue();
    assertThat(roleChoice.getValue("finish_reason")).isNull();

    for (int i = 1; i <= 5; i++) {
      JsonObject chunk = new JsonObject(data.get(i));
      assertThat(chunk.getString("id")).isEqualTo(role.getString("id"));
      JsonObject choice = chunk.getJsonArray("choices").getJsonObject(0);
      assertThat(choice.getInteger("index")).isZero();
      assertThat(choice.getJsonObject("delta").fieldNames()).containsExactly("content");
      assertThat(choice.getJsonObject("delta").getString("content")).isNotEmpty();
      if (i < 5) {
        assertThat(choice.getValue("finish_reason")).isNull();
        assertThat(choice.containsKey("stop_reason")).isFalse();
      } else {
        assertThat(choice.getString("finish_reason")).isEqualTo("length");
        assertThat(choice.containsKey("stop_reason")).isTrue();
      }
    }

    JsonObject usage = new JsonObject(data.get(6));
    assertThat(usage.getJsonArray("choices")).isEmpty();
    assertThat(usage.getString("object")).isEqualTo("chat.completion.chunk");
    int prompt = 3 + 4 + 3; // priming + message overhead + ceil(11 / 4)
    assertThat(usage.getJsonObject("usage"))
        .isEqualTo(
            new JsonObject()
                .put("prompt_tokens", prompt)
                .put("total_tokens", prompt + 5)
                .put("completion_tokens", 5));
    // each chunk is its own SSE event: "data: {json}\n\n"
    assertThat(reply.body()).startsWith("data: {").endsWith("data: [DONE]\n\n");
  }

  @Test
  void streamWithoutIncludeUsageHasNoUsageChunk() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = post(sim, "/v1/chat/completions", streamed(chat("hi", 3), false));

    List<String> data = reply.data();
    assertThat(data.get(data.size() - 1)).isEqualTo("[DONE]");
    assertThat(data.subList(0, data.size() - 1))
        .allSatisfy(d -> assertThat(new JsonObject(d).containsKey("usage")).isFalse());
    JsonObject last = new JsonObject(data.get(data.size() - 2));
    assertThat(last.getJsonArray("choices").getJsonObject(0).getString("finish_reason"))
        .isIn("stop", "length");
  }

  @Test
  void completionStreamUsesTextAndHasNoRoleChunk() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body =
        streamed(
            new JsonObject()
                .put("model", "sim-llama")
                .put("prompt", "once upon a time")
                .put("max_tokens", 4)
                .put("ignore_eos", true),
            true);

    Reply reply = post(sim, "/v1/completions", body);

    List<String> data = reply.data();
    assertThat(data).hasSize(4 + 1 + 1);
    for (int i = 0; i < 4; i++) {
      JsonObject chunk = new JsonObject(data.get(i));
      assertThat(chunk.getString("object")).isEqualTo("text_completion");
      assertThat(chunk.getString("id")).startsWith("cmpl-");
      JsonObject choice = chunk.getJsonArray("choices").getJsonObject(0);
      assertThat(choice.getString("text")).isNotEmpty();
      assertThat(choice.containsKey("delta")).isFalse();
      assertThat(choice.getValue("finish_reason")).isEqualTo(i == 3 ? "length" : null);
    }
    JsonObject usage = new JsonObject(data.get(4)).getJsonObject("usage");
    assertThat(usage.getInteger("prompt_tokens")).isEqualTo(4); // ceil(16 / 4)
    assertThat(usage.getInteger("completion_tokens")).isEqualTo(4);
    assertThat(data.get(5)).isEqualTo("[DONE]");
  }

  @Test
  void nonStreamedChatHasVllmShapeAndUsage() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = post(sim, "/v1/chat/completions", chat("abcdefgh", 6).put("ignore_eos", true));

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.contentType()).startsWith("application/json");
    JsonObject json = reply.json();
    assertThat(json.getString("object")).isEqualTo("chat.completion");
    assertThat(json.getString("id")).startsWith("chatcmpl-");
    JsonObject choice = json.getJsonArray("choices").getJsonObject(0);
    assertThat(choice.getJsonObject("message").getString("role")).isEqualTo("assistant");
    String content = choice.getJsonObject("message").getString("content");
    assertThat(content.split(" ")).hasSize(6);
    assertThat(choice.getString("finish_reason")).isEqualTo("length");
    JsonObject usage = json.getJsonObject("usage");
    assertThat(usage.getInteger("prompt_tokens")).isEqualTo(3 + 4 + 2);
    assertThat(usage.getInteger("completion_tokens")).isEqualTo(6);
    assertThat(usage.getInteger("total_tokens")).isEqualTo(15);
  }

  @Test
  void nonStreamedCompletionHasTextAndUsage() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        post(
            sim,
            "/v1/completions",
            new JsonObject().put("prompt", "x").put("max_tokens", 3).put("ignore_eos", true));

    JsonObject json = reply.json();
    assertThat(json.getString("object")).isEqualTo("text_completion");
    assertThat(json.getString("model")).isEqualTo("sim-llama");
    JsonObject choice = json.getJsonArray("choices").getJsonObject(0);
    assertThat(choice.getString("text").split(" ")).hasSize(3);
    assertThat(json.getJsonObject("usage").getInteger("prompt_tokens")).isEqualTo(1);
  }

  @Test
  void maxTokensMinTokensAndIgnoreEosAreExact() throws Exception {
    Simulator sim = startSimulator(FAST);
    for (int i = 0; i < 12; i++) {
      JsonObject body = chat("question " + i, 8).put("min_tokens", 3);
      JsonObject json = post(sim, "/v1/chat/completions", body).json();
      JsonObject choice = json.getJsonArray("choices").getJsonObject(0);
      String content = choice.getJsonObject("message").getString("content");
      int words = content.split(" ").length;
      int completion = json.getJsonObject("usage").getInteger("completion_tokens");
      assertThat(words).isBetween(3, 8);
      if (choice.getString("finish_reason").equals("stop")) {
        assertThat(words).isLessThan(8);
        assertThat(completion).isEqualTo(words + 1); // the EOS token counts, as in vLLM
      } else {
        assertThat(choice.getString("finish_reason")).isEqualTo("length");
        assertThat(words).isEqualTo(8);
        assertThat(completion).isEqualTo(8);
      }

      JsonObject exact =
          post(sim, "/v1/chat/completions", chat("question " + i, 7).put("ignore_eos", true))
              .json();
      assertThat(exact.getJsonObject("usage").getInteger("completion_tokens")).isEqualTo(7);
      assertThat(exact.getJsonArray("choices").getJsonObject(0).getString("finish_reason"))
          .isEqualTo("length");
    }
  }

  @Test
  void stopFinishStreamsEmptyEosChunk() throws Exception {
    Simulator sim = startSimulator(FAST);
    // search a prompt whose deterministic EOS falls before max_tokens
    for (int i = 0; i < 50; i++) {
      Reply reply = post(sim, "/v1/chat/completions", streamed(chat("p" + i, 10), true));
      List<String> data = reply.data();
      JsonObject last = new JsonObject(data.get(data.size() - 3));
      JsonObject choice = last.getJsonArray("choices").getJsonObject(0);
      if (!"stop".equals(choice.getString("finish_reason"))) {
        continue;
      }
      assertThat(choice.getJsonObject("delta").getString("content")).isEmpty();
      int content = reply.contentEvents().size();
      assertThat(
              new JsonObject(data.get(data.size() - 2))
                  .getJsonObject("usage")
                  .getInteger("completion_tokens"))
          .isEqualTo(content + 1);
      return;
    }
    throw new AssertionError("no request among 50 stopped before max_tokens");
  }

  @Test
  void maxCompletionTokensWinsOverMaxTokens() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body = chat("hi", 9).put("max_completion_tokens", 2).put("ignore_eos", true);
    JsonObject json = post(sim, "/v1/chat/completions", body).json();
    assertThat(json.getJsonObject("usage").getInteger("completion_tokens")).isEqualTo(2);
  }

  @Test
  void defaultMaxTokensIsCappedByContext() throws Exception {
    Simulator sim = startSimulator(FAST.withDefaultMaxTokens(50).withMaxModelLen(60));
    JsonObject body =
        new JsonObject()
            .put(
                "prompt", new JsonArray(List.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)))
            .put("ignore_eos", true);
    JsonObject json = post(sim, "/v1/completions", body).json();
    assertThat(json.getJsonObject("usage").getInteger("completion_tokens")).isEqualTo(45);
  }

  @Test
  void tokenIdPromptsCountExactly() throws Exception {
    Simulator sim = startSimulator(FAST);
    assertThat(promptTokens(sim, new JsonArray(List.of(101, 7, 7, 9, 2048)))).isEqualTo(5);
    assertThat(promptTokens(sim, new JsonArray().add(new JsonArray(List.of(1, 2, 3)))))
        .isEqualTo(3);
    assertThat(promptTokens(sim, new JsonArray().add("abcdefghi"))).isEqualTo(3);
    assertThat(promptTokens(sim, "abcdefgh")).isEqualTo(2);
  }

  private int promptTokens(Simulator sim, Object prompt) throws Exception {
    JsonObject body = new JsonObject().put("prompt", prompt).put("max_tokens", 1);
    Reply reply = post(sim, "/v1/completions", body);
    assertThat(reply.status()).as(reply.body()).isEqualTo(200);
    return reply.json().getJsonObject("usage").getInteger("prompt_tokens");
  }

  @Test
  void unknownModelIs404WithVllmErrorBody() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = post(sim, "/v1/chat/completions", chat("hi", 3).put("model", "gpt-9"));

    assertThat(reply.status()).isEqualTo(404);
    JsonObject error = reply.json().getJsonObject("error");
    assertThat(error.getString("message")).isEqualTo("The model `gpt-9` does not exist.");
    assertThat(error.getString("type")).isEqualTo("NotFoundError");
    assertThat(error.getInteger("code")).isEqualTo(404);
    assertThat(error.fieldNames()).containsExactly("message", "type", "param", "code");
  }

  @Test
  void badRequestsAre400WithVllmErrorBody() throws Exception {
    Simulator sim = startSimulator(FAST.withDefaultMaxTokens(10).withMaxModelLen(100));
    List<String> bodies =
        List.of(
            "{not json",
            "[1,2]",
            "{\"model\":\"sim-llama\"}",
            "{\"messages\":[]}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":95}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3,"
                + "\"min_tokens\":4}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                + "\"stream_options\":{\"include_usage\":true}}");
    for (String body : bodies) {
      Reply reply = post(sim, "/v1/chat/completions", body, Map.of());
      assertThat(reply.status()).as(body).isEqualTo(400);
      JsonObject error = reply.json().getJsonObject("error");
      assertThat(error.getString("type")).as(body).isEqualTo("BadRequestError");
      assertThat(error.getInteger("code")).isEqualTo(400);
      assertThat(error.getString("message")).isNotBlank();
    }
    Reply tooLong =
        post(sim, "/v1/completions", "{\"prompt\":\"" + "x".repeat(400) + "\"}", Map.of());
    assertThat(tooLong.status()).isEqualTo(400);
    assertThat(tooLong.json().getJsonObject("error").getString("message"))
        .contains("maximum context length is 100 tokens");
    Reply noPrompt = post(sim, "/v1/completions", "{\"max_tokens\":3}", Map.of());
    assertThat(noPrompt.status()).isEqualTo(400);
    int expected = bodies.size() + 2;
    eventually(() -> sim.stats().failed() == expected, "every refusal counted");
    assertThat(sim.stats().received()).isEqualTo(expected);
  }

  @Test
  void modelsHealthAndMetrics() throws Exception {
    Simulator sim = startSimulator(FAST.withModels(List.of("a-model", "b-model")));
    JsonObject models = get(sim, "/v1/models").json();
    assertThat(models.getString("object")).isEqualTo("list");
    JsonArray data = models.getJsonArray("data");
    assertThat(data).hasSize(2);
    JsonObject card = data.getJsonObject(0);
    assertThat(card.getString("id")).isEqualTo("a-model");
    assertThat(card.getString("object")).isEqualTo("model");
    assertThat(card.getString("owned_by")).isEqualTo("vllm");
    assertThat(card.getString("root")).isEqualTo("a-model");
    assertThat(card.containsKey("parent")).isTrue();
    assertThat(card.getInteger("max_model_len")).isEqualTo(65_536);
    assertThat(card.getJsonArray("permission")).hasSize(1);

    Reply health = get(sim, "/health");
    assertThat(health.status()).isEqualTo(200);
    assertThat(health.body()).isEmpty();

    post(
        sim, "/v1/chat/completions", chat("hi", 3).put("model", "b-model").put("ignore_eos", true));
    String metrics = get(sim, "/metrics").body();
    assertThat(sample(metrics, "vllm:num_requests_running{model_name=\"b-model\"}")).isZero();
    assertThat(sample(metrics, "vllm:num_requests_waiting{model_name=\"b-model\"}")).isZero();
    assertThat(sample(metrics, "vllm:prompt_tokens_total{model_name=\"b-model\"}")).isEqualTo(8);
    assertThat(sample(metrics, "vllm:generation_tokens_total{model_name=\"b-model\"}"))
        .isEqualTo(3);
    assertThat(
            sample(
                metrics,
                "vllm:request_success_total{finished_reason=\"length\",model_name=\"b-model\"}"))
        .isEqualTo(1);
    for (String histogram :
        List.of(
            "vllm:time_to_first_token_seconds",
            "vllm:e2e_request_latency_seconds",
            "vllm:time_per_output_token_seconds")) {
      assertThat(metrics).contains("# TYPE " + histogram + " histogram");
      assertThat(sample(metrics, histogram + "_count{model_name=\"b-model\"}")).isEqualTo(1);
    }
  }

  /** The value of one sample line of a Prometheus text exposition. */
  static double sample(String exposition, String series) {
    return exposition
        .lines()
        .filter(l -> l.startsWith(series + " "))
        .map(l -> Double.parseDouble(l.substring(series.length() + 1).trim()))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no sample " + series + " in\n" + exposition));
  }

  @Test
  void sameSeedSameOutputOtherSeedOtherOutput() throws Exception {
    Simulator a = startSimulator(FAST.withSeed(7));
    Simulator b = startSimulator(FAST.withSeed(7));
    Simulator c = startSimulator(FAST.withSeed(8));
    JsonObject body = chat("tell me a story", 40);
    String fromA = text(post(a, "/v1/chat/completions", body));
    assertThat(text(post(b, "/v1/chat/completions", body))).isEqualTo(fromA);
    assertThat(text(post(a, "/v1/chat/completions", body))).isEqualTo(fromA);
    assertThat(text(post(c, "/v1/chat/completions", body))).isNotEqualTo(fromA);

    // streamed output is the same text, one token per content chunk
    Reply stream = post(a, "/v1/chat/completions", streamed(body.copy(), false));
    StringBuilder joined = new StringBuilder();
    stream
        .contentEvents()
        .forEach(
            e ->
                joined.append(
                    e.json()
                        .getJsonArray("choices")
                        .getJsonObject(0)
                        .getJsonObject("delta")
                        .getString("content")));
    assertThat(joined.toString()).isEqualTo(fromA);
  }

  private static String text(Reply reply) {
    return reply
        .json()
        .getJsonArray("choices")
        .getJsonObject(0)
        .getJsonObject("message")
        .getString("content");
  }
}
