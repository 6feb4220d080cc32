package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpServerResponse;

/**
 * The generation's clocks: the first token's deadline ({@code timeouts.first_token}), and the idle
 * watch, which fails an upstream that sends nothing for {@code timeouts.idle} or, while the relay
 * waits for a slow client, a client that reads nothing for {@code timeouts.client_write}. The
 * relays report each upstream byte with {@link #activity}; the first content chunk cancels the
 * first token's deadline.
 *
 * <p>The watch does not re-arm per byte: it wakes at the earliest moment it could fire and looks at
 * when the last byte came, so a stream of many chunks costs no timer churn.
 */
final class GenerationTimers {
  private final Vertx vertx;
  private final RequestContext ctx;
  private final UpstreamExchange exchange;
  private final long firstTokenMs;
  private final long idleNanos;
  private final long clientWriteNanos;
  private long firstTokenTimer = -1;
  private long idleTimer = -1;
  private long lastActivity;
  private long pausedSince = -1;

  GenerationTimers(Vertx vertx, RequestContext ctx, UpstreamPool pool, UpstreamExchange exchange) {
    this.vertx = vertx;
    this.ctx = ctx;
    this.exchange = exchange;
    this.firstTokenMs = pool.config().timeouts().firstToken().toMillis();
    this.idleNanos = pool.config().timeouts().idle().toNanos();
    this.clientWriteNanos = pool.config().timeouts().clientWrite().toNanos();
  }

  /** Starts the first token's deadline; it runs from here, across every attempt. */
  void startFirstToken() {
    firstTokenTimer =
        vertx.setTimer(
            firstTokenMs,
            id ->
                exchange.fail(
                    ProxyFailure.of(
                        ProxyFailure.Kind.UPSTREAM_TIMEOUT,
                        "The upstream did not produce a first token within "
                            + firstTokenMs
                            + " ms.")));
  }

  void cancelFirstToken() {
    if (firstTokenTimer >= 0) {
      vertx.cancelTimer(firstTokenTimer);
      firstTokenTimer = -1;
    }
  }

  /** The upstream sent something at {@code at}: the idle clock starts again from there. */
  void activity(long at) {
    lastActivity = at;
  }

  /** Starts the idle watch, once the upstream's answer is being read. */
  void armIdle() {
    long delayMs = Math.max(1, Math.min(idleNanos, clientWriteNanos) / 1_000_000);
    idleTimer = vertx.setTimer(delayMs, id -> checkIdle());
  }

  /**
   * The client is slow, not the upstream: the upstream is paused until the client's socket drains,
   * and the idle clock watches the client ({@code timeouts.client_write}) meanwhile.
   */
  void waitForClient(HttpClientResponse resp, HttpServerResponse out) {
    resp.pause();
    pausedSince = ctx.now();
    if (clientWriteNanos < idleNanos) {
      // The next idle check may be far off: the client's clock is the shorter one.
      if (idleTimer >= 0) {
        vertx.cancelTimer(idleTimer);
      }
      idleTimer = vertx.setTimer(Math.max(1, clientWriteNanos / 1_000_000), id -> checkIdle());
    }
    out.drainHandler(
        v -> {
          pausedSince = -1;
          lastActivity = ctx.now();
          resp.resume();
        });
  }

  private void checkIdle() {
    if (exchange.over()) {
      return;
    }
    if (pausedSince >= 0) {
      long stalled = ctx.now() - pausedSince;
      if (stalled >= clientWriteNanos) {
        exchange.fail(
            ProxyFailure.of(
                ProxyFailure.Kind.CLIENT_STALLED,
                "The client read nothing for " + clientWriteNanos / 1_000_000 + " ms."));
      } else {
        idleTimer =
            vertx.setTimer(
                Math.max(1, (clientWriteNanos - stalled) / 1_000_000), id -> checkIdle());
      }
      return;
    }
    long quiet = ctx.now() - lastActivity;
    if (quiet >= idleNanos) {
      exchange.fail(
          ProxyFailure.of(
              ProxyFailure.Kind.UPSTREAM_TIMEOUT,
              "The upstream sent nothing for " + idleNanos / 1_000_000 + " ms."));
    } else {
      idleTimer = vertx.setTimer(Math.max(1, (idleNanos - quiet) / 1_000_000), id -> checkIdle());
    }
  }

  void cancelIdle() {
    if (idleTimer >= 0) {
      vertx.cancelTimer(idleTimer);
      idleTimer = -1;
    }
  }
}
