package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@code /v1/responses} as vLLM serves it: event order, shapes, usage, the store, background. */
class ResponsesTest extends SimTestBase {

  static JsonObject responses(String input, int maxOutputTokens) {
    return new JsonObject()
        .put("model", "sim-llama")
        .put("input", input)
        .put("max_output_tokens", maxOutputTokens);
  }

  /** The event names in order; each must equal its data's {@code type}. */
  static List<String> types(Reply reply) {
    List<String> types = new ArrayList<>();
    for (Event e : reply.events()) {
      assertThat(e.name()).as("every event is named").isNotNull();
      assertThat(e.json().getString("type")).isEqualTo(e.name());
      types.add(e.name());
    }
    return types;
  }

  static List<String> deltas(Reply reply, String type) {
    return reply.events().stream()
        .filter(e -> type.equals(e.name()))
        .map(e -> e.json().getString("delta"))
        .toList();
  }

  static JsonObject last(Reply reply) {
    return reply.events().get(reply.events().size() - 1).json();
  }

  static void assertSequenceNumbersCount(Reply reply) {
    for (int i = 0; i < reply.events().size(); i++) {
      assertThat(reply.events().get(i).json().getInteger("sequence_number")).isEqualTo(i);
    }
  }

  @Test
  void streamHasVllmsEventOrderSequenceNumbersAndNoDone() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body = responses("hello there", 5).put("stream", true).put("ignore_eos", true);

    Reply reply = post(sim, "/v1/responses", body);

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.contentType()).startsWith("text/event-stream");
    assertThat(reply.endedNormally()).isTrue();
    assertThat(types(reply))
        .containsExactly(
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed");
    assertSequenceNumbersCount(reply);
    assertThat(reply.body())
        .startsWith("event: response.created\ndata: {")
        .doesNotContain("[DONE]");

    List<JsonObject> events = reply.events().stream().map(Event::json).toList();
    JsonObject created = events.get(0).getJsonObject("response");
    assertThat(created.getString("id")).startsWith("resp_");
    assertThat(created.getString("status")).isEqualTo("in_progress");
    assertThat(created.getJsonArray("output")).isEmpty();
    assertThat(created.getValue("usage")).isNull();
    assertThat(events.get(1).getJsonObject("response")).isEqualTo(created);

    JsonObject item = events.get(2).getJsonObject("item");
    String itemId = item.getString("id");
    assertThat(itemId).startsWith("msg_");
    assertThat(item)
        .isEqualTo(
            new JsonObject()
                .put("id", itemId)
                .put("content", new JsonArray())
                .put("role", "assistant")
                .put("status", "in_progress")
                .put("type", "message"));
    assertThat(events.get(3).getJsonObject("part"))
        .isEqualTo(
            new JsonObject()
                .put("annotations", new JsonArray())
                .put("text", "")
                .put("type", "output_text")
                .put("logprobs", new JsonArray()));
    StringBuilder text = new StringBuilder();
    for (JsonObject delta : events.subList(4, 9)) {
      assertThat(delta.fieldNames())
          .containsExactlyInAnyOrder(
              "content_index",
              "delta",
              "item_id",
              "logprobs",
              "output_index",
              "sequence_number",
              "type");
      assertThat(delta.getString("item_id")).isEqualTo(itemId);
      assertThat(delta.getInteger("output_index")).isZero();
      assertThat(delta.getInteger("content_index")).isZero();
      assertThat(delta.getJsonArray("logprobs")).isEmpty();
      assertThat(delta.getString("delta")).isNotEmpty();
      text.append(delta.getString("delta"));
    }
    assertThat(events.get(9).getString("text")).isEqualTo(text.toString());
    assertThat(events.get(10).getJsonObject("part").getString("text")).isEqualTo(text.toString());
    JsonObject done = events.get(11).getJsonObject("item");
    assertThat(done.getString("status")).isEqualTo("completed");
    assertThat(done.getJsonArray("content").getJsonObject(0).getString("text"))
        .isEqualTo(text.toString());

    JsonObject response = events.get(12).getJsonObject("response");
    assertThat(response.getString("id")).isEqualTo(created.getString("id"));
    // the token budget ended it: vLLM says "incomplete" inside response.completed
    assertThat(response.getString("status")).isEqualTo("incomplete");
    assertThat(response.getJsonObject("incomplete_details"))
        .isEqualTo(new JsonObject().put("reason", "max_output_tokens"));
    assertThat(response.getJsonArray("output")).containsExactly(done);
    int prompt = 3 + 4 + 3; // priming + message overhead + ceil(11 / 4)
    assertThat(response.getJsonObject("usage")).isEqualTo(ResponsesJson.usage(prompt, 5, 0, 0));
    assertThat(response.getJsonObject("usage").getInteger("total_tokens")).isEqualTo(prompt + 5);
  }

  @Test
  void stopFinishIsCompletedAndStreamsTheEosStepAsAnEmptyDelta() throws Exception {
    Simulator sim = startSimulator(FAST);
    for (int i = 0; i < 50; i++) {
      Reply reply = post(sim, "/v1/responses", responses("q" + i, 10).put("stream", true));
      JsonObject response = last(reply).getJsonObject("response");
      if (!"completed".equals(response.getString("status"))) {
        continue;
      }
      assertThat(response.getValue("incomplete_details")).isNull();
      List<String> deltas = deltas(reply, "response.output_text.delta");
      assertThat(deltas.get(deltas.size() - 1)).isEmpty();
      assertThat(deltas.subList(0, deltas.size() - 1)).allSatisfy(d -> assertThat(d).isNotEmpty());
      // one delta per decode step: the EOS token counts in output_tokens, as in vLLM
      assertThat(response.getJsonObject("usage").getInteger("output_tokens"))
          .isEqualTo(deltas.size());
      return;
    }
    throw new AssertionError("no request among 50 stopped before max_output_tokens");
  }

  @Test
  void wholeResponseHasEveryFieldVllmSerialises() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body =
        new JsonObject()
            .put("model", "sim-llama")
            .put("instructions", "be brief")
            .put(
                "input",
                new JsonArray()
                    .add(
                        new JsonObject()
                            .put("type", "message")
                            .put("role", "user")
                            .put(
                                "content",
                                new JsonArray()
                                    .add(
                                        new JsonObject()
                                            .put("type", "input_text")
                                            .put("text", "abcd"))
                                    .add(
                                        new JsonObject()
                                            .put("type", "input_text")
                                            .put("text", "efgh")))))
            .put("metadata", new JsonObject().put("run", "7"))
            .put("max_output_tokens", 4)
            .put("ignore_eos", true);

    Reply reply = post(sim, "/v1/responses", body);

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.contentType()).startsWith("application/json");
    JsonObject json = reply.json();
    assertThat(json.fieldNames())
        .containsExactly(
            "id",
            "created_at",
            "incomplete_details",
            "instructions",
            "metadata",
            "model",
            "object",
            "output",
            "parallel_tool_calls",
            "temperature",
            "tool_choice",
            "tools",
            "top_p",
            "background",
            "max_output_tokens",
            "max_tool_calls",
            "previous_response_id",
            "prompt",
            "reasoning",
            "service_tier",
            "status",
            "text",
            "top_logprobs",
            "truncation",
            "usage",
            "user",
            "input_messages",
            "output_messages",
            "kv_transfer_params");
    assertThat(json.getString("id")).matches("resp_[0-9a-f]{32}");
    assertThat(json.getString("object")).isEqualTo("response");
    assertThat(json.getLong("created_at")).isPositive();
    assertThat(json.getString("model")).isEqualTo("sim-llama");
    assertThat(json.getString("instructions")).isEqualTo("be brief");
    assertThat(json.getJsonObject("metadata")).isEqualTo(new JsonObject().put("run", "7"));
    assertThat(json.getBoolean("parallel_tool_calls")).isTrue();
    assertThat(json.getDouble("temperature")).isEqualTo(1.0);
    assertThat(json.getDouble("top_p")).isEqualTo(1.0);
    assertThat(json.getString("tool_choice")).isEqualTo("auto");
    assertThat(json.getJsonArray("tools")).isEmpty();
    assertThat(json.getBoolean("background")).isFalse();
    assertThat(json.getInteger("max_output_tokens")).isEqualTo(4);
    assertThat(json.getString("service_tier")).isEqualTo("auto");
    assertThat(json.getString("truncation")).isEqualTo("disabled");
    assertThat(json.getString("status")).isEqualTo("incomplete");
    JsonObject message = json.getJsonArray("output").getJsonObject(0);
    assertThat(message.getString("id")).matches("msg_[0-9a-f]{32}");
    assertThat(message.getString("type")).isEqualTo("message");
    assertThat(message.getString("role")).isEqualTo("assistant");
    assertThat(message.getString("status")).isEqualTo("completed");
    JsonObject part = message.getJsonArray("content").getJsonObject(0);
    assertThat(part.getString("type")).isEqualTo("output_text");
    assertThat(part.getJsonArray("annotations")).isEmpty();
    assertThat(part.getString("text").split(" ")).hasSize(4);
    // 3 priming + instructions (4 + ceil(8 / 4)) + the message (4 + ceil(8 / 4))
    assertThat(json.getJsonObject("usage")).isEqualTo(ResponsesJson.usage(15, 4, 0, 0));
  }

  @Test
  void sameRequestSameTextStreamedOrNot() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject body = responses("tell me a story", 30);
    String whole =
        post(sim, "/v1/responses", body)
            .json()
            .getJsonArray("output")
            .getJsonObject(0)
            .getJsonArray("content")
            .getJsonObject(0)
            .getString("text");
    Reply stream = post(sim, "/v1/responses", body.copy().put("stream", true));
    assertThat(String.join("", deltas(stream, "response.output_text.delta"))).isEqualTo(whole);
  }

  @Test
  void storedResponsesCanBeReadAndDeleted() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject created = post(sim, "/v1/responses", responses("keep me", 3)).json();
    String id = created.getString("id");

    Reply read = get(sim, "/v1/responses/" + id);
    assertThat(read.status()).isEqualTo(200);
    assertThat(read.json()).isEqualTo(created);
    assertThat(get(sim, "/v1/responses/" + id + "?stream=true").status()).isEqualTo(400);

    Reply deleted = send(sim, HttpMethod.DELETE, "/v1/responses/" + id);
    assertThat(deleted.status()).isEqualTo(200);
    assertThat(deleted.json())
        .isEqualTo(new JsonObject().put("id", id).put("object", "response").put("deleted", true));

    Reply gone = get(sim, "/v1/responses/" + id);
    assertThat(gone.status()).isEqualTo(404);
    JsonObject error = gone.json().getJsonObject("error");
    assertThat(error.getString("message")).isEqualTo("Response with id '" + id + "' not found.");
    assertThat(error.getString("type")).isEqualTo("invalid_request_error");
    assertThat(error.getString("param")).isEqualTo("response_id");
    assertThat(error.getInteger("code")).isEqualTo(404);
    assertThat(send(sim, HttpMethod.DELETE, "/v1/responses/" + id).status()).isEqualTo(404);

    String unstored =
        post(sim, "/v1/responses", responses("forget me", 2).put("store", false))
            .json()
            .getString("id");
    assertThat(get(sim, "/v1/responses/" + unstored).status()).isEqualTo(404);

    // a streamed response is stored too, as it completed
    Reply stream = post(sim, "/v1/responses", responses("streamed", 2).put("stream", true));
    JsonObject streamed = last(stream).getJsonObject("response");
    assertThat(get(sim, "/v1/responses/" + streamed.getString("id")).json()).isEqualTo(streamed);
  }

  @Test
  void theStoreKeepsTheLatestThousand() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(64));
    List<String> ids = new ArrayList<>();
    int total = ResponseStore.CAPACITY + 1;
    for (int start = 0; start < total; start += 50) {
      List<Future<Reply>> batch = new ArrayList<>();
      for (int i = start; i < Math.min(total, start + 50); i++) {
        batch.add(
            send(
                sim,
                HttpMethod.POST,
                "/v1/responses",
                responses("n" + i, 1).encode(),
                Map.of(),
                null));
      }
      for (Future<Reply> f : batch) {
        ids.add(f.await(TIMEOUT_S, TimeUnit.SECONDS).json().getString("id"));
      }
    }
    assertThat(ids).doesNotHaveDuplicates().hasSize(total);
    // the first one stored was the least recently used one: it left when the 1,001st came
    assertThat(get(sim, "/v1/responses/" + ids.get(0)).status()).isEqualTo(404);
    assertThat(get(sim, "/v1/responses/" + ids.get(1)).status()).isEqualTo(200);
    assertThat(get(sim, "/v1/responses/" + ids.get(total - 1)).status()).isEqualTo(200);
  }

  @Test
  void previousResponseIdCountsTheConversation() throws Exception {
    Simulator sim = startSimulator(FAST);
    JsonObject first = post(sim, "/v1/responses", responses("abcdefgh", 6)).json();
    assertThat(first.getJsonObject("usage").getInteger("input_tokens")).isEqualTo(3 + 4 + 2);
    int outputChars =
        first
            .getJsonArray("output")
            .getJsonObject(0)
            .getJsonArray("content")
            .getJsonObject(0)
            .getString("text")
            .length();

    JsonObject second =
        post(
                sim,
                "/v1/responses",
                responses("xyz", 2)
                    .put("instructions", "sys")
                    .put("previous_response_id", first.getString("id")))
            .json();

    assertThat(second.getString("previous_response_id")).isEqualTo(first.getString("id"));
    // instructions, the first input, the first output (assistant), the new input
    int expected = 3 + (4 + 1) + (4 + 2) + (4 + (outputChars + 3) / 4) + (4 + 1);
    assertThat(second.getJsonObject("usage").getInteger("input_tokens")).isEqualTo(expected);

    Reply unknown =
        post(sim, "/v1/responses", responses("x", 2).put("previous_response_id", "resp_nope"));
    assertThat(unknown.status()).isEqualTo(404);
    assertThat(unknown.json().getJsonObject("error").getString("message"))
        .isEqualTo("Response with id 'resp_nope' not found.");
  }

  @Test
  void backgroundAnswersQueuedAtOnceAndCompletesLater() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        post(
            sim,
            "/v1/responses",
            responses("later", 5).put("background", true).put("ignore_eos", true),
            Map.of("x-sim-decode-step-ms", "20"));

    assertThat(reply.status()).isEqualTo(200);
    JsonObject queued = reply.json();
    assertThat(queued.getString("status")).isEqualTo("queued");
    assertThat(queued.getBoolean("background")).isTrue();
    assertThat(queued.getJsonArray("output")).isEmpty();
    assertThat(queued.getValue("usage")).isNull();
    String id = queued.getString("id");
    assertThat(get(sim, "/v1/responses/" + id).json().getString("status")).isEqualTo("queued");

    eventually(() -> status(sim, id).equals("incomplete"), "the background response finished");
    JsonObject done = get(sim, "/v1/responses/" + id).json();
    assertThat(done.getJsonObject("usage").getInteger("output_tokens")).isEqualTo(5);
    assertThat(done.getJsonArray("output")).hasSize(1);
    eventually(() -> sim.stats().completed() == 1, "counted as completed");

    Reply again = post(sim, "/v1/responses/" + id + "/cancel", new JsonObject());
    assertThat(again.status()).isEqualTo(400);
    assertThat(again.json().getJsonObject("error").getString("message"))
        .isEqualTo("Cannot cancel a synchronous response.");
  }

  @Test
  void backgroundCanBeCancelled() throws Exception {
    Simulator sim = startSimulator(FAST);
    String id =
        post(
                sim,
                "/v1/responses",
                responses("long", 500).put("background", true).put("ignore_eos", true),
                Map.of("x-sim-decode-step-ms", "20"))
            .json()
            .getString("id");
    eventually(() -> sim.stats().running() == 1, "running");

    Reply cancelled = post(sim, "/v1/responses/" + id + "/cancel", new JsonObject());

    assertThat(cancelled.status()).isEqualTo(200);
    assertThat(cancelled.json().getString("status")).isEqualTo("cancelled");
    eventually(() -> sim.stats().cancelled() == 1, "the generation stopped");
    assertThat(sim.stats().running()).isZero();
    assertThat(status(sim, id)).isEqualTo("cancelled");
  }

  @Test
  void backgroundNeedsStoreAndIsNotStreamed() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply noStore =
        post(sim, "/v1/responses", responses("x", 2).put("background", true).put("store", false));
    assertThat(noStore.status()).isEqualTo(400);
    assertThat(noStore.json().getJsonObject("error").getString("message"))
        .isEqualTo("background can only be used when `store` is true");
    Reply streamed =
        post(sim, "/v1/responses", responses("x", 2).put("background", true).put("stream", true));
    assertThat(streamed.status()).isEqualTo(400);
    assertThat(streamed.json().getJsonObject("error").getString("param")).isEqualTo("stream");
  }

  @Test
  void badRequestsAre400AndUnknownModel404() throws Exception {
    Simulator sim = startSimulator(FAST.withDefaultMaxTokens(10).withMaxModelLen(100));
    for (String body :
        List.of(
            "{not json",
            "{\"model\":\"sim-llama\"}",
            "{\"input\":[]}",
            "{\"input\":[{\"type\":\"message\",\"content\":\"no role\"}]}",
            "{\"input\":[{\"type\":\"web_search_call\"}]}",
            "{\"input\":\"x\",\"max_output_tokens\":0}",
            "{\"input\":\"x\",\"max_output_tokens\":95}",
            "{\"input\":\"x\",\"truncation\":\"sometimes\"}",
            "{\"input\":\"" + "x".repeat(400) + "\"}")) {
      Reply reply = post(sim, "/v1/responses", body, Map.of());
      assertThat(reply.status()).as(body).isEqualTo(400);
      assertThat(reply.json().getJsonObject("error").getInteger("code")).isEqualTo(400);
    }
    Reply model = post(sim, "/v1/responses", responses("x", 2).put("model", "gpt-9"));
    assertThat(model.status()).isEqualTo(404);
    assertThat(model.json().getJsonObject("error").getString("message"))
        .isEqualTo("The model `gpt-9` does not exist.");
  }

  @Test
  void reasoningStreamsAReasoningItemFirst() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        post(
            sim,
            "/v1/responses",
            responses("think", 8).put("stream", true).put("ignore_eos", true),
            Map.of("x-sim-reasoning-tokens", "3"));

    List<String> expected = new ArrayList<>();
    expected.addAll(
        List.of(
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"));
    for (int i = 0; i < 3; i++) {
      expected.add("response.reasoning_text.delta");
    }
    expected.addAll(
        List.of(
            "response.reasoning_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added"));
    for (int i = 0; i < 5; i++) {
      expected.add("response.output_text.delta");
    }
    expected.addAll(
        List.of(
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"));
    assertThat(types(reply)).isEqualTo(expected);
    assertSequenceNumbersCount(reply);

    List<JsonObject> events = reply.events().stream().map(Event::json).toList();
    JsonObject reasoningItem = events.get(2).getJsonObject("item");
    assertThat(reasoningItem.getString("type")).isEqualTo("reasoning");
    assertThat(reasoningItem.getString("id")).startsWith("rs_");
    assertThat(events.get(3).getJsonObject("part").getString("type")).isEqualTo("reasoning_text");
    String reasoning = String.join("", deltas(reply, "response.reasoning_text.delta"));
    assertThat(events.get(7).getString("text")).isEqualTo(reasoning);
    JsonObject reasoningDone = events.get(9).getJsonObject("item");
    assertThat(reasoningDone.getString("status")).isEqualTo("completed");
    assertThat(reasoningDone.getJsonArray("content").getJsonObject(0).getString("text"))
        .isEqualTo(reasoning);
    assertThat(events.get(10).getInteger("output_index")).isEqualTo(1);
    assertThat(events.get(12).getInteger("output_index")).isEqualTo(1);

    JsonObject response = last(reply).getJsonObject("response");
    JsonArray output = response.getJsonArray("output");
    assertThat(output).hasSize(2);
    assertThat(output.getJsonObject(0).getString("type")).isEqualTo("reasoning");
    assertThat(output.getJsonObject(0).getValue("status")).isNull();
    assertThat(output.getJsonObject(1).getString("type")).isEqualTo("message");
    JsonObject usage = response.getJsonObject("usage");
    assertThat(usage.getInteger("output_tokens")).isEqualTo(8);
    assertThat(usage.getJsonObject("output_tokens_details").getInteger("reasoning_tokens"))
        .isEqualTo(3);
  }

  // --- faults -------------------------------------------------------------------------------

  private Reply stream(Simulator sim, int tokens, Map<String, String> headers) throws Exception {
    return post(
        sim,
        "/v1/responses",
        responses("x", tokens).put("stream", true).put("ignore_eos", true),
        headers);
  }

  @Test
  void errorFaultOnAStreamIsResponseFailedAfterNDeltas() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = stream(sim, 10, Map.of("x-sim-fault", "error", "x-sim-fault-after-tokens", "2"));

    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.endedNormally()).isTrue();
    assertThat(types(reply))
        .containsExactly(
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.failed");
    assertSequenceNumbersCount(reply);
    JsonObject failed = last(reply).getJsonObject("response");
    assertThat(failed.getString("status")).isEqualTo("failed");
    assertThat(failed.getJsonObject("error").getString("code")).isEqualTo("server_error");
    assertThat(failed.getJsonObject("error").getString("message")).contains("x-sim-fault: error");
    JsonObject partial = failed.getJsonArray("output").getJsonObject(0);
    assertThat(partial.getString("status")).isEqualTo("incomplete");
    assertThat(partial.getJsonArray("content").getJsonObject(0).getString("text"))
        .isEqualTo(String.join("", deltas(reply, "response.output_text.delta")));
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
    assertThat(sim.stats().running()).isZero();
  }

  @Test
  void drawnErrorFailsTheStreamBeforeAnyToken() throws Exception {
    Simulator sim = startSimulator(FAST.withErrorRate(1));
    Reply reply = stream(sim, 5, Map.of());
    assertThat(types(reply))
        .containsExactly("response.created", "response.in_progress", "response.failed");
    assertThat(last(reply).getJsonObject("response").getJsonArray("output")).isEmpty();
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
    assertThat(sim.stats().running()).isZero();

    Reply whole = post(sim, "/v1/responses", responses("x", 2));
    assertThat(whole.status()).isEqualTo(500);
    assertThat(whole.json().getJsonObject("error").getString("type"))
        .isEqualTo("InternalServerError");
  }

  @Test
  void errorEventFaultEndsTheStreamWithABareErrorEvent() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(sim, 10, Map.of("x-sim-fault", "error_event", "x-sim-fault-after-tokens", "3"));

    assertThat(reply.endedNormally()).isTrue();
    List<String> types = types(reply);
    assertThat(types).hasSize(2 + 2 + 3 + 1).endsWith("error");
    assertThat(types).doesNotContain("response.completed", "response.failed");
    assertSequenceNumbersCount(reply);
    JsonObject error = last(reply);
    assertThat(error)
        .isEqualTo(
            new JsonObject()
                .put("code", "server_error")
                .put("message", "Simulated engine failure (x-sim-fault: error_event)")
                .put("param", null)
                .put("sequence_number", 7)
                .put("type", "error"));
    assertThat(reply.body()).endsWith("event: error\ndata: " + error.encode() + "\n\n");
    eventually(() -> sim.stats().failed() == 1, "counted as failed");

    Reply whole =
        post(sim, "/v1/responses", responses("x", 4), Map.of("x-sim-fault", "error_event"));
    assertThat(whole.status()).isEqualTo(500);
    assertThat(whole.json().getJsonObject("error").getString("message"))
        .isEqualTo("Internal server error");
  }

  @Test
  void disconnectFaultClosesWithoutATerminalEvent() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(sim, 10, Map.of("x-sim-fault", "disconnect", "x-sim-fault-after-tokens", "2"));
    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.endedNormally()).isFalse();
    assertThat(deltas(reply, "response.output_text.delta")).hasSize(2);
    assertThat(types(reply)).last().isEqualTo("response.output_text.delta");
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
    assertThat(sim.stats().running()).isZero();
  }

  @Test
  void malformedFaultSendsABrokenEventAndCarriesOn() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = stream(sim, 4, Map.of("x-sim-fault", "malformed"));
    assertThat(reply.body()).contains(ResponsesExchange.MALFORMED_EVENT);
    List<Event> events = reply.events();
    assertThat(events.get(5).data()).isEqualTo("{not json");
    assertThat(events.get(events.size() - 1).name()).isEqualTo("response.completed");
    Reply whole = post(sim, "/v1/responses", responses("x", 2), Map.of("x-sim-fault", "malformed"));
    assertThat(whole.body()).isEqualTo("{not json");
  }

  @Test
  void stallFaultPausesTheDeltas() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
            sim,
            5,
            Map.of(
                "x-sim-fault", "stall", "x-sim-fault-after-tokens", "2", "x-sim-stall-ms", "200"));
    List<Event> deltas =
        reply.events().stream().filter(e -> "response.output_text.delta".equals(e.name())).toList();
    assertThat(deltas).hasSize(5);
    // a lower bound that a late second delta cannot shrink: the stall starts after it was sent
    assertThat((deltas.get(2).nanos() - reply.startNanos()) / 1e6).isGreaterThanOrEqualTo(200);
    assertThat(last(reply).getString("type")).isEqualTo("response.completed");
  }

  @Test
  void resetFaultClosesBeforeAnyByte() throws Exception {
    Simulator sim = startSimulator(FAST);
    Throwable failure =
        send(
                sim,
                HttpMethod.POST,
                "/v1/responses",
                responses("x", 3).put("stream", true).encode(),
                Map.of("x-sim-fault", "reset"),
                null)
            .transform(ar -> Future.succeededFuture(ar.cause()))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(failure).isNotNull();
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
  }

  private String status(Simulator sim, String id) {
    try {
      return get(sim, "/v1/responses/" + id).json().getString("status");
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private Reply send(Simulator sim, HttpMethod method, String path) throws Exception {
    return send(sim, method, path, null, Map.of(), null).await(TIMEOUT_S, TimeUnit.SECONDS);
  }
}
