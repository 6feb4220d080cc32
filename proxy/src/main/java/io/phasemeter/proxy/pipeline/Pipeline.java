package io.phasemeter.proxy.pipeline;

import static io.phasemeter.proxy.pipeline.PhaseChain.answer;
import static io.phasemeter.proxy.pipeline.PhaseChain.done;
import static io.phasemeter.proxy.pipeline.PhaseChain.interrupted;
import static io.phasemeter.proxy.pipeline.PhaseChain.timed;
import static io.phasemeter.proxy.pipeline.PhaseChain.timedToMark;

import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One request, top to bottom: auth → receive → prepare → route → queue → generation → write, and
 * every failure through {@link ErrorResponder}. Each phase is its own class that does its work and
 * records its result on the {@link RequestContext}; this one orders them, times each (its span is
 * opened and closed by {@link PhaseChain} and nowhere else), decides once how the request ended
 * ({@link Verdict}, in {@link #conclude}) and makes sure each request ends exactly once.
 */
public final class Pipeline {
  private static final Logger LOG = LoggerFactory.getLogger(Pipeline.class);

  private final NanoClock clock;
  private final Tracer tracer;
  private final SpanDeferral deferral;
  private final TextMapPropagator propagator;
  private final RequestObserver[] observers;
  private final AuthPhase auth;
  private final ReceivePhase receive;
  private final PreparePhase prepare;
  private final RoutePhase route;
  private final QueuePhase queue = new QueuePhase();
  private final GeneratePhase generate;
  private final WritePhase write;
  private final ErrorResponder errors = new ErrorResponder();
  private final BodyBudget bodyBudget;
  private final SloJudge sloJudge;
  private static final String MODELS = "/v1/models";
  private static final String MODELS_PREFIX = "/v1/models/";

  private final RouteTable routes;
  private final Buffer modelsBody;
  private final Map<String, Buffer> modelBodies;
  private final AtomicInteger inFlight;
  private final Map<String, AtomicInteger> inFlightByPool;
  private final AtomicInteger unrouted;
  private volatile boolean draining;
  private final Set<RequestContext> live = ConcurrentHashMap.newKeySet();

  /**
   * A pipeline over {@code runtime}'s pools, keys and observers; the runtime owns them, registers
   * their meters and closes them.
   */
  public Pipeline(PipelineRuntime runtime) {
    ProxyConfig config = runtime.config();
    Vertx vertx = runtime.vertx();
    OpenTelemetry openTelemetry = runtime.openTelemetry();
    this.deferral = runtime.spanDeferral();
    this.auth =
        new AuthPhase(
            runtime.keys(),
            runtime.limiter(),
            new TenantResolver(config.tenants(), runtime.keys()),
            config.auth().clientCert());
    this.prepare =
        new PreparePhase(
            auth,
            model -> {
              ProxyConfig.Pool p = config.poolFor(model);
              return p == null ? ProxyConfig.Pool.DEFAULT_MAX_TOKENS : p.defaultMaxTokens();
            },
            config.limits().maxBodyBytes());
    this.clock = runtime.clock();
    this.tracer = openTelemetry.getTracer("io.phasemeter.proxy");
    this.propagator = openTelemetry.getPropagators().getTextMapPropagator();
    this.observers = runtime.observers().toArray(new RequestObserver[0]);
    this.inFlight = runtime.inFlight().total();
    this.inFlightByPool = runtime.inFlight().byPool();
    this.unrouted = runtime.inFlight().unrouted();
    this.bodyBudget = runtime.bodyBudget();
    this.sloJudge = runtime.sloJudge();
    this.receive =
        new ReceivePhase(
            vertx, config.limits().maxBodyBytes(), config.limits().receiveTimeout(), bodyBudget);
    this.route = new RoutePhase(runtime.upstreamPools(), runtime.slotPools());
    this.generate =
        new GeneratePhase(
            vertx,
            propagator,
            config.auth().enabled(),
            config.forwarded(),
            bodyBudget,
            config.limits().maxBodyBytes(),
            config.limits().receiveTimeout());
    this.write = new WritePhase(vertx);
    this.routes = new RouteTable(config.routes());
    this.modelsBody = modelsBody(config);
    this.modelBodies = modelBodies(config);
  }

  /** Handles one request from the public listener. */
  public void handle(HttpServerRequest req) {
    long start = clock.nanoTime();
    if (draining) {
      // Raced the listener closing (a kept-alive connection): refuse, and close it.
      req.response().putHeader("connection", "close");
      reject(req, ProxyFailure.Kind.SHUTTING_DOWN, null);
      return;
    }
    List<String> framings = req.headers().getAll("transfer-encoding");
    if (!framings.isEmpty()) {
      String framing = String.join(", ", framings);
      // RFC 9112 §6.1: a request with both Content-Length and Transfer-Encoding may be a smuggling
      // attempt, and its connection must be closed after the answer. Netty drops the conflicting
      // Content-Length before this handler sees it, so every request framed by Transfer-Encoding
      // gets its connection closed; any coding but chunked is refused outright (its body's end is
      // unknowable, and the bytes after it would be read as the next request).
      req.response().putHeader("connection", "close");
      if (!"chunked".equalsIgnoreCase(framing.trim())) {
        ProxyFailure f =
            ProxyFailure.of(
                ProxyFailure.Kind.UNSUPPORTED_TRANSFER_ENCODING,
                "Transfer-Encoding '"
                    + safePath(framing)
                    + "' is not supported; send Content-Length or chunked.");
        req.response()
            .setStatusCode(f.kind().status())
            .putHeader("content-type", "application/json")
            .end(ErrorResponder.body(f))
            .onComplete(ar -> req.connection().close());
        return;
      }
    }
    String path = PathNormalizer.normalize(req.path());
    if (path == null) {
      reject(req, ProxyFailure.Kind.INVALID_REQUEST, null);
      return;
    }
    if (path.equals(MODELS) || path.startsWith(MODELS_PREFIX)) {
      models(req, path);
      return;
    }
    ApiRoute api = routes.match(path);
    if (api.api() == ApiRoute.Api.DENY) {
      reject(req, ProxyFailure.Kind.ROUTE_DENIED, null);
      return;
    }
    if (!api.allows(req.method())) {
      reject(req, ProxyFailure.Kind.METHOD_NOT_ALLOWED, api.allowHeader());
      return;
    }
    req.pause();
    Context parent = propagator.extract(Context.root(), req.headers(), TraceHeaders.GETTER);
    RequestContext ctx =
        new RequestContext(
            clock,
            tracer,
            observers,
            req,
            api,
            parent,
            start,
            deferral,
            HttpMethods.label(req.method()));
    ctx.targeted(path, req.query());
    inFlight.incrementAndGet();
    unrouted.incrementAndGet();
    live.add(ctx);
    // The client went away: its connection closed, or (HTTP/2) it reset the stream. An HTTP/2
    // stream also closes when its response has ended, which is no cancel.
    req.response()
        .closeHandler(
            v -> {
              if (req.version() != HttpVersion.HTTP_2 || !req.response().ended()) {
                ctx.cancel();
              }
            });
    if (!framings.isEmpty()) {
      // A chunked body can break its framing mid-body: the request answers it (400), as it would
      // a bad head, rather than the connection just closing.
      BodyFraming.watch(
          req.connection(),
          cause ->
              ctx.runOnContext(
                  () ->
                      ctx.bodyFailed(
                          ProxyFailure.of(
                              ProxyFailure.Kind.INVALID_REQUEST,
                              "The request body's chunked framing is not valid HTTP."))));
    }
    Future<Void> authorised =
        timed(ctx, Phase.AUTH, start, span -> auth.check(ctx, span))
            .compose(
                v ->
                    // Auth may wait for a shared limiter: a client gone meanwhile, or a body that
                    // broke meanwhile, goes no further.
                    ctx.bodyFailure() != null
                        ? Future.failedFuture(ctx.bodyFailure())
                        : ctx.isCancelled()
                            ? Future.failedFuture(
                                ProxyFailure.of(
                                    ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."))
                            : Future.succeededFuture());
    // A streamed pass-through's body goes to the upstream as it arrives, during generation: it has
    // no receive phase of its own, and prepare only checks its head.
    Future<Void> prepared =
        api.readsBody()
            ? authorised
                .compose(v -> timed(ctx, Phase.RECEIVE, span -> receive.receive(ctx)))
                .compose(v -> timed(ctx, Phase.PREPARE, span -> prepared(ctx, span)))
            : authorised.compose(v -> timed(ctx, Phase.PREPARE, span -> prepared(ctx, span)));
    prepared
        .compose(v -> timed(ctx, Phase.ROUTE, span -> Future.succeededFuture(route.select(ctx))))
        .compose(
            pool -> {
              unrouted.decrementAndGet();
              inFlightByPool.get(pool.config().name()).incrementAndGet();
              if (ctx.bodyFailure() != null) {
                return Future.failedFuture(ctx.bodyFailure());
              }
              if (ctx.isCancelled()) {
                return Future.failedFuture(
                    ProxyFailure.of(ProxyFailure.Kind.CLIENT_CANCELLED, "The client went away."));
              }
              if (!api.takesSlot()) {
                return generation(ctx, pool);
              }
              SlotPool slots = route.slots(ctx);
              return timed(ctx, Phase.QUEUE, span -> queue.acquire(ctx, slots, span))
                  .compose(v -> generation(ctx, pool));
            })
        .compose(v -> timed(ctx, Phase.WRITE, span -> write.write(ctx)))
        .transform(ar -> conclude(ctx, ar.cause()))
        .onComplete(ar -> finish(ctx));
  }

  /**
   * {@code GET /v1/models}, answered from the configuration (every pool's models), and {@code GET
   * /v1/models/{id}} for one of them; a key is needed when auth is on, as for any request.
   */
  private void models(HttpServerRequest req, String path) {
    if (req.method() != HttpMethod.GET) {
      reject(req, ProxyFailure.Kind.METHOD_NOT_ALLOWED, "GET");
    } else if (!auth.admitsListing(req)) {
      reject(req, ProxyFailure.Kind.INVALID_API_KEY, null);
    } else if (path.equals(MODELS)) {
      req.response().putHeader("content-type", "application/json").end(modelsBody);
    } else {
      Buffer one = modelBodies.get(path.substring(MODELS_PREFIX.length()));
      if (one == null) {
        reject(req, ProxyFailure.Kind.MODEL_NOT_FOUND, null);
      } else {
        req.response().putHeader("content-type", "application/json").end(one);
      }
    }
  }

  /** Phase {@code prepare}: the body's checks and rewrite, then its tokens taken from the key. */
  private Future<Void> prepared(RequestContext ctx, io.opentelemetry.api.trace.Span span) {
    return done(() -> prepare.prepare(ctx, span)).compose(v -> auth.admitTokens(ctx, span));
  }

  /** Phase {@code generation}: ends at the upstream's last byte, which it marks on its timer. */
  private Future<Void> generation(RequestContext ctx, UpstreamPool pool) {
    return timedToMark(ctx, Phase.GENERATION, timer -> generate.generate(ctx, pool, timer));
  }

  /**
   * The chain's end, success or failure: the one {@link Verdict} on how the request ended; for a
   * failure, the phases it interrupted are marked and ended, and the client is answered, the answer
   * timed as phase {@code write} ({@link PhaseChain}).
   */
  private Future<Void> conclude(RequestContext ctx, Throwable failure) {
    Verdict verdict = Verdict.of(ctx, failure);
    ctx.concluded(verdict);
    if (failure == null) {
      return Future.succeededFuture();
    }
    interrupted(ctx, verdict);
    switch (verdict.answer()) {
      case CLOSE -> {
        // At once: a graceful close waits for the queued bytes, which this client will never read.
        Connections.forceClose(ctx.request().connection());
        return Future.succeededFuture();
      }
      case NONE -> {
        if (!ctx.response().headWritten()) {
          ctx.statusSent(ProxyFailure.Kind.CLIENT_CANCELLED.status());
        }
        return Future.succeededFuture();
      }
      default -> {
        ErrorResponder.log(ctx, verdict.failure(), failure);
        return answer(ctx, () -> errors.respond(ctx, verdict.failure()));
      }
    }
  }

  /**
   * Handles a request the HTTP decoder refused (a request line or headers over the listener's
   * limits, malformed HTTP): the OpenAI error with the decoder's status, then the connection is
   * closed, since nothing after the bad head can be trusted. No record: the request never started.
   */
  public void handleInvalid(HttpServerRequest req) {
    Throwable cause = req.decoderResult().cause();
    ProxyFailure f;
    if (cause instanceof TooLongHttpLineException) {
      f = ProxyFailure.of(ProxyFailure.Kind.URI_TOO_LONG, "The request line is too long.");
    } else if (cause instanceof TooLongHttpHeaderException) {
      f =
          ProxyFailure.of(
              ProxyFailure.Kind.HEADERS_TOO_LARGE, "The request headers are too large.");
    } else {
      f = ProxyFailure.of(ProxyFailure.Kind.INVALID_REQUEST, "The request is not valid HTTP.");
    }
    req.response()
        .setStatusCode(f.kind().status())
        .putHeader("content-type", "application/json")
        .putHeader("connection", "close")
        .end(ErrorResponder.body(f))
        .onComplete(ar -> req.connection().close());
  }

  private void finish(RequestContext ctx) {
    // Whatever ending the request throws, it leaves the live set and the in-flight counts: a
    // drain waits on them, and llm_requests_in_flight is read from them.
    try {
      ctx.finish(clock.nanoTime(), sloJudge);
      for (RequestObserver o : observers) {
        try {
          o.onFinished(ctx);
        } catch (RuntimeException e) {
          LOG.warn("request observer {} failed: {}", o.getClass().getName(), e.toString());
        }
      }
    } catch (RuntimeException e) {
      LOG.warn("ending a request failed: {}", e.toString());
    } finally {
      // Only now is the request over for a drain waiting on the count: its record is published.
      live.remove(ctx);
      inFlight.decrementAndGet();
      (ctx.poolName() == null ? unrouted : inFlightByPool.get(ctx.poolName())).decrementAndGet();
    }
  }

  private void reject(HttpServerRequest req, ProxyFailure.Kind kind, String allow) {
    String message =
        switch (kind) {
          case UNKNOWN_URL ->
              "Unknown request URL: " + req.method() + " " + safePath(req.path()) + ".";
          case SHUTTING_DOWN -> "The proxy is shutting down; retry on another instance.";
          case INVALID_API_KEY -> "A valid API key is required: 'Authorization: Bearer <key>'.";
          case INVALID_REQUEST -> "The request path is not valid: " + safePath(req.path()) + ".";
          case ROUTE_DENIED ->
              "The path "
                  + safePath(req.path())
                  + " is not served on this listener (the route table denies it).";
          case MODEL_NOT_FOUND ->
              "The model `"
                  + safePath(
                      req.path().substring(Math.min(req.path().length(), MODELS_PREFIX.length())))
                  + "` does not exist or you do not have access to it.";
          default -> "Method " + req.method() + " is not allowed here; use " + allow + ".";
        };
    if (allow != null) {
      req.response().putHeader("allow", allow);
    }
    req.response()
        .setStatusCode(kind.status())
        .putHeader("content-type", "application/json")
        .end(ErrorResponder.body(ProxyFailure.of(kind, message)));
  }

  private static String safePath(String path) {
    String p = path == null ? "" : path;
    return p.length() > 200 ? p.substring(0, 200) + "…" : p;
  }

  private static Buffer modelsBody(ProxyConfig config) {
    JsonArray data = new JsonArray();
    for (JsonObject m : modelObjects(config).values()) {
      data.add(m);
    }
    return new JsonObject().put("object", "list").put("data", data).toBuffer();
  }

  private static Map<String, Buffer> modelBodies(ProxyConfig config) {
    Map<String, Buffer> bodies = new java.util.HashMap<>();
    modelObjects(config).forEach((id, m) -> bodies.put(id, m.toBuffer()));
    return Map.copyOf(bodies);
  }

  private static Map<String, JsonObject> modelObjects(ProxyConfig config) {
    Map<String, JsonObject> models = new java.util.LinkedHashMap<>();
    long created = System.currentTimeMillis() / 1000;
    for (ProxyConfig.Pool p : config.pools()) {
      for (String m : p.models()) {
        models.put(
            m,
            new JsonObject()
                .put("id", m)
                .put("object", "model")
                .put("created", created)
                .put("owned_by", p.name()));
      }
    }
    return models;
  }

  /** Requests between headers parsed and root end. */
  public int inFlight() {
    return inFlight.get();
  }

  /** From now on, new requests are refused with 503 {@code shutting_down}. */
  public void startDraining() {
    draining = true;
  }

  /**
   * Cancels every request still in flight (the drain deadline passed): each ends with outcome
   * {@code cancelled} and error type {@code shutting_down}, its connection closed, its slot
   * released and its record and spans finished as for any cancellation. Returns how many.
   */
  public int cancelAll() {
    int n = 0;
    for (RequestContext ctx : live) {
      n++;
      ctx.runOnContext(
          () -> {
            if (!ctx.isFinished()) {
              ctx.cancelledAtShutdown();
              Connections.forceClose(ctx.request().connection());
              ctx.cancel();
            }
          });
    }
    return n;
  }
}
