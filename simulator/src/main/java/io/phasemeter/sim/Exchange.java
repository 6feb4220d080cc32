package io.phasemeter.sim;

import io.phasemeter.sim.FaultPlan.Kind;
import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonObject;

/**
 * Writes one generation to its client: an SSE stream, one {@code write()} per chunk, or a single
 * JSON body; and applies the output-side faults ({@code disconnect}, {@code malformed}, {@code
 * error_event}).
 */
final class Exchange implements Sequence.Listener {
  static final String MALFORMED_EVENT = "data: {not json\n\n";

  private final HttpServerRequest request;
  private final HttpServerResponse response;
  private final ParsedRequest parsed;
  private final FaultPlan fault;
  private final Engine engine;
  private final String id;
  private final long created;
  private final boolean promptTokensDetails;
  private Sequence sequence;
  private int contentChunks;
  private boolean malformedSent;
  private final StringBuilder text = new StringBuilder();

  Exchange(
      HttpServerRequest request,
      ParsedRequest parsed,
      FaultPlan fault,
      Engine engine,
      String id,
      long created,
      boolean promptTokensDetails) {
    this.request = request;
    this.response = request.response();
    this.parsed = parsed;
    this.fault = fault;
    this.engine = engine;
    this.id = id;
    this.created = created;
    this.promptTokensDetails = promptTokensDetails;
  }

  void attach(Sequence sequence) {
    this.sequence = sequence;
  }

  /** Sends the stream's headers now, as vLLM does before the engine produces anything. */
  void open() {
    if (parsed.stream()) {
      response
          .setStatusCode(200)
          .setChunked(true)
          .putHeader("content-type", "text/event-stream; charset=utf-8")
          .putHeader("cache-control", "no-cache");
      response.writeHead();
    }
  }

  @Override
  public void onToken(int index, String tokenText, String finishReason) {
    if (response.closed()) {
      engine.cancel(sequence);
      return;
    }
    if (!tokenText.isEmpty()) {
      contentChunks++;
    }
    if (parsed.stream()) {
      if (index == 0 && parsed.endpoint() == Endpoint.CHAT) {
        response.write(OpenAiJson.sse(OpenAiJson.roleChunk(id, created, parsed.model())));
      }
      response.write(
          OpenAiJson.sse(
              OpenAiJson.tokenChunk(
                  parsed.endpoint(), id, created, parsed.model(), tokenText, finishReason)));
      if (fault.kind() == Kind.MALFORMED
          && !malformedSent
          && contentChunks >= fault.afterTokens()) {
        malformedSent = true;
        response.write(MALFORMED_EVENT);
      }
    } else {
      text.append(tokenText);
    }
    if (fault.kind() == Kind.DISCONNECT
        && (contentChunks >= fault.afterTokens() || finishReason != null)) {
      engine.fail(sequence);
      request.connection().close();
      return;
    }
    if (fault.kind() == Kind.ERROR_EVENT
        && (contentChunks >= fault.afterTokens() || finishReason != null)) {
      // vLLM's GenerationError: in-band on a stream (then [DONE]), a 500 for a whole response.
      engine.fail(sequence);
      JsonObject error = OpenAiJson.generationError();
      if (parsed.stream()) {
        response.write(OpenAiJson.sse(error));
        response.end(OpenAiJson.DONE);
      } else {
        response
            .setStatusCode(500)
            .putHeader("content-type", "application/json")
            .end(error.encode());
      }
      return;
    }
    if (finishReason == null) {
      return;
    }
    int completionTokens = index + 1;
    int cached = promptTokensDetails ? sequence.cachedTokens : 0;
    if (parsed.stream()) {
      if (parsed.includeUsage()) {
        response.write(
            OpenAiJson.sse(
                OpenAiJson.usageChunk(
                    parsed.endpoint(),
                    id,
                    created,
                    parsed.model(),
                    parsed.promptTokens(),
                    completionTokens,
                    cached)));
      }
      response.end(OpenAiJson.DONE);
    } else {
      response.setStatusCode(200).putHeader("content-type", "application/json");
      if (fault.kind() == Kind.MALFORMED) {
        response.end("{not json");
      } else {
        response.end(
            OpenAiJson.response(
                    parsed, id, created, text.toString(), finishReason, completionTokens, cached)
                .encode());
      }
    }
  }
}
