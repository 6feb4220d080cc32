package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.ApiKey;
import io.phasemeter.proxy.gateway.Priority;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Everything one request accumulates on its way through the pipeline: the phase timestamps (on the
 * proxy's monotonic clock), the spans, what was learnt about the request and the response, and how
 * it ended. Confined to the request's event loop; only {@link #finish} ends it, exactly once.
 *
 * <p>One owner per field: each phase records its result through a small typed method ({@link
 * #authenticated}, {@link #received}, {@link #prepared}, {@link #routed}, {@link #granted}, …); the
 * phase spans are opened and closed only by {@link Pipeline}'s chain ({@link #begin}, {@link
 * #end}); the outcome and error type are set only from the one {@link Verdict} ({@link
 * #concluded}). The public accessors are for what reads a finished request (metrics, records,
 * budgets, tests).
 */
public final class RequestContext {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(RequestContext.class);

  private static final Phase[] PHASES = Phase.all();

  /** The generation span's name for a pool of an external provider. */
  public static final String EXTERNAL_GENERATION_SPAN = "provider.request";

  private final NanoClock clock;
  private final Tracer tracer;
  private final RequestObserver[] observers;
  private final HttpServerRequest request;
  private final ApiRoute route;
  private final String method;
  private final long rootStart;
  private final Span rootSpan;
  private final Context rootContext;
  private final long[] phaseStart = new long[PHASES.length];
  private final long[] phaseEnd = new long[PHASES.length];
  private final Span[] phaseSpans = new Span[PHASES.length];
  // Non-null when phase spans are kept as DeferredSpans until the root ends.
  private final SpanDeferral deferral;

  // Every mutable field below is confined to the request's event loop (the Vert.x context it was
  // made on): the phases write it through the methods under "What the phases record", the
  // pipeline's chain through begin/end and concluded, and observers read it there from
  // RequestObserver.onFinished. Nothing here is shared across threads: Pipeline.cancelAll, on
  // another thread, reaches a context only through runOnContext.

  // What the request asked for: auth, receive, prepare, route, queue.
  private String upstreamPath;
  private long declaredBodyBytes = -1;
  private Buffer body;
  private Buffer upstreamBody;
  private String model;
  private String modelLabel = "other";
  private boolean stream;
  private boolean clientWantsUsage;
  private long maxTokens = -1;
  private ProxyConfig.Pool pool;
  private SlotPool.Slot slot;
  private Priority priority = Priority.NORMAL;
  private ApiKey apiKey;
  private long tokenEstimate = -1;
  private String requestLimitSource = io.phasemeter.proxy.gateway.Decision.SOURCE_LOCAL;
  private String tokenLimitSource = io.phasemeter.proxy.gateway.Decision.SOURCE_LOCAL;
  private boolean tokensAdmitted;
  private String keyName;
  // The tenant label value (docs/design.md, "Tenants"): an allowlisted name or OTHER_TENANT.
  private String tenant = OTHER_TENANT;
  // The objectives the request's x-slo-* headers set (auth), NONE without them.
  private Objectives sloHeaders = Objectives.NONE;
  private Runnable onFinish;

  // What the response showed: generation, write.
  private int upstreamAttempts;
  // Why the (last) upstream was chosen; null when none was.
  private io.phasemeter.proxy.upstream.RouteReason routeReason;
  private long upstreamConnectNanos = -1;
  private int passthroughStatus;
  private int relayedStatus;
  private boolean plain;
  private String passthroughContentType;
  private Buffer responseBody;
  private boolean upstreamReportedError;
  private long firstTokenAt = -1;
  private long lastTokenAt = -1;
  private long contentChunks;
  private long itlMaxNanos;
  private long inputTokens = -1;
  private long outputTokens = -1;
  private String finishReason;
  private int status;

  // How it ended: decided once, by Verdict.of (see concluded).
  private Outcome outcome;
  private String errorType;
  // The verdict on its objectives, judged once in finish; null when not counted.
  private SloJudgement slo;

  private boolean cancelledByShutdown;
  // Body bytes this request holds against the proxy-wide budget, given back when it ends.
  private BodyBudget bodyBudget;
  private long heldBodyBytes;
  private final io.vertx.core.Context vertxContext = io.vertx.core.Vertx.currentContext();
  private Runnable cancelAction;
  private boolean cancelled;
  // Non-null once the body broke its framing mid-body: the request fails with it.
  private ProxyFailure bodyFailure;
  private boolean finished;
  private long rootEnd = -1;

  RequestContext(
      NanoClock clock,
      Tracer tracer,
      RequestObserver[] observers,
      HttpServerRequest request,
      ApiRoute route,
      Context parent,
      long rootStart) {
    this(clock, tracer, observers, request, route, parent, rootStart, null);
  }

  /**
   * @param deferral when non-null, phase spans are {@link DeferredSpan}s until the root ends and
   *     become SDK spans only if the request is exported; null: SDK spans from the start
   */
  RequestContext(
      NanoClock clock,
      Tracer tracer,
      RequestObserver[] observers,
      HttpServerRequest request,
      ApiRoute route,
      Context parent,
      long rootStart,
      SpanDeferral deferral) {
    this(clock, tracer, observers, request, route, parent, rootStart, deferral, "POST");
  }

  /**
   * @param method {@code http.request.method}, bounded ({@link HttpMethods#label})
   */
  RequestContext(
      NanoClock clock,
      Tracer tracer,
      RequestObserver[] observers,
      HttpServerRequest request,
      ApiRoute route,
      Context parent,
      long rootStart,
      SpanDeferral deferral,
      String method) {
    this.clock = clock;
    this.tracer = tracer;
    this.observers = observers;
    this.request = request;
    this.route = route;
    this.rootStart = rootStart;
    this.method = method;
    this.upstreamPath = route.path();
    var builder =
        tracer
            .spanBuilder(route.spanName(method))
            .setParent(parent)
            .setSpanKind(SpanKind.SERVER)
            .setStartTimestamp(clock.toEpochNanos(rootStart), TimeUnit.NANOSECONDS)
            .setAttribute(SpanAttributes.HTTP_REQUEST_METHOD, method)
            .setAttribute(SpanAttributes.HTTP_ROUTE, route.path())
            .setAttribute(SpanAttributes.URL_PATH, route.path())
            .setAttribute(SpanAttributes.NETWORK_PROTOCOL_VERSION, protocolVersion(request));
    String tls = tlsVersion(request);
    if (tls != null) {
      builder.setAttribute(SpanAttributes.TLS_PROTOCOL_VERSION, tls);
    }
    if (route.operation() != null) {
      builder.setAttribute(SpanAttributes.GEN_AI_OPERATION_NAME, route.operation());
    }
    this.rootSpan = builder.startSpan();
    this.rootContext = parent.with(rootSpan);
    // A root that records nothing (telemetry off) keeps the no-op spans: nothing to defer.
    this.deferral = deferral != null && rootSpan.isRecording() ? deferral : null;
    java.util.Arrays.fill(phaseStart, -1);
    java.util.Arrays.fill(phaseEnd, -1);
  }

  /**
   * The HTTP version {@code request} came in, as OTel's {@code network.protocol.version} writes it:
   * {@code 1.0}, {@code 1.1} or {@code 2}.
   */
  public static String protocolVersion(HttpServerRequest request) {
    io.vertx.core.http.HttpVersion version = request == null ? null : request.version();
    if (version == null) {
      return "1.1";
    }
    return switch (version) {
      case HTTP_1_0 -> "1.0";
      case HTTP_2 -> "2";
      default -> "1.1";
    };
  }

  /** The HTTP version the client spoke ({@link #protocolVersion(HttpServerRequest)}). */
  public String protocolVersion() {
    return protocolVersion(request);
  }

  /**
   * The TLS version of the connection {@code request} came in on, as OTel's {@code
   * tls.protocol.version} writes it ({@code 1.2}, {@code 1.3}; the listener allows no other), or
   * null over plaintext. One of a few constants, so a record holds no string of its own.
   */
  public static String tlsVersion(HttpServerRequest request) {
    if (request == null || !request.isSSL()) {
      return null;
    }
    javax.net.ssl.SSLSession session = request.connection().sslSession();
    String p = session == null ? null : session.getProtocol();
    if (p == null) {
      return null;
    }
    return switch (p) {
      case "TLSv1.3" -> "1.3";
      case "TLSv1.2" -> "1.2";
      case "TLSv1.1" -> "1.1";
      case "TLSv1" -> "1.0";
      default -> p.startsWith("TLSv") ? p.substring(4) : p;
    };
  }

  /** The TLS version the client spoke ({@link #tlsVersion(HttpServerRequest)}), null without. */
  public String tlsVersion() {
    return tlsVersion(request);
  }

  /** The proxy clock's current reading. */
  public long now() {
    return clock.nanoTime();
  }

  /** Starts {@code phase} now. Called by {@link Pipeline}'s chain (and fixtures) only. */
  Span begin(Phase phase) {
    return begin(phase, clock.nanoTime());
  }

  /** Starts {@code phase} at {@code at} and opens its span, a child of the root. */
  Span begin(Phase phase, long at) {
    int i = phase.ordinal();
    phaseStart[i] = at;
    // An external provider's queue and model are out of sight: its span says so by its name.
    String name =
        phase == Phase.GENERATION && pool != null && pool.external()
            ? EXTERNAL_GENERATION_SPAN
            : phase.spanName();
    Span span;
    if (deferral != null) {
      span =
          new DeferredSpan(
              clock,
              rootSpan,
              name,
              phase.kind(),
              clock.toEpochNanos(at),
              SpanAttributes.PHASE,
              phase.label());
    } else {
      span =
          tracer
              .spanBuilder(name)
              .setParent(rootContext)
              .setSpanKind(phase.kind())
              .setStartTimestamp(clock.toEpochNanos(at), TimeUnit.NANOSECONDS)
              .setAttribute(SpanAttributes.PHASE, phase.label())
              .startSpan();
    }
    phaseSpans[i] = span;
    return span;
  }

  /**
   * Ends {@code phase} now, if it is open. Called by {@link Pipeline}'s chain (and fixtures) only.
   */
  void end(Phase phase) {
    end(phase, clock.nanoTime());
  }

  /** Ends {@code phase} at {@code at}, if it is open. */
  void end(Phase phase, long at) {
    int i = phase.ordinal();
    Span span = phaseSpans[i];
    if (span == null || phaseEnd[i] >= 0) {
      return;
    }
    phaseEnd[i] = at;
    span.end(clock.toEpochNanos(at), TimeUnit.NANOSECONDS);
  }

  /** Whether {@code phase} has started and not yet ended. */
  boolean isOpen(Phase phase) {
    int i = phase.ordinal();
    return phaseSpans[i] != null && phaseEnd[i] < 0;
  }

  /** The phase's duration in nanoseconds, or -1 when it did not run to its end. */
  public long phaseNanos(Phase phase) {
    int i = phase.ordinal();
    return phaseEnd[i] < 0 ? -1 : phaseEnd[i] - phaseStart[i];
  }

  /** Root start → root end, in nanoseconds (-1 while running). */
  public long rootNanos() {
    return rootEnd < 0 ? -1 : rootEnd - rootStart;
  }

  /** Root start → first content chunk written to the client, or -1. */
  public long serverTtftNanos() {
    return firstTokenAt < 0 ? -1 : firstTokenAt - rootStart;
  }

  /** vLLM's TPOT: (last token − first token) / (n − 1), or -1 when n ≤ 1. */
  public long tpotNanos() {
    long n = outputTokens > 0 ? outputTokens : contentChunks;
    if (n <= 1 || firstTokenAt < 0 || lastTokenAt <= firstTokenAt) {
      return -1;
    }
    return (lastTokenAt - firstTokenAt) / (n - 1);
  }

  /** Root minus the sum of the phases that ran (code between spans; large = a lost phase). */
  public long unattributedNanos() {
    long sum = 0;
    for (Phase p : PHASES) {
      long d = phaseNanos(p);
      if (d > 0) {
        sum += d;
      }
    }
    return rootNanos() - sum;
  }

  /** Marks a content-bearing chunk handed to the client at {@code at}. */
  void onContentChunk(long at) {
    if (firstTokenAt < 0) {
      firstTokenAt = at;
    } else {
      long gap = at - lastTokenAt;
      if (gap > itlMaxNanos) {
        itlMaxNanos = gap;
      }
      for (RequestObserver o : observers) {
        o.onInterTokenGap(this, gap);
      }
    }
    lastTokenAt = at;
    contentChunks++;
  }

  /**
   * What to run if the client goes away now (leave the queue, cancel the upstream). A client that
   * already went away (while an asynchronous phase ran, with nothing registered) has it run at
   * once.
   */
  void onCancel(Runnable action) {
    if ((cancelled || bodyFailure != null) && !finished && action != null) {
      action.run();
      return;
    }
    this.cancelAction = action;
  }

  /** Called when the client's connection closes before the response ended. */
  void cancel() {
    if (finished || cancelled) {
      return;
    }
    cancelled = true;
    Runnable action = cancelAction;
    cancelAction = null;
    if (action != null) {
      action.run();
    }
  }

  /**
   * The request's body broke its framing mid-body ({@link BodyFraming}): the request fails with
   * {@code failure} whatever phase it is in, through the same hook that a client going away runs
   * (it leaves the queue, resets the upstream request). A request already over has its connection
   * closed, since nothing more can be read from it.
   */
  void bodyFailed(ProxyFailure failure) {
    if (finished || cancelled) {
      if (finished) {
        Connections.forceClose(request.connection());
      }
      return;
    }
    if (bodyFailure != null) {
      return;
    }
    bodyFailure = failure;
    Runnable action = cancelAction;
    cancelAction = null;
    if (action != null) {
      action.run();
    }
  }

  /** Why the body could not be read, or null. */
  ProxyFailure bodyFailure() {
    return bodyFailure;
  }

  /** Runs {@code action} on the request's event loop (where all its state lives). */
  void runOnContext(Runnable action) {
    if (vertxContext == null) {
      action.run();
    } else {
      vertxContext.runOnContext(v -> action.run());
    }
  }

  /** Whether the client went away. */
  boolean isCancelled() {
    return cancelled;
  }

  /** Whether {@link #finish} already ran. */
  boolean isFinished() {
    return finished;
  }

  /**
   * Ends the request once: releases the slot, closes open phases, stamps the root and ends it. Safe
   * to call from any failure path; later calls do nothing.
   */
  void finish(long at) {
    finish(at, null);
  }

  /**
   * Ends the request as {@link #finish(long)} does, judging its objectives with {@code judge} (when
   * not null, and the request is model traffic) once its root is stamped and before its root span
   * ends.
   */
  void finish(long at, SloJudge judge) {
    if (finished) {
      return;
    }
    finished = true;
    cancelAction = null;
    if (outcome == null) {
      // A request that never passed the chain's end (a fixture): its facts decide, the same way.
      concluded(Verdict.of(this, null));
    }
    // Every step runs whatever the one before it threw: a request that cannot end leaks its slot,
    // its in-flight count and its record, and holds a drain until the deadline.
    try {
      releaseSlot();
    } catch (RuntimeException e) {
      LOG.warn("slot release failed: {}", e.toString());
    }
    if (bodyBudget != null) {
      bodyBudget.release(heldBodyBytes);
      heldBodyBytes = 0;
    }
    if (onFinish != null) {
      try {
        onFinish.run();
      } catch (RuntimeException e) {
        LOG.warn("settling the request's rate limits failed: {}", e.toString());
      }
    }
    for (Phase p : PHASES) {
      if (isOpen(p)) {
        end(p, at);
      }
    }
    rootEnd = at;
    if (judge != null && modelTraffic()) {
      try {
        slo = judge.judge(this);
      } catch (RuntimeException e) {
        LOG.warn("judging the request's objectives failed: {}", e.toString());
      }
    }
    long rootEndEpoch = clock.toEpochNanos(at);
    try {
      annotateRoot();
      if (deferral != null
          && deferral.exports(failed(), rootEndEpoch - clock.toEpochNanos(rootStart), traceId())) {
        // Children end before their root, as live spans do: the export decision holds them for it.
        for (Span s : phaseSpans) {
          if (s instanceof DeferredSpan d) {
            d.materialize(tracer, rootContext, deferral, rootEndEpoch);
          }
        }
      }
    } catch (RuntimeException e) {
      // A failing deferral (an embedder's) costs the trace its phase spans, never the request.
      LOG.warn("phase spans not exported: {}", e.toString());
    } finally {
      rootSpan.end(rootEndEpoch, TimeUnit.NANOSECONDS);
    }
  }

  private void annotateRoot() {
    rootSpan.setAttribute(SpanAttributes.GEN_AI_REQUEST_MODEL, modelLabel);
    if (pool != null) {
      rootSpan.setAttribute(SpanAttributes.POOL, pool.name());
    }
    rootSpan.setAttribute(SpanAttributes.OUTCOME, outcome.label());
    if (status > 0) {
      rootSpan.setAttribute(SpanAttributes.HTTP_RESPONSE_STATUS_CODE, (long) status);
    }
    rootSpan.setAttribute(SpanAttributes.STREAMING, stream);
    rootSpan.setAttribute(SpanAttributes.TENANT, tenant);
    if (firstTokenAt >= 0) {
      rootSpan.setAttribute(SpanAttributes.SERVER_TTFT_MS, serverTtftNanos() / 1e6);
    }
    long tpot = tpotNanos();
    if (tpot >= 0) {
      rootSpan.setAttribute(SpanAttributes.TPOT_MS, tpot / 1e6);
    }
    if (contentChunks > 1) {
      rootSpan.setAttribute(
          SpanAttributes.ITL_MEAN_MS, (lastTokenAt - firstTokenAt) / 1e6 / (contentChunks - 1));
      rootSpan.setAttribute(SpanAttributes.ITL_MAX_MS, itlMaxNanos / 1e6);
    }
    if (inputTokens >= 0) {
      rootSpan.setAttribute(SpanAttributes.GEN_AI_USAGE_INPUT_TOKENS, inputTokens);
    }
    if (outputTokens >= 0) {
      rootSpan.setAttribute(SpanAttributes.GEN_AI_USAGE_OUTPUT_TOKENS, outputTokens);
    }
    if (slo != null) {
      rootSpan.setAttribute(SpanAttributes.SLO_RESULT, slo.result());
      rootSpan.setAttribute(SpanAttributes.SLO_OBJECTIVE, slo.objective());
    }
    if (errorType != null) {
      rootSpan.setAttribute(SpanAttributes.ERROR_TYPE, errorType);
      if (outcome != Outcome.CLIENT_ERROR && outcome != Outcome.CANCELLED) {
        rootSpan.setStatus(StatusCode.ERROR);
      }
    }
  }

  /** Counts {@code n} more body bytes against {@code budget}; false when it is spent. */
  boolean holdBody(BodyBudget budget, long n) {
    if (!budget.reserve(n)) {
      return false;
    }
    bodyBudget = budget;
    heldBodyBytes += n;
    return true;
  }

  /** Gives the request's slot back to its pool now (the upstream is done); idempotent. */
  void releaseSlot() {
    SlotPool.Slot s = slot;
    if (s != null) {
      s.release();
    }
  }

  // What the phases record: one method per result, each called by the phase that owns it.

  /** Auth (off): the request is admitted at {@code priority}. */
  void admitted(Priority priority) {
    this.priority = priority;
  }

  /** Auth: {@code key} was verified; the request runs at {@code priority}. */
  void authenticated(ApiKey key, Priority priority) {
    this.apiKey = key;
    this.keyName = key.name();
    this.priority = priority;
  }

  /** Auth: the objectives the request's {@code x-slo-*} headers set ({@link SloHeaders}). */
  void sloHeaders(Objectives objectives) {
    this.sloHeaders = objectives;
  }

  /** Auth: what to settle when the request ends (its key's rate limits). */
  void whenFinished(Runnable settle) {
    this.onFinish = settle;
  }

  /**
   * Prepare: the request will cost about {@code estimate} tokens, to take from its key's bucket.
   */
  void estimated(long estimate) {
    this.tokenEstimate = estimate;
  }

  /** Prepare, for auth: {@code estimate} tokens were taken from the key's bucket. */
  void tokensAdmitted(long estimate) {
    tokensAdmitted(estimate, io.phasemeter.proxy.gateway.Decision.SOURCE_LOCAL);
  }

  /**
   * Prepare, for auth: {@code estimate} tokens were taken from the key's bucket in {@code source}
   * (where the settlement goes back to).
   */
  void tokensAdmitted(long estimate, String source) {
    this.tokenEstimate = estimate;
    this.tokensAdmitted = true;
    this.tokenLimitSource = source;
  }

  /** Auth: the request was taken from the key's bucket in {@code source}. */
  void requestAdmittedBy(String source) {
    this.requestLimitSource = source;
  }

  String requestLimitSource() {
    return requestLimitSource;
  }

  String tokenLimitSource() {
    return tokenLimitSource;
  }

  /**
   * The pipeline, before auth: the request is for {@code path} (normalised, as the table matched
   * it), forwarded with the client's query string; neither reaches a span or a record.
   */
  void targeted(String path, String query) {
    String encoded = PathNormalizer.encode(path);
    this.upstreamPath = query == null || query.isEmpty() ? encoded : encoded + "?" + query;
    // url.path stays the route's pattern: a path can carry anything (an id, a secret someone put
    // in a URL), and spans get only what the route table names.
  }

  /** Prepare (a streamed pass-through): the body's declared length, or -1 when chunked. */
  void declared(long bytes) {
    this.declaredBodyBytes = bytes;
  }

  /**
   * Generation (a pass-through): the upstream's status, relayed with its body as it came. A 4xx is
   * the client's error, a 5xx the upstream's (see {@link Verdict}).
   */
  void relayed(int status) {
    this.relayedStatus = status;
    this.status = status;
  }

  /**
   * Prepare: the response is relayed as it comes, not inspected for tokens (a background Responses
   * request, answered at once with a queued response).
   */
  void relayedPlain() {
    this.plain = true;
    this.stream = false;
  }

  /**
   * Whether this request is model traffic as metrics and budgets judge it: a generation or pooling
   * request whose response was inspected. Pass-through requests and background Responses requests
   * (answered at once, generated out of sight) are not.
   */
  public boolean modelTraffic() {
    return route.modelTraffic() && !plain;
  }

  /** Whether a model's response was relayed uninspected (a background Responses request). */
  public boolean plain() {
    return plain;
  }

  /** Whether the response is relayed byte for byte, uninspected: a pass-through, or plain. */
  boolean relaysRaw() {
    return plain || route.api() == ApiRoute.Api.PASSTHROUGH;
  }

  /** Receive: the whole body arrived. */
  void received(Buffer body) {
    this.body = body;
  }

  /** Prepare: the body names {@code model} and asks for a stream or not. */
  void requested(String model, boolean stream) {
    this.model = model;
    this.stream = stream;
  }

  /**
   * Prepare: the body is valid; {@code upstreamBody} is what goes upstream. When it is a rewrite,
   * the client's own bytes are let go: they need not stay in the heap beside it.
   */
  void prepared(long maxTokens, Buffer upstreamBody, boolean clientWantsUsage) {
    this.maxTokens = maxTokens;
    this.upstreamBody = upstreamBody;
    this.clientWantsUsage = clientWantsUsage;
    if (upstreamBody != body) {
      body = null;
    }
  }

  /** Route: the request goes to {@code pool}, under the configured model name {@code label}. */
  void routed(String label, ProxyConfig.Pool pool) {
    this.modelLabel = label;
    this.pool = pool;
  }

  /** Queue: the request holds {@code slot} until generation ends (or the request does). */
  void granted(SlotPool.Slot slot) {
    this.slot = slot;
  }

  /** Generation: the request is being sent to its {@code attempts}-th upstream. */
  void attempting(int attempts) {
    this.upstreamAttempts = attempts;
  }

  /**
   * Generation: the attempt's new connection to the upstream took {@code nanos} to set up (TCP
   * connect, and TLS); -1 when it went out on one already open.
   */
  void upstreamConnected(long nanos) {
    this.upstreamConnectNanos = nanos;
  }

  /**
   * How long the last attempt's new connection to the upstream took to set up, -1 when it reused
   * one (or none was made).
   */
  public long upstreamConnectNanos() {
    return upstreamConnectNanos;
  }

  /** Generation: why the pool chose the upstream the request is being sent to. */
  void routeReason(io.phasemeter.proxy.upstream.RouteReason reason) {
    this.routeReason = reason;
  }

  /** Generation: the upstream judged the request itself ({@code status} 4xx): passed through. */
  void passedThrough(int status, String contentType, Buffer body) {
    this.passthroughStatus = status;
    this.passthroughContentType = contentType;
    this.responseBody = body;
  }

  /** Generation: the upstream's whole (not streamed) response. */
  void answered(Buffer body, String contentType) {
    this.responseBody = body;
    this.passthroughContentType = contentType;
  }

  /** Generation: the usage the upstream reported (-1: unknown). */
  void usage(long inputTokens, long outputTokens) {
    this.inputTokens = inputTokens;
    this.outputTokens = outputTokens;
  }

  /** Generation: why the upstream stopped generating. */
  void finishedFor(String reason) {
    this.finishReason = reason;
  }

  /**
   * Generation: the upstream answered 200 but reported an error of {@code upstreamErrorType} in the
   * body or the stream: the request failed, whatever reaches the client after (see {@link
   * Verdict}).
   */
  void upstreamReportedError(String upstreamErrorType) {
    this.upstreamReportedError = true;
    rootSpan.setAttribute(SpanAttributes.UPSTREAM_ERROR_TYPE, upstreamErrorType);
  }

  /** Generation, write, or the error answer: the response's head goes out with {@code status}. */
  void statusSent(int status) {
    this.status = status;
  }

  /** The proxy cancels this request at its drain's deadline (not the client). */
  void cancelledAtShutdown() {
    this.cancelledByShutdown = true;
  }

  /**
   * Fixtures only: content chunks as a relay would have counted them, without the gaps (no observer
   * hears of them).
   */
  void contentSeen(long firstAt, long lastAt, long chunks) {
    this.firstTokenAt = firstAt;
    this.lastTokenAt = lastAt;
    this.contentChunks = chunks;
  }

  /** The chain's end: how the request ended, decided once by {@link Verdict#of}. */
  void concluded(Verdict verdict) {
    if (outcome != null) {
      return;
    }
    this.outcome = verdict.outcome();
    this.errorType = verdict.errorType();
  }

  // What the phases read of each other's results.

  Buffer body() {
    return body;
  }

  Buffer upstreamBody() {
    return upstreamBody;
  }

  /** The model string the body named (the request's own), or null before prepare. */
  String model() {
    return model;
  }

  boolean clientWantsUsage() {
    return clientWantsUsage;
  }

  /** The larger of {@code max_tokens} and {@code max_completion_tokens}, or -1. */
  long maxTokens() {
    return maxTokens;
  }

  /** The pool's configuration, or null before routing. */
  ProxyConfig.Pool pool() {
    return pool;
  }

  /** The verified key, or null (auth off, or not verified). */
  ApiKey apiKey() {
    return apiKey;
  }

  boolean tokensAdmitted() {
    return tokensAdmitted;
  }

  long tokenEstimate() {
    return tokenEstimate;
  }

  /** The upstream path and query this request is forwarded to. */
  String upstreamPath() {
    return upstreamPath;
  }

  /** A streamed pass-through's declared body length, or -1. */
  long declaredBodyBytes() {
    return declaredBodyBytes;
  }

  /** The status of a pass-through's relayed response, or 0. */
  int relayedStatus() {
    return relayedStatus;
  }

  /** The status of an upstream 4xx passed through, or 0. */
  int passthroughStatus() {
    return passthroughStatus;
  }

  String passthroughContentType() {
    return passthroughContentType;
  }

  Buffer responseBody() {
    return responseBody;
  }

  boolean upstreamReportedError() {
    return upstreamReportedError;
  }

  boolean cancelledByShutdown() {
    return cancelledByShutdown;
  }

  /** Records generation facts on the generate span, if it ran. */
  void annotateGeneration() {
    Span gen = phaseSpans[Phase.GENERATION.ordinal()];
    if (gen == null) {
      return;
    }
    if (inputTokens >= 0) {
      gen.setAttribute(SpanAttributes.GEN_AI_USAGE_INPUT_TOKENS, inputTokens);
    }
    if (outputTokens >= 0) {
      gen.setAttribute(SpanAttributes.GEN_AI_USAGE_OUTPUT_TOKENS, outputTokens);
    }
    if (finishReason != null) {
      gen.setAttribute(SpanAttributes.GEN_AI_RESPONSE_FINISH_REASONS, List.of(finishReason));
    }
  }

  public HttpServerRequest request() {
    return request;
  }

  public HttpServerResponse response() {
    return request.response();
  }

  public ApiRoute route() {
    return route;
  }

  /** {@code http.request.method}: the method, or {@code _OTHER} for one HTTP does not define. */
  public String method() {
    return method;
  }

  public Span rootSpan() {
    return rootSpan;
  }

  /** The W3C trace id of this request (the incoming one, or a new one). */
  public String traceId() {
    return rootSpan.getSpanContext().getTraceId();
  }

  /** The root span's id. */
  public String spanId() {
    return rootSpan.getSpanContext().getSpanId();
  }

  /** The span of {@code phase}, or null when the phase did not run. */
  public Span phaseSpan(Phase phase) {
    return phaseSpans[phase.ordinal()];
  }

  /** Whether the request failed (any outcome but success). */
  public boolean failed() {
    return outcome != null && outcome != Outcome.SUCCESS;
  }

  public long rootStart() {
    return rootStart;
  }

  /** The configured model the request named, or {@code other}. */
  public String modelLabel() {
    return modelLabel;
  }

  /** The pool's name, or null before routing. */
  public String poolName() {
    return pool == null ? null : pool.name();
  }

  public boolean streaming() {
    return stream;
  }

  public int status() {
    return status;
  }

  public Outcome outcome() {
    return outcome;
  }

  public String errorType() {
    return errorType;
  }

  public long inputTokens() {
    return inputTokens;
  }

  public long outputTokens() {
    return outputTokens;
  }

  public String finishReason() {
    return finishReason;
  }

  /** The request's slot-queue priority. */
  public Priority priority() {
    return priority;
  }

  /** How many upstreams were tried (0 when generation never started). */
  public int upstreamAttempts() {
    return upstreamAttempts;
  }

  /**
   * Why the pool chose the upstream (the last one, when the request was retried on another); null
   * when no upstream was chosen.
   */
  public io.phasemeter.proxy.upstream.RouteReason routeReason() {
    return routeReason;
  }

  /** Whether the pool is an external provider (generation cannot be split). */
  public boolean external() {
    return pool != null && pool.external();
  }

  /** The name of the verified API key (from the keys file), or null. */
  public String keyName() {
    return keyName;
  }

  /** The tenant every request outside the allowlist is counted as. */
  public static final String OTHER_TENANT = "other";

  /**
   * The request's tenant: an allowlisted name, or {@link #OTHER_TENANT}; never null, so the {@code
   * llm_tenant} label set stays bounded by the configuration.
   */
  public String tenant() {
    return tenant;
  }

  /**
   * The objectives the request's own {@code x-slo-*} headers set ({@code server_ttft}, {@code
   * tpot}, {@code server_root}, in that order), {@link Objectives#NONE} without them.
   */
  public Objectives sloHeaders() {
    return sloHeaders;
  }

  /**
   * The verdict on the request's objectives, or null when it was not counted (or not yet judged: it
   * is judged once, as the request ends, before any observer hears of it).
   */
  public SloJudgement slo() {
    return slo;
  }

  /** Content-bearing chunks handed to the client (0 for a response not streamed). */
  public long contentChunks() {
    return contentChunks;
  }

  /** Auth: the request's tenant, an allowlisted name or {@link #OTHER_TENANT}. */
  void tenant(String tenant) {
    this.tenant = tenant == null ? OTHER_TENANT : tenant;
  }
}
