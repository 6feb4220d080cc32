package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code /tokenize}, {@code /detokenize}, {@code /version} and {@code /v1/models/{id}}. */
class TokenizeTest extends SimTestBase {

  @Test
  void tokenizeHasVllmsShapeAndCountsLikeCompletions() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        post(
            sim,
            "/tokenize",
            new JsonObject().put("model", "sim-llama").put("prompt", "hello world"));

    assertThat(reply.status()).isEqualTo(200);
    JsonObject json = reply.json();
    assertThat(json.fieldNames()).containsExactly("count", "max_model_len", "tokens", "token_strs");
    assertThat(json.getInteger("count")).isEqualTo(3);
    assertThat(json.getJsonArray("tokens")).hasSize(3);
    assertThat(json.getInteger("max_model_len")).isEqualTo(65_536);
    assertThat(json.getValue("token_strs")).isNull();

    JsonObject strs =
        post(
                sim,
                "/tokenize",
                new JsonObject().put("prompt", "hello world").put("return_token_strs", true))
            .json();
    assertThat(strs.getJsonArray("token_strs")).containsExactly("hell", "o wo", "rld");

    int usage =
        post(
                sim,
                "/v1/completions",
                new JsonObject().put("prompt", "hello world").put("max_tokens", 1))
            .json()
            .getJsonObject("usage")
            .getInteger("prompt_tokens");
    assertThat(json.getInteger("count")).isEqualTo(usage);
  }

  @Test
  void chatMessagesCountLikeTheChatEndpoint() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonArray messages =
        new JsonArray()
            .add(new JsonObject().put("role", "system").put("content", "be brief"))
            .add(new JsonObject().put("role", "user").put("content", "what is a phase?"));
    int count =
        post(sim, "/tokenize", new JsonObject().put("messages", messages))
            .json()
            .getInteger("count");
    int usage =
        post(
                sim,
                "/v1/chat/completions",
                new JsonObject().put("messages", messages).put("max_tokens", 1))
            .json()
            .getJsonObject("usage")
            .getInteger("prompt_tokens");
    assertThat(count).isEqualTo(usage).isEqualTo(3 + (4 + 2) + (4 + 4));
    JsonObject withoutPrompt =
        post(
                sim,
                "/tokenize",
                new JsonObject().put("messages", messages).put("add_generation_prompt", false))
            .json();
    assertThat(withoutPrompt.getInteger("count")).isEqualTo(count - 2);
  }

  @Test
  void detokenizeInvertsTokenizeForAsciiText() throws Exception {
    Simulator sim = startSimulator(FAST);
    String text = "The quick brown fox, 42 times!";
    JsonArray tokens =
        post(sim, "/tokenize", new JsonObject().put("prompt", text)).json().getJsonArray("tokens");
    Reply reply =
        post(sim, "/detokenize", new JsonObject().put("model", "sim-llama").put("tokens", tokens));
    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.json()).isEqualTo(new JsonObject().put("prompt", text));

    // the chat template's tokens decode to nothing: the messages' texts remain
    JsonArray chat =
        post(
                sim,
                "/tokenize",
                new JsonObject()
                    .put(
                        "messages",
                        new JsonArray()
                            .add(new JsonObject().put("role", "user").put("content", "hi there"))))
            .json()
            .getJsonArray("tokens");
    assertThat(
            post(sim, "/detokenize", new JsonObject().put("tokens", chat))
                .json()
                .getString("prompt"))
        .isEqualTo("hi there");

    // any other id is a word
    String words =
        post(sim, "/detokenize", new JsonObject().put("tokens", new JsonArray(List.of(100, 101))))
            .json()
            .getString("prompt");
    assertThat(words).matches("( [a-z]+){2}");
  }

  @Test
  void tokenizeErrors() throws Exception {
    Simulator sim = startSimulator(FAST);
    assertThat(
            post(sim, "/tokenize", new JsonObject().put("model", "nope").put("prompt", "x"))
                .status())
        .isEqualTo(404);
    assertThat(post(sim, "/tokenize", new JsonObject()).status()).isEqualTo(400);
    assertThat(post(sim, "/tokenize", "{not json", Map.of()).status()).isEqualTo(400);
    assertThat(post(sim, "/detokenize", new JsonObject()).status()).isEqualTo(400);
    assertThat(
            post(sim, "/detokenize", new JsonObject().put("tokens", new JsonArray().add(-3)))
                .status())
        .isEqualTo(400);
  }

  @Test
  void versionAndOneModel() throws Exception {
    Simulator sim = startSimulator(FAST.withModels(List.of("sim-llama", "org/model-7b")));
    Reply version = get(sim, "/version");
    assertThat(version.status()).isEqualTo(200);
    assertThat(version.json()).isEqualTo(new JsonObject().put("version", Simulator.version()));

    JsonObject list = get(sim, "/v1/models").json();
    assertThat(get(sim, "/v1/models/sim-llama").json())
        .isEqualTo(list.getJsonArray("data").getJsonObject(0));
    assertThat(get(sim, "/v1/models/org/model-7b").json())
        .isEqualTo(list.getJsonArray("data").getJsonObject(1));
    Reply missing = get(sim, "/v1/models/gpt-9");
    assertThat(missing.status()).isEqualTo(404);
    assertThat(missing.json().getJsonObject("error").getString("message"))
        .isEqualTo("The model `gpt-9` does not exist.");

    assertThat(get(sim, "/v1/nothing-here").status()).isEqualTo(404);
    assertThat(get(sim, "/v1/nothing-here").json())
        .isEqualTo(new JsonObject().put("detail", "Not Found"));
  }
}
