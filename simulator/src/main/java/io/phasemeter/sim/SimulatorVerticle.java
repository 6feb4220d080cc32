package io.phasemeter.sim;

import io.phasemeter.sim.FaultPlan.Kind;
import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.util.SplittableRandom;
import java.util.function.LongSupplier;

/**
 * The HTTP face of the simulator. Everything (routes, engine, timers) runs on this verticle's one
 * context, so the engine needs no locks.
 */
final class SimulatorVerticle extends VerticleBase {
  private static final long MAX_BODY_BYTES = 64L * 1024 * 1024;

  private final SimulatorConfig config;
  private final LongSupplier clock;
  private final VllmMetrics metrics;
  private final RequestParser parser;
  private final SplittableRandom faultRng;
  private final long startedEpochSeconds = System.currentTimeMillis() / 1000;
  private Engine engine;
  private EngineTracer tracer;
  private HttpServer server;
  private long ids;

  SimulatorVerticle(SimulatorConfig config, LongSupplier clock) {
    this.config = config;
    this.clock = clock;
    this.metrics = new VllmMetrics(config.models());
    this.parser = new RequestParser(config);
    this.faultRng = new SplittableRandom(TokenPlan.mix(config.seed() ^ 0xFA017L));
  }

  @Override
  public Future<?> start() {
    tracer = EngineTracer.create(config.otlpTracesEndpoint(), clock);
    engine = new Engine(vertx, config, CostModel.of(config), clock, metrics, tracer);
    Router router = Router.router(vertx);
    router.get("/health").handler(ctx -> ctx.response().setStatusCode(200).end());
    router.get("/v1/models").handler(this::models);
    router.get("/metrics").handler(this::metrics);
    BodyHandler body = BodyHandler.create().setBodyLimit(MAX_BODY_BYTES);
    router.post("/v1/chat/completions").handler(body).handler(ctx -> generate(ctx, Endpoint.CHAT));
    router.post("/v1/completions").handler(body).handler(ctx -> generate(ctx, Endpoint.COMPLETION));
    router
        .route()
        .last()
        .handler(
            ctx ->
                ctx.response()
                    .setStatusCode(404)
                    .putHeader("content-type", "application/json")
                    .end("{\"detail\":\"Not Found\"}"));
    server =
        vertx.createHttpServer(
            new HttpServerOptions().setHost(config.host()).setPort(config.port()));
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

  private void metrics(RoutingContext ctx) {
    ctx.response().putHeader("content-type", VllmMetrics.CONTENT_TYPE).end(metrics.scrape());
  }

  private void generate(RoutingContext ctx, Endpoint endpoint) {
    engine.countReceived();
    HttpServerRequest request = ctx.request();
    ParsedRequest parsed;
    FaultPlan fault;
    long holdNanos;
    double stepOverride;
    try {
      parsed = parser.parse(endpoint, ctx.body().buffer());
      fault = FaultPlan.choose(request.headers(), config, faultRng);
      holdNanos = FaultPlan.holdNanos(request.headers());
      stepOverride = FaultPlan.decodeStepOverrideMs(request.headers());
    } catch (ApiError e) {
      fail(ctx.response(), e);
      return;
    }
    if (fault.kind() == Kind.ERROR) {
      fail(ctx.response(), ApiError.internal("Simulated engine failure (x-sim-fault: error)"));
      return;
    }
    if (fault.kind() == Kind.RESET) {
      engine.countFailed();
      request.connection().close();
      return;
    }
    TokenPlan plan =
        TokenPlan.create(
            config.seed(),
            parsed.requestHash(),
            parsed.maxTokens(),
            parsed.minTokens(),
            parsed.ignoreEos());
    String id = endpoint.idPrefix + String.format("%016x%08x", TokenPlan.mix(config.seed()), ++ids);
    Exchange exchange =
        new Exchange(request, parsed, fault, engine, id, System.currentTimeMillis() / 1000);
    boolean stall = fault.kind() == Kind.STALL;
    long stallNanos = fault.stallMs() < 0 ? -1 : fault.stallMs() * 1_000_000;
    Sequence sequence =
        new Sequence(
            parsed,
            plan,
            holdNanos,
            stepOverride,
            stall ? fault.afterTokens() : -1,
            stallNanos,
            exchange);
    exchange.attach(sequence);
    sequence.requestId = id;
    sequence.traceParent = tracer.parent(request.headers());
    if (!engine.admit(sequence)) {
      fail(
          ctx.response(),
          ApiError.unavailable(
              "The waiting queue is full (" + config.maxQueue() + " requests); try again later."));
      return;
    }
    ctx.response().closeHandler(v -> engine.cancel(sequence));
    exchange.open();
  }

  private void fail(HttpServerResponse response, ApiError error) {
    engine.countFailed();
    JsonObject body = error.body();
    response
        .setStatusCode(error.status)
        .putHeader("content-type", "application/json")
        .end(body.encode());
  }
}
