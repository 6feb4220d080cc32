package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.config.ProxyConfig;
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
  private final long rootStart;
  private final Span rootSpan;
  private final Context rootContext;
  private final long[] phaseStart = new long[PHASES.length];
  private final long[] phaseEnd = new long[PHASES.length];
  private final Span[] phaseSpans = new Span[PHASES.length];
  // Non-null when phase spans are kept as DeferredSpans until the root ends.
  private final SpanDeferral deferral;

  // What the request asked for.
  Buffer body;
  Buffer upstreamBody;
  String model;
  String modelLabel = "other";
  boolean stream;
  boolean clientWantsUsage;
  long maxTokens = -1;
  ProxyConfig.Pool pool;
  ProxyConfig.Upstream upstream;
  int upstreamAttempts;
  SlotPool.Slot slot;
  Priority priority = Priority.NORMAL;
  io.phasemeter.proxy.gateway.ApiKey apiKey;
  long tokenEstimate;
  boolean tokensAdmitted;
  String keyName;
  Runnable onFinish;

  // What the response showed.
  int passthroughStatus;
  String passthroughContentType;
  Buffer responseBody;
  long firstTokenAt = -1;
  long lastTokenAt = -1;
  long contentChunks;
  long itlMaxNanos;
  long inputTokens = -1;
  long outputTokens = -1;
  String finishReason;
  int status;
  Outcome outcome;
  String errorType;

  boolean cancelledByShutdown;
  // Body bytes this request holds against the proxy-wide budget, given back when it ends.
  private BodyBudget bodyBudget;
  private long heldBodyBytes;
  private final io.vertx.core.Context vertxContext = io.vertx.core.Vertx.currentContext();
  private Runnable cancelAction;
  private boolean cancelled;
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
    this.clock = clock;
    this.tracer = tracer;
    this.observers = observers;
    this.request = request;
    this.route = route;
    this.rootStart = rootStart;
    this.rootSpan =
        tracer
            .spanBuilder(route.spanName())
            .setParent(parent)
            .setSpanKind(SpanKind.SERVER)
            .setStartTimestamp(clock.toEpochNanos(rootStart), TimeUnit.NANOSECONDS)
            .setAttribute(SpanAttributes.HTTP_REQUEST_METHOD, "POST")
            .setAttribute(SpanAttributes.HTTP_ROUTE, route.path())
            .setAttribute(SpanAttributes.URL_PATH, route.path())
            .setAttribute(SpanAttributes.GEN_AI_OPERATION_NAME, route.operation())
            .startSpan();
    this.rootContext = parent.with(rootSpan);
    // A root that records nothing (telemetry off) keeps the no-op spans: nothing to defer.
    this.deferral = deferral != null && rootSpan.isRecording() ? deferral : null;
    java.util.Arrays.fill(phaseStart, -1);
    java.util.Arrays.fill(phaseEnd, -1);
  }

  /** The proxy clock's current reading. */
  public long now() {
    return clock.nanoTime();
  }

  /** Starts {@code phase} now. */
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

  /** Ends {@code phase} now, if it is open. */
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

  /** The open span of {@code phase}, or null. */
  Span span(Phase phase) {
    return phaseSpans[phase.ordinal()];
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

  /** What to run if the client goes away now (leave the queue, cancel the upstream). */
  void onCancel(Runnable action) {
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
    if (finished) {
      return;
    }
    finished = true;
    cancelAction = null;
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
    if (outcome == null) {
      outcome = Outcome.SUCCESS;
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
    if (firstTokenAt >= 0) {
      rootSpan.setAttribute(SpanAttributes.SERVER_TTFT_MS, serverTtftNanos() / 1e6);
    }
    long tpot = tpotNanos();
    if (tpot >= 0) {
      rootSpan.setAttribute(SpanAttributes.TPOT_MS, tpot / 1e6);
    }
    if (contentChunks > 1) {
      rootSpan.setAttribute(
          "llm.itl_mean_ms", (lastTokenAt - firstTokenAt) / 1e6 / (contentChunks - 1));
      rootSpan.setAttribute(SpanAttributes.ITL_MAX_MS, itlMaxNanos / 1e6);
    }
    if (inputTokens >= 0) {
      rootSpan.setAttribute(SpanAttributes.GEN_AI_USAGE_INPUT_TOKENS, inputTokens);
    }
    if (outputTokens >= 0) {
      rootSpan.setAttribute(SpanAttributes.GEN_AI_USAGE_OUTPUT_TOKENS, outputTokens);
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

  /**
   * The upstream answered 200 but reported an error in the body or the stream (its type goes on the
   * spans): the request failed, whatever reaches the client after.
   */
  void failUpstream() {
    outcome = Outcome.UPSTREAM_ERROR;
    errorType = ProxyFailure.Kind.UPSTREAM_ERROR.code();
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

  /** Whether the pool is an external provider (generation cannot be split). */
  public boolean external() {
    return pool != null && pool.external();
  }

  /** The name of the verified API key (from the keys file), or null. */
  public String keyName() {
    return keyName;
  }
}
