package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import io.vertx.junit5.VertxExtension;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** Starts simulators on port 0 and talks to them over HTTP, as the proxy does. */
@ExtendWith(VertxExtension.class)
abstract class SimTestBase {
  static final long TIMEOUT_S = 15;

  /** Fast timings so the whole suite stays quick; tests override what they measure. */
  static final SimulatorConfig FAST =
      SimulatorConfig.defaults()
          .withPort(0)
          .withPrefillTokensPerSecond(1_000_000)
          .withDecodeStepMs(1)
          .withDecodeStepGrowth(0);

  Vertx vertx;
  HttpClientAgent client;
  final List<Simulator> started = new ArrayList<>();

  @BeforeEach
  void setUpClient(Vertx vertx) {
    this.vertx = vertx;
    this.client = vertx.createHttpClient(new PoolOptions().setHttp1MaxSize(16));
  }

  @AfterEach
  void closeAll() throws Exception {
    for (Simulator s : started) {
      s.close().await(TIMEOUT_S, TimeUnit.SECONDS);
    }
    client.close().await(TIMEOUT_S, TimeUnit.SECONDS);
  }

  Simulator startSimulator(SimulatorConfig config) throws Exception {
    Simulator sim = Simulator.start(vertx, config).await(TIMEOUT_S, TimeUnit.SECONDS);
    started.add(sim);
    return sim;
  }

  /** One finished exchange: status, headers, body and, for streams, the SSE events in order. */
  record Reply(
      int status,
      String contentType,
      String body,
      List<Event> events,
      boolean endedNormally,
      long startNanos,
      MultiMap headers) {
    JsonObject json() {
      return new JsonObject(body);
    }

    List<String> data() {
      return events.stream().map(Event::data).toList();
    }

    /** Events whose JSON carries generated text (not the role chunk, usage chunk or [DONE]). */
    List<Event> contentEvents() {
      return events.stream().filter(Event::hasContent).toList();
    }

    double firstContentMs() {
      return (contentEvents().get(0).nanos - startNanos) / 1e6;
    }
  }

  /**
   * One SSE event and when the client parsed it: its {@code data:} and, for the Responses API's
   * named events, its {@code event:} line (null when the event has none).
   */
  record Event(String name, String data, long nanos) {
    Event(String data, long nanos) {
      this(null, data, nanos);
    }

    boolean isJson() {
      try {
        new JsonObject(data);
        return true;
      } catch (RuntimeException e) {
        return false;
      }
    }

    JsonObject json() {
      return new JsonObject(data);
    }

    boolean hasContent() {
      if (!isJson()) {
        return false;
      }
      var choices = json().getJsonArray("choices");
      if (choices == null || choices.isEmpty()) {
        return false;
      }
      JsonObject choice = choices.getJsonObject(0);
      String text =
          choice.containsKey("delta")
              ? choice.getJsonObject("delta").getString("content")
              : choice.getString("text");
      return text != null && !text.isEmpty();
    }
  }

  Reply post(Simulator sim, String path, JsonObject body) throws Exception {
    return post(sim, path, body.encode(), Map.of());
  }

  Reply post(Simulator sim, String path, JsonObject body, Map<String, String> headers)
      throws Exception {
    return post(sim, path, body.encode(), headers);
  }

  Reply post(Simulator sim, String path, String body, Map<String, String> headers)
      throws Exception {
    return send(sim, HttpMethod.POST, path, body, headers, null).await(TIMEOUT_S, TimeUnit.SECONDS);
  }

  Reply get(Simulator sim, String path) throws Exception {
    return send(sim, HttpMethod.GET, path, null, Map.of(), null).await(TIMEOUT_S, TimeUnit.SECONDS);
  }

  /**
   * Sends a request and collects the reply. {@code onEvent} (may be null) sees each event as it
   * arrives, with the response, so a test can close the connection mid-stream.
   */
  Future<Reply> send(
      Simulator sim,
      HttpMethod method,
      String path,
      String body,
      Map<String, String> headers,
      java.util.function.BiConsumer<Event, HttpClientResponse> onEvent) {
    long start = System.nanoTime();
    Promise<Reply> done = Promise.promise();
    RequestOptions options =
        new RequestOptions()
            .setMethod(method)
            .setHost("127.0.0.1")
            .setPort(sim.port())
            .setURI(path);
    headers.forEach(options::putHeader);
    if (body != null) {
      options.putHeader("content-type", "application/json");
    }
    // Issue the request from an event-loop context so that the response handlers are set on the
    // same tick as the response arrives (not later, from the test thread).
    vertx.getOrCreateContext().runOnContext(v -> exchange(options, body, start, done, onEvent));
    return done.future();
  }

  private void exchange(
      RequestOptions options,
      String body,
      long start,
      Promise<Reply> done,
      java.util.function.BiConsumer<Event, HttpClientResponse> onEvent) {
    client
        .request(options)
        .compose(req -> body == null ? req.send() : req.send(body))
        .onFailure(done::tryFail)
        .onSuccess(
            resp -> {
              List<Event> events = new ArrayList<>();
              StringBuilder all = new StringBuilder();
              StringBuilder pending = new StringBuilder();
              resp.handler(
                  buf -> {
                    long now = System.nanoTime();
                    String s = buf.toString();
                    all.append(s);
                    pending.append(s);
                    int idx;
                    while ((idx = pending.indexOf("\n\n")) >= 0) {
                      String block = pending.substring(0, idx);
                      pending.delete(0, idx + 2);
                      Event e = parse(block, now);
                      if (e != null) {
                        events.add(e);
                        if (onEvent != null) {
                          onEvent.accept(e, resp);
                        }
                      }
                    }
                  });
              resp.exceptionHandler(
                  err ->
                      done.tryComplete(
                          new Reply(
                              resp.statusCode(),
                              resp.getHeader("content-type"),
                              all.toString(),
                              events,
                              false,
                              start,
                              resp.headers())));
              resp.endHandler(
                  v ->
                      done.tryComplete(
                          new Reply(
                              resp.statusCode(),
                              resp.getHeader("content-type"),
                              all.toString(),
                              events,
                              true,
                              start,
                              resp.headers())));
              resp.request()
                  .connection()
                  .closeHandler(
                      v ->
                          done.tryComplete(
                              new Reply(
                                  resp.statusCode(),
                                  resp.getHeader("content-type"),
                                  all.toString(),
                                  events,
                                  false,
                                  start,
                                  resp.headers())));
            });
  }

  /** {@code data: x} or {@code event: name\ndata: x}; null for anything else. */
  private static Event parse(String block, long now) {
    if (block.startsWith("data: ")) {
      return new Event(block.substring(6), now);
    }
    if (block.startsWith("event: ")) {
      int nl = block.indexOf('\n');
      if (nl > 0 && block.startsWith("data: ", nl + 1)) {
        return new Event(block.substring(7, nl), block.substring(nl + 7), now);
      }
    }
    return null;
  }

  static JsonObject chat(String content, int maxTokens) {
    return new JsonObject()
        .put("model", "sim-llama")
        .put(
            "messages",
            new io.vertx.core.json.JsonArray()
                .add(new JsonObject().put("role", "user").put("content", content)))
        .put("max_tokens", maxTokens);
  }

  static JsonObject streamed(JsonObject body, boolean includeUsage) {
    body.put("stream", true);
    if (includeUsage) {
      body.put("stream_options", new JsonObject().put("include_usage", true));
    }
    return body;
  }

  static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        assertThat(condition.getAsBoolean()).as(what).isTrue();
      }
      Thread.sleep(5);
    }
  }

  static Buffer buffer(String s) {
    return Buffer.buffer(s);
  }
}
