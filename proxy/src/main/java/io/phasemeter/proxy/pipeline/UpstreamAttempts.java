package io.phasemeter.proxy.pipeline;

import io.netty.channel.ConnectTimeoutException;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.core.net.StaleConnections;
import io.phasemeter.proxy.tls.TlsFailures;
import io.phasemeter.proxy.upstream.UpstreamHost;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.http.ConnectionPoolTooBusyException;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import java.net.ConnectException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;

/**
 * The request's attempts at the pool's upstreams, one at a time, as Envoy's upstream request is to
 * its router: each chooses an upstream, opens the request, sends it and hands the answer's head to
 * the {@link UpstreamExchange}. An attempt that fails before any byte reached the client
 * (connection refused or reset, 502 or 503) is retried on another upstream, up to the pool's {@code
 * retries}; one whose pooled connection turns out to have been closed by the upstream is sent once
 * more to the same upstream on a fresh connection. The upstream's in-flight count and its request
 * are given back here, exactly once per attempt.
 */
final class UpstreamAttempts {
  private final UpstreamExchange exchange;
  private final RequestContext ctx;
  private final UpstreamPool pool;
  private final Span span;
  private final UpstreamHeaders headers;
  // Null unless the client's body goes upstream as it arrives (a streamed pass-through).
  private final StreamedUpload upload;
  private final List<UpstreamHost> tried = new ArrayList<>(2);
  private UpstreamHost current;
  private boolean staleRetried;
  // Times the request was written to an upstream (a refused connect writes nothing).
  private int sends;
  private HttpClientRequest upstreamRequest;

  UpstreamAttempts(
      UpstreamExchange exchange,
      RequestContext ctx,
      UpstreamPool pool,
      UpstreamHeaders headers,
      StreamedUpload upload) {
    this.exchange = exchange;
    this.ctx = ctx;
    this.pool = pool;
    this.span = exchange.span();
    this.headers = headers;
    this.upload = upload;
  }

  /** The first attempt, at the upstream the pool chooses now; none available fails the request. */
  void start() {
    UpstreamPool.Choice choice = pool.choose(tried);
    if (choice == null) {
      exchange.fail(noUpstream());
    } else {
      routed(choice);
      attempt(choice.host());
    }
  }

  /** Why the upstream was chosen, on the span (beside server.address) and for the record. */
  private void routed(UpstreamPool.Choice choice) {
    span.setAttribute(SpanAttributes.ROUTE_REASON, choice.reason().word());
    ctx.routeReason(choice.reason());
  }

  private ProxyFailure noUpstream() {
    return ProxyFailure.retryAfter(
        ProxyFailure.Kind.NO_HEALTHY_UPSTREAM,
        "No upstream of pool '" + pool.config().name() + "' is available; retry later.",
        1);
  }

  private void attempt(UpstreamHost host) {
    attempt(host, false);
  }

  private void attempt(UpstreamHost host, boolean fresh) {
    tried.add(host);
    current = host;
    ctx.attempting(tried.size());
    span.setAttribute(SpanAttributes.SERVER_ADDRESS, host.address().host());
    span.setAttribute(SpanAttributes.SERVER_PORT, (long) host.address().port());
    HttpMethod method = ctx.request() == null ? HttpMethod.POST : ctx.request().method();
    String path = ctx.upstreamPath();
    (fresh
            ? pool.openFresh(host, method, path)
            : pool.open(host, method, path, ctx.route().takesSlot()))
        .onComplete(
            ar -> {
              if (ar.failed()) {
                // A full wait queue for a pooled connection is this proxy's limit, not the
                // upstream failing: no ejection.
                if (current == host && !(ar.cause() instanceof ConnectionPoolTooBusyException)) {
                  pool.connectFailed(host);
                }
                failed(host, connectFailure(ar.cause()), true);
                return;
              }
              HttpClientRequest request = ar.result();
              if (exchange.over() || current != host) {
                pool.abandon(request);
                return;
              }
              upstreamRequest = request;
              connected(pool.connect(request));
              boolean reused = !fresh && pool.reused(request);
              long sentAt = ctx.now();
              sends++;
              headers.fill(request.headers(), ctx, pool, span);
              (upload != null ? upload.send(request) : request.send(ctx.upstreamBody()))
                  .onComplete(
                      rr -> {
                        if (current != host) {
                          return;
                        }
                        if (rr.failed()) {
                          if (reused && !bodyTaken() && staleConnection(host, rr.cause(), sentAt)) {
                            return;
                          }
                          if (TlsFailures.describe(rr.cause()) != null) {
                            // A TLS 1.3 server refuses a client certificate after the client's
                            // side of the handshake ended: the connect failed all the same.
                            pool.connectFailed(host);
                            pool.tlsFailed(host, rr.cause());
                          }
                          // A body already streamed on cannot be sent again.
                          failed(host, connectFailure(rr.cause()), !bodyTaken());
                        } else {
                          answered(host, rr.result());
                        }
                      });
            });
  }

  /**
   * The attempt's connection: when it was opened for this request, an {@code upstream.connect}
   * event with how long that took, and the record's {@code upstream_connect_ms}; a pooled or spare
   * one leaves the record's null.
   */
  private void connected(UpstreamPool.Connect connect) {
    ctx.upstreamConnected(connect == null ? -1 : connect.nanos());
    if (connect == null) {
      return;
    }
    var attributes =
        Attributes.builder().put(SpanAttributes.UPSTREAM_CONNECT_MS, connect.nanos() / 1e6);
    if (connect.tlsVersion() != null) {
      attributes.put(SpanAttributes.TLS_PROTOCOL_VERSION, connect.tlsVersion());
    }
    span.addEvent("upstream.connect", attributes.build());
  }

  private boolean bodyTaken() {
    return upload != null && upload.bodyTaken();
  }

  private void answered(UpstreamHost host, HttpClientResponse resp) {
    if (exchange.over()) {
      return;
    }
    pool.reachable(host);
    if (upstreamRequest != null) {
      pool.answered(host, upstreamRequest);
    }
    exchange.onResponse(host, resp);
  }

  /**
   * The request failed on a pooled connection that had carried a request before, with nothing
   * received: the upstream had closed it (llama.cpp's server does after a stream, without {@code
   * Connection: close}). Sent once more to the same upstream on a connection of its own, before any
   * byte reached the client; counted ({@code llm_upstream_stale_retries_total}, a span event),
   * never towards ejection. A timeout, or a second such failure, is not retried so.
   *
   * @return whether the request was sent again
   */
  private boolean staleConnection(UpstreamHost host, Throwable cause, long sentAt) {
    if (exchange.over()
        || staleRetried
        || pool.config().retries() == 0
        || pool.config().external()
        || ctx.isCancelled()
        || ctx.response().headWritten()
        || ctx.now() - sentAt > StaleConnections.WINDOW_NANOS
        || !StaleConnections.closedConnection(cause)) {
      return false;
    }
    staleRetried = true;
    pool.staleRetried(host, upstreamRequest);
    span.addEvent(
        "upstream.stale_connection_retry",
        Attributes.builder()
            .put("server.address", host.address().host())
            .put("server.port", (long) host.address().port())
            .build());
    end();
    attempt(host, true);
    return true;
  }

  /**
   * The attempt at {@code host} failed. Retried once on another upstream when {@code retryable},
   * nothing reached the client yet and the pool allows it; otherwise the request fails.
   */
  void failed(UpstreamHost host, ProxyFailure failure, boolean retryable) {
    if (exchange.over() || current != host) {
      return;
    }
    end();
    // At most retries + 1 sends of the request, and another upstream at most retries times; a
    // stale connection's resend to the same upstream counts as a send, not as another upstream.
    if (retryable
        && new HashSet<>(tried).size() <= pool.config().retries()
        && sends <= pool.config().retries()
        && !ctx.isCancelled()
        && !ctx.response().headWritten()) {
      UpstreamPool.Choice choice = pool.choose(tried);
      if (choice != null) {
        UpstreamHost other = choice.host();
        routed(choice);
        pool.retried();
        span.addEvent(
            "upstream.retry",
            Attributes.builder()
                .put("error.type", failure.kind().code())
                .put("server.address", host.address().host())
                .put("server.port", (long) host.address().port())
                .build());
        attempt(other);
        return;
      }
    }
    exchange.fail(failure);
  }

  /** Ends the current attempt's bookkeeping once (in-flight count, upstream request). */
  void end() {
    if (current != null) {
      pool.ended(current);
      current = null;
    }
    if (upstreamRequest != null) {
      // Cancels the upstream's work: on HTTP/1.1 this closes the connection vLLM is writing to
      // (one of the pool's own is closed even when the request's head was never written).
      pool.abandon(upstreamRequest);
      upstreamRequest = null;
    }
  }

  /**
   * The upstream answered to its last byte: the attempt ends as a success. {@code whole}: the
   * client's body went upstream to its end too (always, unless it is streamed on).
   */
  void completed(boolean whole) {
    if (current != null) {
      if (upstreamRequest != null && whole) {
        // A whole exchange: what the upstream does with the connection next tells whether it
        // keeps connections (connections.reuse: auto).
        pool.responded(current, upstreamRequest);
      }
      pool.ended(current);
      current = null;
    }
    if (upstreamRequest != null && !whole) {
      // The upstream answered before the upload ended: the rest of the body has nowhere to go
      // (the client's connection closes after the answer, see RawRelay). A reset does not free a
      // connection whose response already ended: it is closed, or the pool keeps it.
      upstreamRequest.reset();
      if (upstreamRequest.connection() != null) {
        upstreamRequest.connection().close();
      }
    }
    upstreamRequest = null;
  }

  private static ProxyFailure connectFailure(Throwable t) {
    if (t instanceof ProxyFailure pf) {
      return pf;
    }
    if (t instanceof ConnectionPoolTooBusyException) {
      return ProxyFailure.retryAfter(
          ProxyFailure.Kind.UPSTREAM_BUSY,
          "Too many requests are waiting for a connection to the upstream"
              + " (connections.wait_queue); retry later.",
          1);
    }
    String tls = TlsFailures.describe(t);
    if (tls != null) {
      return ProxyFailure.of(
          ProxyFailure.Kind.UPSTREAM_UNAVAILABLE, "TLS to the upstream failed: " + tls + ".");
    }
    if (t instanceof ConnectTimeoutException) {
      return ProxyFailure.of(
          ProxyFailure.Kind.UPSTREAM_TIMEOUT, "Timed out connecting to the upstream.");
    }
    if (t instanceof ConnectException) {
      return ProxyFailure.of(
          ProxyFailure.Kind.UPSTREAM_UNAVAILABLE, "The upstream refused the connection.");
    }
    return ProxyFailure.of(
        ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
        "The upstream closed the connection before answering.");
  }
}
