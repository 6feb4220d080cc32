package io.phasemeter.sim;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.util.ArrayList;
import java.util.List;

/**
 * vLLM's {@code POST /tokenize} ({@code prompt} or {@code messages}) and {@code POST /detokenize},
 * in its shapes: {@code {"count", "max_model_len", "tokens", "token_strs"}} and {@code {"prompt"}}.
 * They need no engine, as in vLLM.
 */
final class TokenizerApi {
  private final RequestParser parser;
  private final int maxModelLen;

  TokenizerApi(RequestParser parser, int maxModelLen) {
    this.parser = parser;
    this.maxModelLen = maxModelLen;
  }

  void mount(Router router, BodyHandler body) {
    router.post("/tokenize").handler(body).handler(this::tokenize);
    router.post("/detokenize").handler(body).handler(this::detokenize);
  }

  private void tokenize(RoutingContext ctx) {
    try {
      JsonObject body = RequestParser.object(ctx.body().buffer());
      parser.model(body);
      boolean tokenStrs = RequestParser.optionalBool(body, "return_token_strs");
      List<Integer> tokens;
      if (body.containsKey("messages")) {
        if (!(body.getValue("messages") instanceof JsonArray messages)) {
          throw ApiError.badRequest("'messages' must be a non-empty array", "messages");
        }
        tokens =
            Tokenizer.chat(
                messages, RequestParser.optionalBool(body, "add_generation_prompt", true));
      } else if (body.getValue("prompt") instanceof String prompt) {
        // add_special_tokens is accepted; the simulator's tokenizer has no BOS for plain text.
        RequestParser.optionalBool(body, "add_special_tokens", true);
        tokens = Tokenizer.text(prompt);
      } else {
        throw ApiError.badRequest("Either 'prompt' (a string) or 'messages' is required", "prompt");
      }
      JsonArray strs = null;
      if (tokenStrs) {
        strs = new JsonArray();
        for (int t : tokens) {
          strs.add(Tokenizer.decode(t));
        }
      }
      OpenAiJson.send(
          ctx.response(),
          200,
          new JsonObject()
              .put("count", tokens.size())
              .put("max_model_len", maxModelLen)
              .put("tokens", new JsonArray(new ArrayList<>(tokens)))
              .put("token_strs", strs));
    } catch (ApiError e) {
      e.sendTo(ctx.response());
    }
  }

  private void detokenize(RoutingContext ctx) {
    try {
      JsonObject body = RequestParser.object(ctx.body().buffer());
      parser.model(body);
      if (!(body.getValue("tokens") instanceof JsonArray tokens)) {
        throw ApiError.badRequest("Field required: 'tokens' (an array of token ids)", "tokens");
      }
      RequestParser.tokenIds(tokens, "tokens");
      OpenAiJson.send(
          ctx.response(), 200, new JsonObject().put("prompt", Tokenizer.decode(tokens)));
    } catch (ApiError e) {
      e.sendTo(ctx.response());
    }
  }
}
