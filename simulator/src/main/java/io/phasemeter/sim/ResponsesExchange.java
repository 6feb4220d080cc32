package io.phasemeter.sim;

import io.phasemeter.sim.FaultPlan.Kind;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Writes one Responses generation: a stream of events, one JSON response, or, for a background
 * request, nothing but the stored response it keeps up to date. Applies the output-side faults.
 *
 * <p>A stream is, for a plain model: {@code response.created}, {@code response.in_progress} (both
 * at once, before the engine produces anything), then with the first token {@code
 * response.output_item.added} and {@code response.content_part.added}, one {@code
 * response.output_text.delta} per decode step (the EOS step's delta is empty, as in vLLM), then
 * {@code response.output_text.done}, {@code response.content_part.done}, {@code
 * response.output_item.done} and {@code response.completed} carrying the whole response (status
 * {@code incomplete} when the token budget ended it: vLLM sends no {@code response.incomplete}).
 * With {@code x-sim-reasoning-tokens: n} a reasoning item streams the first n tokens first.
 */
final class ResponsesExchange implements Sequence.Listener {
  static final String MALFORMED_EVENT = "event: response.output_text.delta\ndata: {not json\n\n";
  static final String FAILURE_CODE = "server_error";

  private final HttpServerRequest request;
  private final HttpServerResponse response;
  private final ResponsesRequest req;
  private final FaultPlan fault;
  private final Engine engine;
  private final ResponseStore store;
  private final String id;
  private final String idSuffix;
  private final long createdAt;
  private final int reasoningTokens;
  private final boolean promptTokensDetails;
  private final StringBuilder reasoning = new StringBuilder();
  private final StringBuilder text = new StringBuilder();
  private Sequence sequence;
  private int seq;
  private int contentDeltas;
  private boolean malformedSent;
  private boolean messageOpen;

  /**
   * @param request the client's request; null for a background generation
   * @param idSuffix the hex that makes this response's item ids ({@code msg_…}, {@code rs_…})
   * @param promptTokensDetails whether usage reports the prefix cache's hit in {@code
   *     input_tokens_details.cached_tokens} ({@code --prompt-tokens-details}); 0 otherwise
   */
  ResponsesExchange(
      HttpServerRequest request,
      ResponsesRequest req,
      FaultPlan fault,
      Engine engine,
      ResponseStore store,
      String id,
      String idSuffix,
      long createdAt,
      int contentTokens,
      boolean promptTokensDetails) {
    this.request = request;
    this.response = request == null ? null : request.response();
    this.req = req;
    this.fault = fault;
    this.engine = engine;
    this.store = store;
    this.id = id;
    this.idSuffix = idSuffix;
    this.createdAt = createdAt;
    this.promptTokensDetails = promptTokensDetails;
    // At least one visible token stays for the message.
    this.reasoningTokens = Math.max(0, Math.min(req.reasoningTokens(), contentTokens - 1));
  }

  void attach(Sequence sequence) {
    this.sequence = sequence;
  }

  String messageId() {
    return "msg_" + idSuffix;
  }

  String reasoningId() {
    return "rs_" + idSuffix;
  }

  /** The response as it stands before any token: {@code queued} or {@code in_progress}. */
  JsonObject initial(String status) {
    return ResponsesJson.response(req, id, createdAt, status, new JsonArray(), null);
  }

  /**
   * Sends a stream's head, {@code response.created} and {@code response.in_progress} now, as vLLM
   * does before the engine produces anything; an {@code error} fault due before any token (a drawn
   * one) fails the stream at once.
   */
  void open() {
    if (!req.parsed().stream()) {
      return;
    }
    response
        .setStatusCode(200)
        .setChunked(true)
        .putHeader("content-type", "text/event-stream; charset=utf-8")
        .putHeader("cache-control", "no-cache");
    JsonObject initial = initial("in_progress");
    write(ResponsesJson.created(seq++, initial));
    write(ResponsesJson.inProgress(seq++, initial));
    if (fault.kind() == Kind.ERROR && fault.afterTokens() == 0) {
      engine.fail(sequence);
      fail();
    }
  }

  @Override
  public void onToken(int index, String tokenText, String finishReason) {
    if (response != null && response.closed()) {
      engine.cancel(sequence);
      return;
    }
    boolean inReasoning = index < reasoningTokens;
    if (inReasoning) {
      reasoning.append(tokenText);
    } else {
      text.append(tokenText);
    }
    if (!tokenText.isEmpty()) {
      contentDeltas++;
    }
    if (request == null) {
      background(index, finishReason);
      return;
    }
    if (req.parsed().stream()) {
      streamToken(index, inReasoning, tokenText);
      if (fault.kind() == Kind.MALFORMED
          && !malformedSent
          && contentDeltas >= fault.afterTokens()) {
        malformedSent = true;
        response.write(MALFORMED_EVENT);
      }
    }
    boolean due = contentDeltas >= fault.afterTokens() || finishReason != null;
    if (fault.kind() == Kind.DISCONNECT && due) {
      engine.fail(sequence);
      request.connection().close();
      return;
    }
    if ((fault.kind() == Kind.ERROR || fault.kind() == Kind.ERROR_EVENT) && due) {
      engine.fail(sequence);
      if (!req.parsed().stream()) {
        sendJson(500, OpenAiJson.generationError());
      } else if (fault.kind() == Kind.ERROR) {
        fail();
      } else {
        write(ResponsesJson.error(seq++, FAILURE_CODE, failureMessage()));
        response.end();
      }
      return;
    }
    if (finishReason == null) {
      return;
    }
    JsonObject finished = finished(index + 1, finishReason);
    if (req.parsed().stream()) {
      JsonObject part = ResponsesJson.outputText(text.toString(), null);
      write(ResponsesJson.textDone(seq++, messageId(), messageIndex(), text.toString()));
      write(ResponsesJson.partDone(seq++, messageId(), messageIndex(), part));
      write(ResponsesJson.itemDone(seq++, messageIndex(), message("completed")));
      response.end(ResponsesJson.event(ResponsesJson.completed(seq++, finished)));
    } else if (fault.kind() == Kind.MALFORMED) {
      response.setStatusCode(200).putHeader("content-type", "application/json").end("{not json");
    } else {
      sendJson(200, finished);
    }
  }

  private void streamToken(int index, boolean inReasoning, String tokenText) {
    if (inReasoning) {
      if (index == 0) {
        write(
            ResponsesJson.itemAdded(
                seq++, 0, ResponsesJson.reasoning(reasoningId(), null, "in_progress")));
        write(ResponsesJson.partAdded(seq++, reasoningId(), 0, ResponsesJson.reasoningText("")));
      }
      write(ResponsesJson.reasoningDelta(seq++, reasoningId(), 0, tokenText));
      return;
    }
    if (!messageOpen) {
      if (reasoningTokens > 0) {
        closeReasoning();
      }
      messageOpen = true;
      write(
          ResponsesJson.itemAdded(
              seq++, messageIndex(), ResponsesJson.message(messageId(), null, "in_progress")));
      write(
          ResponsesJson.partAdded(
              seq++, messageId(), messageIndex(), ResponsesJson.outputText("", new JsonArray())));
    }
    write(ResponsesJson.textDelta(seq++, messageId(), messageIndex(), tokenText));
  }

  private void closeReasoning() {
    String all = reasoning.toString();
    write(ResponsesJson.reasoningDone(seq++, reasoningId(), 0, all));
    write(ResponsesJson.partDone(seq++, reasoningId(), 0, ResponsesJson.reasoningText(all)));
    write(
        ResponsesJson.itemDone(seq++, 0, ResponsesJson.reasoning(reasoningId(), all, "completed")));
  }

  private int messageIndex() {
    return reasoningTokens > 0 ? 1 : 0;
  }

  private JsonObject message(String status) {
    return ResponsesJson.message(messageId(), text.toString(), status);
  }

  /** The finished response, stored when the request asked for it. */
  private JsonObject finished(int completionTokens, String finishReason) {
    JsonArray output = new JsonArray();
    if (reasoningTokens > 0) {
      // vLLM: "Only the last output item has status."
      output.add(ResponsesJson.reasoning(reasoningId(), reasoning.toString(), null));
    }
    output.add(message("completed"));
    JsonObject finished =
        ResponsesJson.response(
            req,
            id,
            createdAt,
            "length".equals(finishReason) ? "incomplete" : "completed",
            output,
            ResponsesJson.usage(
                req.parsed().promptTokens(),
                completionTokens,
                reasoningTokens,
                promptTokensDetails ? sequence.cachedTokens : 0));
    if (req.store()) {
      ResponseStore.Entry entry = store.get(id);
      if (entry != null && "cancelled".equals(entry.status())) {
        return finished;
      }
      List<PromptBlocks.Message> history = new ArrayList<>(req.history());
      if (text.length() > 0) {
        history.add(new PromptBlocks.Message("assistant", text.toString()));
      }
      store.put(id, new ResponseStore.Entry(finished, history));
    }
    return finished;
  }

  /** A background generation only updates its stored response. */
  private void background(int index, String finishReason) {
    boolean due = contentDeltas >= fault.afterTokens() || finishReason != null;
    if ((fault.kind() == Kind.ERROR || fault.kind() == Kind.ERROR_EVENT) && due) {
      engine.fail(sequence);
      ResponseStore.Entry entry = store.get(id);
      if (entry != null) {
        entry.running = null;
        entry.response = entry.response.copy().put("status", "failed");
      }
      return;
    }
    if (finishReason != null) {
      finished(index + 1, finishReason);
    }
  }

  /** {@code response.failed}: the response so far, its message incomplete, and the error. */
  private void fail() {
    JsonArray output = new JsonArray();
    if (messageOpen) {
      output.add(message("incomplete"));
    }
    JsonObject failed =
        ResponsesJson.response(req, id, createdAt, "failed", output, null)
            .put(
                "error",
                new JsonObject().put("code", FAILURE_CODE).put("message", failureMessage()));
    response.end(ResponsesJson.event(ResponsesJson.failed(seq++, failed)));
  }

  private String failureMessage() {
    return "Simulated engine failure (x-sim-fault: "
        + fault.kind().name().toLowerCase(Locale.ROOT)
        + ")";
  }

  private void write(JsonObject event) {
    response.write(ResponsesJson.event(event));
  }

  private void sendJson(int status, JsonObject body) {
    response.setStatusCode(status).putHeader("content-type", "application/json").end(body.encode());
  }
}
