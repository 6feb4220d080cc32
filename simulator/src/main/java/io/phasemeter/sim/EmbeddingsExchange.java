package io.phasemeter.sim;

import io.phasemeter.sim.FaultPlan.Kind;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;

/**
 * Answers one embeddings request once the engine finished its prefill; applies the output-side
 * faults ({@code disconnect}, {@code malformed}, {@code error_event}). A {@code stall} has no
 * effect: a pooling request has no second step to hold back ({@code x-sim-ttft-ms} holds it).
 */
final class EmbeddingsExchange implements Sequence.Listener {
  private final HttpServerRequest request;
  private final HttpServerResponse response;
  private final Embeddings.Request embeddings;
  private final FaultPlan fault;
  private final Engine engine;
  private final long seed;
  private final String id;
  private final long created;
  private Sequence sequence;

  EmbeddingsExchange(
      HttpServerRequest request,
      Embeddings.Request embeddings,
      FaultPlan fault,
      Engine engine,
      long seed,
      String id,
      long created) {
    this.request = request;
    this.response = request.response();
    this.embeddings = embeddings;
    this.fault = fault;
    this.engine = engine;
    this.seed = seed;
    this.id = id;
    this.created = created;
  }

  void attach(Sequence sequence) {
    this.sequence = sequence;
  }

  @Override
  public void onToken(int index, String text, String finishReason) {
    if (response.closed()) {
      engine.cancel(sequence);
      return;
    }
    if (fault.kind() == Kind.DISCONNECT) {
      engine.fail(sequence);
      request.connection().close();
      return;
    }
    response.putHeader("content-type", "application/json");
    if (fault.kind() == Kind.ERROR_EVENT) {
      engine.fail(sequence);
      response.setStatusCode(500).end(OpenAiJson.generationError().encode());
    } else if (fault.kind() == Kind.MALFORMED) {
      response.setStatusCode(200).end("{not json");
    } else {
      response.setStatusCode(200).end(Embeddings.response(embeddings, seed, id, created).encode());
    }
  }
}
