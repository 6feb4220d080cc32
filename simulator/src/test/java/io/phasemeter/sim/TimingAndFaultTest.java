package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * Continuous batching, per-request timing headers, cancellation and injected faults, observed over
 * HTTP. Timing assertions are lower bounds or orderings only.
 */
class TimingAndFaultTest extends SimTestBase {

  private Future<Reply> stream(Simulator sim, JsonObject body, Map<String, String> headers) {
    return send(sim, HttpMethod.POST, "/v1/chat/completions", body.encode(), headers, null);
  }

  @Test
  void withOneSlotTheSecondRequestWaitsForTheFirst() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(1).withDecodeStepMs(5));
    JsonObject body = streamed(chat("first", 20).put("ignore_eos", true), false);

    Future<Reply> first = stream(sim, body, Map.of());
    eventually(() -> sim.stats().running() == 1, "first request running");
    Future<Reply> second = stream(sim, body.copy(), Map.of());
    eventually(() -> sim.stats().waiting() == 1, "second request waiting");

    Reply a = first.await(TIMEOUT_S, TimeUnit.SECONDS);
    Reply b = second.await(TIMEOUT_S, TimeUnit.SECONDS);
    List<Event> aContent = a.contentEvents();
    assertThat(aContent).hasSize(20);
    assertThat(b.contentEvents()).hasSize(20);
    // 19 decode steps of 5 ms after the first token: the first request lasts at least 95 ms
    assertThat((aContent.get(19).nanos() - a.startNanos()) / 1e6).isGreaterThanOrEqualTo(95);
    // the second's first token comes only after the first's last token
    assertThat(b.contentEvents().get(0).nanos()).isGreaterThan(aContent.get(19).nanos());
    eventually(() -> sim.stats().equals(new SimulatorStats(0, 0, 2, 0, 0, 2)), "both completed");
  }

  @Test
  void ttftHeaderHoldsTheFirstToken() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(sim, streamed(chat("hold", 3), false), Map.of("x-sim-ttft-ms", "150"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(reply.firstContentMs()).isGreaterThanOrEqualTo(150);
    // the role chunk rides with the first token, as in vLLM
    assertThat((reply.events().get(0).nanos() - reply.startNanos()) / 1e6)
        .isGreaterThanOrEqualTo(150);
  }

  @Test
  void prefillTimeDelaysTheFirstToken() throws Exception {
    Simulator sim = startSimulator(FAST.withPrefillTokensPerSecond(1000));
    // 3 + 4 + ceil(400 / 4) = 107 prompt tokens at 1000 tok/s = 107 ms
    Reply reply =
        stream(sim, streamed(chat("y".repeat(400), 2), false), Map.of())
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(reply.firstContentMs()).isGreaterThanOrEqualTo(107);
  }

  @Test
  void decodeStepHeaderSpacesTheTokens() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
                sim,
                streamed(chat("slow", 6).put("ignore_eos", true), false),
                Map.of("x-sim-decode-step-ms", "30"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    List<Event> content = reply.contentEvents();
    // tokens follow a schedule (no drift): token k is due k steps after the first one's due time
    assertThat((content.get(5).nanos() - reply.startNanos()) / 1e6).isGreaterThanOrEqualTo(150);
  }

  @Test
  void clientDisconnectMidStreamCancelsAndFreesTheSlot() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(1).withDecodeStepMs(20));
    leaveMidStream(sim);
    double generated = generated(sim);
    Thread.sleep(100);
    assertThat(generated(sim)).as("no tokens for a gone client").isEqualTo(generated);

    // the freed slot serves the next request at once
    Reply next =
        stream(sim, streamed(chat("next", 2), false), Map.of()).await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(next.data()).last().isEqualTo("[DONE]");
  }

  @Test
  void clientLeavingTheQueueIsCancelled() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(1));
    Future<Reply> holder =
        stream(sim, streamed(chat("hold", 1), false), Map.of("x-sim-ttft-ms", "400"));
    eventually(() -> sim.stats().running() == 1, "first running");
    AtomicBoolean sent = new AtomicBoolean();
    vertx
        .getOrCreateContext()
        .runOnContext(
            v ->
                client
                    .request(
                        new io.vertx.core.http.RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(sim.port())
                            .setURI("/v1/chat/completions"))
                    .onSuccess(
                        req -> {
                          req.end(chat("queued", 5).encode());
                          vertx.setTimer(
                              50,
                              id -> {
                                sent.set(true);
                                req.connection().close();
                              });
                        }));
    eventually(sent::get, "second request sent");
    eventually(() -> sim.stats().cancelled() == 1, "queued request cancelled");
    assertThat(sim.stats().waiting()).isZero();
    holder.await(TIMEOUT_S, TimeUnit.SECONDS);
    eventually(() -> sim.stats().running() == 0, "slot free");
    eventually(() -> sim.stats().completed() == 1, "first completed");
  }

  @Test
  void fullQueueIs503() throws Exception {
    Simulator sim = startSimulator(FAST.withSlots(1).withMaxQueue(0));
    Future<Reply> holder =
        stream(sim, streamed(chat("hold", 1), false), Map.of("x-sim-ttft-ms", "200"));
    eventually(() -> sim.stats().running() == 1, "first running");
    Reply refused = post(sim, "/v1/chat/completions", chat("more", 1));
    assertThat(refused.status()).isEqualTo(503);
    assertThat(refused.json().getJsonObject("error").getInteger("code")).isEqualTo(503);
    holder.await(TIMEOUT_S, TimeUnit.SECONDS);
  }

  @Test
  void errorFaultIs500BeforeAnyStreamByte() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(sim, streamed(chat("x", 3), true), Map.of("x-sim-fault", "error"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(reply.status()).isEqualTo(500);
    assertThat(reply.contentType()).startsWith("application/json");
    JsonObject error = reply.json().getJsonObject("error");
    assertThat(error.getString("type")).isEqualTo("InternalServerError");
    assertThat(error.getInteger("code")).isEqualTo(500);
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
  }

  @Test
  void resetFaultClosesTheConnectionWithoutAResponse() throws Exception {
    Simulator sim = startSimulator(FAST);
    Throwable failure =
        stream(sim, streamed(chat("x", 3), false), Map.of("x-sim-fault", "reset"))
            .transform(ar -> Future.succeededFuture(ar.cause()))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(failure).isNotNull();
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
  }

  @Test
  void stallFaultPausesThenContinues() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
                sim,
                streamed(chat("x", 5).put("ignore_eos", true), false),
                Map.of(
                    "x-sim-fault", "stall",
                    "x-sim-fault-after-tokens", "2",
                    "x-sim-stall-ms", "200"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    List<Event> content = reply.contentEvents();
    assertThat(content).hasSize(5);
    assertThat((content.get(2).nanos() - content.get(1).nanos()) / 1e6).isGreaterThanOrEqualTo(200);
    assertThat(reply.data()).last().isEqualTo("[DONE]");
    eventually(() -> sim.stats().completed() == 1, "counted as completed");
  }

  @Test
  void stallWithoutEndHoldsTheSlotUntilTheClientLeaves() throws Exception {
    Simulator sim = startSimulator(FAST);
    AtomicBoolean gotFirst = new AtomicBoolean();
    Future<Reply> reply =
        send(
            sim,
            HttpMethod.POST,
            "/v1/chat/completions",
            streamed(chat("x", 5).put("ignore_eos", true), false).encode(),
            Map.of("x-sim-fault", "stall"),
            (event, response) -> {
              if (event.hasContent()) {
                gotFirst.set(true);
              }
            });
    eventually(gotFirst::get, "first token");
    Thread.sleep(150);
    assertThat(sim.stats().running()).isEqualTo(1);
    assertThat(generated(sim)).isEqualTo(1);
    client.close().await(TIMEOUT_S, TimeUnit.SECONDS);
    eventually(() -> sim.stats().cancelled() == 1, "cancelled");
    assertThat(sim.stats().running()).isZero();
    assertThat(reply.await(TIMEOUT_S, TimeUnit.SECONDS).endedNormally()).isFalse();
    client = vertx.createHttpClient();
  }

  @Test
  void disconnectFaultClosesAfterNContentChunks() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
                sim,
                streamed(chat("x", 10).put("ignore_eos", true), false),
                Map.of("x-sim-fault", "disconnect", "x-sim-fault-after-tokens", "3"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.endedNormally()).isFalse();
    assertThat(reply.contentEvents()).hasSize(3);
    assertThat(reply.data()).doesNotContain("[DONE]");
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
    assertThat(sim.stats().cancelled()).isZero();
    assertThat(sim.stats().running()).isZero();
  }

  @Test
  void malformedFaultEmitsABrokenEventThenContinues() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
                sim,
                streamed(chat("x", 4).put("ignore_eos", true), false),
                Map.of("x-sim-fault", "malformed"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    List<String> data = reply.data();
    int broken = data.indexOf("{not json");
    assertThat(broken).isEqualTo(2); // role chunk, first content chunk, then the broken event
    assertThat(reply.contentEvents()).hasSize(4);
    assertThat(data).last().isEqualTo("[DONE]");
  }

  @Test
  void errorEventFaultReportsVllmsGenerationErrorInBand() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply =
        stream(
                sim,
                streamed(chat("x", 10).put("ignore_eos", true), true),
                Map.of("x-sim-fault", "error_event", "x-sim-fault-after-tokens", "2"))
            .await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(reply.status()).isEqualTo(200);
    assertThat(reply.endedNormally()).isTrue();
    assertThat(reply.contentEvents()).hasSize(2);
    List<String> data = reply.data();
    assertThat(data).last().isEqualTo("[DONE]");
    // vLLM: data: {"error": …} then data: [DONE], no usage chunk
    assertThat(new JsonObject(data.get(data.size() - 2)))
        .isEqualTo(
            new JsonObject()
                .put(
                    "error",
                    new JsonObject()
                        .put("message", "Internal server error")
                        .put("type", "InternalServerError")
                        .put("param", null)
                        .put("code", 500)));
    eventually(() -> sim.stats().failed() == 1, "counted as failed");
    assertThat(sim.stats().running()).isZero();

    Reply whole =
        post(
            sim,
            "/v1/completions",
            new JsonObject().put("prompt", "x").put("max_tokens", 5),
            Map.of("x-sim-fault", "error_event"));
    assertThat(whole.status()).isEqualTo(500);
    assertThat(whole.json().getJsonObject("error").getString("type"))
        .isEqualTo("InternalServerError");
  }

  @Test
  void unknownFaultHeaderIs400() throws Exception {
    Simulator sim = startSimulator(FAST);
    Reply reply = post(sim, "/v1/chat/completions", chat("x", 2), Map.of("x-sim-fault", "boom"));
    assertThat(reply.status()).isEqualTo(400);
    assertThat(reply.json().getJsonObject("error").getString("message")).contains("x-sim-fault");
  }

  @Test
  void configuredErrorRateFailsEveryRequestAtOne() throws Exception {
    Simulator sim = startSimulator(FAST.withErrorRate(1));
    for (int i = 0; i < 3; i++) {
      assertThat(post(sim, "/v1/chat/completions", chat("x", 2)).status()).isEqualTo(500);
    }
    eventually(() -> sim.stats().failed() == 3, "counted as failed");
  }

  @Test
  void configuredFaultDrawsAreDeterministic() throws Exception {
    SimulatorConfig config = FAST.withErrorRate(0.5).withSeed(99);
    List<Integer> first = statuses(startSimulator(config));
    List<Integer> second = statuses(startSimulator(config));
    assertThat(first).isEqualTo(second).contains(200, 500);
  }

  private List<Integer> statuses(Simulator sim) throws Exception {
    List<Integer> statuses = new java.util.ArrayList<>();
    for (int i = 0; i < 16; i++) {
      statuses.add(post(sim, "/v1/chat/completions", chat("x", 1)).status());
    }
    return statuses;
  }

  @Test
  void sharedStepClockServesConcurrentStreamsOverHttp() throws Exception {
    Simulator sim =
        startSimulator(
            FAST.withStepClock(SimulatorConfig.StepClock.SHARED).withDecodeStepMs(5).withSlots(8));
    List<Future<Reply>> replies = new java.util.ArrayList<>();
    for (int i = 0; i < 20; i++) {
      replies.add(stream(sim, streamed(chat("s" + i, 6).put("ignore_eos", true), true), Map.of()));
    }
    // one with its own decode step (its own clock) and one with a ttft hold, among them
    replies.add(
        stream(
            sim,
            streamed(chat("own", 4).put("ignore_eos", true), false),
            Map.of("x-sim-decode-step-ms", "3")));
    replies.add(
        stream(
            sim,
            streamed(chat("held", 4).put("ignore_eos", true), false),
            Map.of("x-sim-ttft-ms", "20")));
    for (int i = 0; i < replies.size(); i++) {
      Reply r = replies.get(i).await(TIMEOUT_S, TimeUnit.SECONDS);
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.contentEvents()).hasSize(i < 20 ? 6 : 4);
      assertThat(r.data()).last().isEqualTo("[DONE]");
    }
    eventually(
        () -> sim.stats().equals(new SimulatorStats(0, 0, 22, 0, 0, 22)), "all 22 completed");
    assertThat(generated(sim)).isEqualTo(20 * 6 + 2 * 4);
  }

  @Test
  void sharedStepClockClientDisconnectFreesTheSlot() throws Exception {
    Simulator sim =
        startSimulator(
            FAST.withStepClock(SimulatorConfig.StepClock.SHARED).withSlots(1).withDecodeStepMs(20));
    leaveMidStream(sim);
    Reply next =
        stream(sim, streamed(chat("next", 2), false), Map.of()).await(TIMEOUT_S, TimeUnit.SECONDS);
    assertThat(next.data()).last().isEqualTo("[DONE]");
    eventually(() -> sim.stats().completed() == 1, "the next one completed");
  }

  /** A streamed request whose client closes its connection at the first content event. */
  private void leaveMidStream(Simulator sim) throws Exception {
    AtomicBoolean closed = new AtomicBoolean();
    send(
        sim,
        HttpMethod.POST,
        "/v1/chat/completions",
        streamed(chat("bye", 200).put("ignore_eos", true), false).encode(),
        Map.of(),
        (event, response) -> {
          if (event.hasContent() && closed.compareAndSet(false, true)) {
            response.request().connection().close();
          }
        });
    eventually(() -> sim.stats().cancelled() == 1, "cancelled after the client left");
    assertThat(sim.stats().running()).isZero();
  }

  private double generated(Simulator sim) throws Exception {
    return ProtocolTest.sample(
        get(sim, "/metrics").body(), "vllm:generation_tokens_total{model_name=\"sim-llama\"}");
  }
}
