package io.phasemeter.proxy.pipeline;

import io.opentelemetry.context.propagation.TextMapPropagator;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Future;
import io.vertx.core.Vertx;

/**
 * Phase {@code generation}: the upstream exchange, from the request being opened to the upstream's
 * last byte. A streamed response is relayed event by event while this phase runs, with backpressure
 * (a slow client pauses the upstream), and the first content event marks server TTFT. Timeouts:
 * connect, first token, and idle (no upstream byte for that long).
 *
 * <p>The upstream is chosen here, when the slot is granted, so that least-in-flight looks at the
 * moment the request leaves. A failure before any byte reached the client (connection refused or
 * reset, 502 or 503) is retried once on another upstream; the phase spans both attempts.
 *
 * <p>The pipeline times the phase: it opens the span and ends it when the exchange's future
 * completes. The exchange's one hook into that is the {@link PhaseTimer}, on which it marks the
 * upstream's last byte, since the phase ends there and not when the pipeline hears of it.
 *
 * <p>This class holds what every request's generation shares and starts one {@link
 * UpstreamExchange} per request, which decides; the work is done by its parts: {@link
 * UpstreamAttempts} (the attempts and their retries, with {@link UpstreamHeaders} and {@link
 * StreamedUpload}), {@link GenerationTimers}, and one relay per kind of answer ({@link RawRelay},
 * {@link EventStreamRelay}, {@link WholeBodyRelay}).
 */
final class GeneratePhase {
  private final Vertx vertx;
  private final UpstreamHeaders headers;
  // Whole responses count against the same bound as request bodies: with the slot given back when
  // generation ends, a client that never reads could otherwise pile them up.
  private final BodyBudget bodies;
  // limits.max_body_bytes: a streamed pass-through's bound when its route sets none.
  private final long maxBodyBytes;
  // limits.receive_timeout: how long a streamed upload may send nothing.
  private final long receiveTimeoutNanos;

  /**
   * {@code gatewayOwnsCredentials}: with auth enabled the client's key is the gateway's, so it is
   * never passed on; {@code forwarded}: whose forwarding headers are believed.
   */
  GeneratePhase(
      Vertx vertx,
      TextMapPropagator propagator,
      boolean gatewayOwnsCredentials,
      io.phasemeter.proxy.config.ProxyConfig.Forwarded forwarded,
      BodyBudget bodies,
      long maxBodyBytes,
      java.time.Duration receiveTimeout) {
    this.bodies = bodies;
    this.maxBodyBytes = maxBodyBytes;
    this.receiveTimeoutNanos = receiveTimeout.toNanos();
    this.vertx = vertx;
    this.headers = new UpstreamHeaders(propagator, gatewayOwnsCredentials, forwarded);
  }

  /**
   * Runs the exchange with an upstream of {@code pool}. The pipeline opened the phase's span and
   * ends it when this completes; {@code timer} is where the exchange marks its end, the upstream's
   * last byte, when that is not the moment it completes.
   */
  Future<Void> generate(RequestContext ctx, UpstreamPool pool, PhaseTimer timer) {
    return new UpstreamExchange(this, ctx, pool, timer).start();
  }

  Vertx vertx() {
    return vertx;
  }

  UpstreamHeaders headers() {
    return headers;
  }

  BodyBudget bodies() {
    return bodies;
  }

  long maxBodyBytes() {
    return maxBodyBytes;
  }

  long receiveTimeoutNanos() {
    return receiveTimeoutNanos;
  }

  // "upstream_4xx" and "upstream_5xx" for each status a pass-through can have, built once: the
  // record store keeps error types by reference, and a string per request would outlive young
  // collections there.
  private static final String[] UPSTREAM_ERROR_TYPES = new String[200];

  static {
    for (int i = 0; i < UPSTREAM_ERROR_TYPES.length; i++) {
      UPSTREAM_ERROR_TYPES[i] = "upstream_" + (400 + i);
    }
  }

  /** {@code upstream_<status>}; one shared string for each status from 400 to 599. */
  static String upstreamErrorType(int status) {
    int i = status - 400;
    return i >= 0 && i < UPSTREAM_ERROR_TYPES.length
        ? UPSTREAM_ERROR_TYPES[i]
        : "upstream_" + status;
  }
}
