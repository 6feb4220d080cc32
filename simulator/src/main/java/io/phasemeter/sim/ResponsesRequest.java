package io.phasemeter.sim;

import io.vertx.core.json.JsonObject;
import java.util.List;

/**
 * A validated {@code POST /v1/responses} body.
 *
 * @param parsed what the engine needs: model, prompt tokens, token budget, stream
 * @param body the request as sent; the response echoes its fields as vLLM's {@code from_request}
 *     does
 * @param requestId the {@code request_id} the client chose (vLLM's extra field), or null
 * @param history each non-system message of the conversation so far, this turn's input last; kept
 *     with a stored response so that {@code previous_response_id} can count and hash it
 * @param store whether the finished response is kept for {@code GET /v1/responses/{id}}
 * @param background whether to answer {@code queued} at once and generate afterwards
 * @param previousResponseId the conversation this turn continues, or null
 * @param topLogprobs vLLM's echoed {@code top_logprobs}: null unless output logprobs were included
 * @param reasoningTokens how many of the first generated tokens are reasoning ({@code
 *     x-sim-reasoning-tokens})
 */
record ResponsesRequest(
    ParsedRequest parsed,
    JsonObject body,
    String requestId,
    List<PromptBlocks.Message> history,
    boolean store,
    boolean background,
    String previousResponseId,
    Integer topLogprobs,
    int reasoningTokens) {}
