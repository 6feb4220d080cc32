package io.phasemeter.sim;

import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;

/**
 * The Responses API's routes, as vLLM's {@code responses/api_router.py} has them: create, retrieve,
 * cancel; plus OpenAI's delete, which vLLM lacks. The simulator stores responses as vLLM does with
 * {@code VLLM_ENABLE_RESPONSES_API_STORE=1} (vLLM's default is to store nothing), bounded by {@link
 * ResponseStore}.
 */
final class ResponsesApi {
  private final SimulatorConfig config;
  private final Engine engine;
  private final Admission admission;
  private final ResponseStore store;
  private final ResponsesParser parser;

  ResponsesApi(
      SimulatorConfig config,
      Engine engine,
      Admission admission,
      RequestParser base,
      ResponseStore store) {
    this.config = config;
    this.engine = engine;
    this.admission = admission;
    this.store = store;
    this.parser = new ResponsesParser(base, store);
  }

  void mount(Router router, BodyHandler body) {
    router.post("/v1/responses").handler(body).handler(this::create);
    router.get("/v1/responses/:id").handler(this::retrieve);
    router.delete("/v1/responses/:id").handler(this::delete);
    router.post("/v1/responses/:id/cancel").handler(this::cancel);
  }

  private void create(RoutingContext ctx) {
    engine.countReceived();
    HttpServerRequest request = ctx.request();
    ResponsesRequest req;
    FaultPlan fault;
    try {
      req = parser.parse(ctx.body().buffer(), FaultPlan.reasoningTokens(request.headers()));
      fault = admission.faults(request);
    } catch (ApiError e) {
      admission.refuse(ctx.response(), e);
      return;
    }
    ParsedRequest parsed = req.parsed();
    if (admission.endedBeforeEngine(request, fault, !parsed.stream())) {
      return;
    }
    TokenPlan plan =
        TokenPlan.create(
            config.seed(), parsed.requestHash(), parsed.maxTokens(), 0, parsed.ignoreEos());
    String hex = admission.nextHex(16);
    String id = req.requestId() != null ? req.requestId() : "resp_" + hex;
    ResponsesExchange exchange =
        new ResponsesExchange(
            req.background() ? null : request,
            req,
            fault,
            engine,
            store,
            id,
            hex,
            Admission.nowSeconds(),
            plan.contentTokens(),
            config.promptTokensDetails());
    Sequence sequence = admission.sequence(request, parsed, plan, fault, exchange, id);
    exchange.attach(sequence);
    if (!admission.admit(ctx.response(), sequence)) {
      return;
    }
    if (req.background()) {
      // vLLM answers at once with the queued response and keeps it "queued" until it finished.
      JsonObject queued = exchange.initial("queued");
      ResponseStore.Entry entry = new ResponseStore.Entry(queued, req.history());
      entry.running = sequence;
      store.put(id, entry);
      OpenAiJson.send(ctx.response(), 200, queued);
      return;
    }
    ctx.response().closeHandler(v -> engine.cancel(sequence));
    exchange.open();
  }

  private void retrieve(RoutingContext ctx) {
    String id = ctx.pathParam("id");
    ResponseStore.Entry entry = store.get(id);
    if (entry == null) {
      ResponsesParser.notFound(id).sendTo(ctx.response());
    } else if (isTrue(ctx.request().getParam("stream"))) {
      // vLLM replays only background streams, which the simulator does not keep.
      ApiError.badRequest("Unknown response_id: " + id, "response_id").sendTo(ctx.response());
    } else {
      OpenAiJson.send(ctx.response(), 200, entry.response);
    }
  }

  private void delete(RoutingContext ctx) {
    String id = ctx.pathParam("id");
    ResponseStore.Entry entry = store.remove(id);
    if (entry == null) {
      ResponsesParser.notFound(id).sendTo(ctx.response());
      return;
    }
    if (entry.running != null) {
      engine.cancel(entry.running);
    }
    OpenAiJson.send(ctx.response(), 200, ResponsesJson.deleted(id));
  }

  private void cancel(RoutingContext ctx) {
    String id = ctx.pathParam("id");
    ResponseStore.Entry entry = store.get(id);
    if (entry == null) {
      ResponsesParser.notFound(id).sendTo(ctx.response());
      return;
    }
    String status = entry.status();
    if (!"queued".equals(status) && !"in_progress".equals(status)) {
      new ApiError(
              400, "invalid_request_error", "Cannot cancel a synchronous response.", "response_id")
          .sendTo(ctx.response());
      return;
    }
    entry.response = entry.response.copy().put("status", "cancelled");
    if (entry.running != null) {
      engine.cancel(entry.running);
      entry.running = null;
    }
    OpenAiJson.send(ctx.response(), 200, entry.response);
  }

  /** FastAPI's reading of a boolean query parameter. */
  private static boolean isTrue(String param) {
    return param != null
        && (param.equalsIgnoreCase("true")
            || param.equals("1")
            || param.equalsIgnoreCase("yes")
            || param.equalsIgnoreCase("on"));
  }
}
