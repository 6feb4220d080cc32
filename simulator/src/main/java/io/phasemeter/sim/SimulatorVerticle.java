package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.util.function.LongSupplier;

/**
 * The HTTP face of the simulator: its routes, and the generation and embeddings handlers (the
 * Responses API and tokenizer have their own classes). Everything (routes, engine, timers) runs on
 * this verticle's one context, so the engine needs no locks.
 */
final class SimulatorVerticle extends VerticleBase {
  private static final long MAX_BODY_BYTES = 64L * 1024 * 1024;

  private final SimulatorConfig config;
  // Null: plain HTTP.
  private final SimulatorTls tls;
  private final LongSupplier clock;
  private final VllmMetrics metrics;
  private final RequestParser parser;
  private final long startedEpochSeconds = System.currentTimeMillis() / 1000;
  private Engine engine;
  private EngineTracer tracer;
  private Admission admission;
  private HttpServer server;

  SimulatorVerticle(SimulatorConfig config, LongSupplier clock) {
    this(config, clock, null);
  }

  SimulatorVerticle(SimulatorConfig config, LongSupplier clock, SimulatorTls tls) {
    this.tls = tls;
    this.config = config;
    this.clock = clock;
    this.metrics = new VllmMetrics(config.models());
    this.parser = new RequestParser(config);
  }

  @Override
  public Future<?> start() {
    tracer = EngineTracer.create(config.otlpTracesEndpoint(), clock);
    engine = new Engine(vertx, config, CostModel.of(config), clock, metrics, tracer);
    admission = new Admission(config, engine, tracer);
    Router router = Router.router(vertx);
    router.get("/health").handler(ctx -> ctx.response().setStatusCode(200).end());
    router.get("/v1/models").handler(this::models);
    router.getWithRegex("/v1/models/(?<id>.+)").handler(this::model);
    router.get("/metrics").handler(this::metrics);
    router.get("/version").handler(this::version);
    BodyHandler body = BodyHandler.create().setBodyLimit(MAX_BODY_BYTES);
    router.post("/v1/chat/completions").handler(body).handler(ctx -> generate(ctx, Endpoint.CHAT));
    router.post("/v1/completions").handler(body).handler(ctx -> generate(ctx, Endpoint.COMPLETION));
    new ResponsesApi(config, engine, admission, parser, new ResponseStore()).mount(router, body);
    router.post("/v1/embeddings").handler(body).handler(this::embeddings);
    new TokenizerApi(parser, config.maxModelLen()).mount(router, body);
    // No BodyHandler: uploads are read as they arrive and never held (AudioUpload).
    router
        .post("/v1/audio/transcriptions")
        .handler(ctx -> AudioUpload.receive(ctx.request(), true, config.seed()));
    router
        .post("/v1/audio/translations")
        .handler(ctx -> AudioUpload.receive(ctx.request(), false, config.seed()));
    router
        .route()
        .last()
        .handler(
            ctx ->
                ctx.response()
                    .setStatusCode(404)
                    .putHeader("content-type", "application/json")
                    .end("{\"detail\":\"Not Found\"}"));
    HttpServerOptions options =
        new HttpServerOptions().setHost(config.host()).setPort(config.port());
    server = vertx.createHttpServer(tls == null ? options : tls.applyTo(options));
    return server.requestHandler(router).listen();
  }

  @Override
  public Future<?> stop() {
    engine.shutdown();
    // Flushing the span export may block on the network: not on the event loop.
    return server
        .close()
        .compose(
            v ->
                vertx.executeBlocking(
                    () -> {
                      tracer.close();
                      return null;
                    }));
  }

  int actualPort() {
    return server.actualPort();
  }

  SimulatorStats stats() {
    return engine.stats();
  }

  private void models(RoutingContext ctx) {
    ctx.response()
        .putHeader("content-type", "application/json")
        .end(
            OpenAiJson.models(config.models(), config.maxModelLen(), startedEpochSeconds).encode());
  }

  /** {@code GET /v1/models/{id}}: OpenAI's retrieve, which vLLM does not serve. */
  private void model(RoutingContext ctx) {
    String id = ctx.pathParam("id");
    JsonArray cards =
        OpenAiJson.models(config.models(), config.maxModelLen(), startedEpochSeconds)
            .getJsonArray("data");
    for (Object card : cards) {
      if (id.equals(((JsonObject) card).getString("id"))) {
        OpenAiJson.send(ctx.response(), 200, (JsonObject) card);
        return;
      }
    }
    ApiError.notFound("The model `" + id + "` does not exist.", "model").sendTo(ctx.response());
  }

  private void version(RoutingContext ctx) {
    OpenAiJson.send(ctx.response(), 200, new JsonObject().put("version", Simulator.version()));
  }

  private void metrics(RoutingContext ctx) {
    ctx.response().putHeader("content-type", VllmMetrics.CONTENT_TYPE).end(metrics.scrape());
  }

  private void generate(RoutingContext ctx, Endpoint endpoint) {
    engine.countReceived();
    HttpServerRequest request = ctx.request();
    ParsedRequest parsed;
    FaultPlan fault;
    try {
      parsed = parser.parse(endpoint, ctx.body().buffer());
      fault = admission.faults(request);
    } catch (ApiError e) {
      admission.refuse(ctx.response(), e);
      return;
    }
    if (admission.endedBeforeEngine(request, fault, true)) {
      return;
    }
    TokenPlan plan =
        TokenPlan.create(
            config.seed(),
            parsed.requestHash(),
            parsed.maxTokens(),
            parsed.minTokens(),
            parsed.ignoreEos());
    String id = endpoint.idPrefix + admission.nextHex(8);
    Exchange exchange =
        new Exchange(
            request,
            parsed,
            fault,
            engine,
            id,
            Admission.nowSeconds(),
            config.promptTokensDetails());
    Sequence sequence = admission.sequence(request, parsed, plan, fault, exchange, id);
    exchange.attach(sequence);
    if (!admission.admit(ctx.response(), sequence)) {
      return;
    }
    ctx.response().closeHandler(v -> engine.cancel(sequence));
    exchange.open();
  }

  private void embeddings(RoutingContext ctx) {
    engine.countReceived();
    HttpServerRequest request = ctx.request();
    Embeddings.Request req;
    FaultPlan fault;
    try {
      req = Embeddings.parse(parser, config, ctx.body().buffer());
      fault = admission.faults(request);
    } catch (ApiError e) {
      admission.refuse(ctx.response(), e);
      return;
    }
    if (admission.endedBeforeEngine(request, fault, true)) {
      return;
    }
    String id = "embd-" + admission.nextHex(16);
    EmbeddingsExchange exchange =
        new EmbeddingsExchange(
            request, req, fault, engine, config.seed(), id, Admission.nowSeconds());
    Sequence sequence =
        admission.sequence(request, req.parsed(), TokenPlan.pooling(), fault, exchange, id);
    exchange.attach(sequence);
    if (!admission.admit(ctx.response(), sequence)) {
      return;
    }
    ctx.response().closeHandler(v -> engine.cancel(sequence));
  }
}
