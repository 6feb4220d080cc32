package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import io.opentelemetry.context.propagation.TextMapSetter;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.MultiMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * What of the client's request head goes upstream: its headers less the hop's own, those its {@code
 * Connection} names, forwarding claims from a peer not trusted, and the client's credentials where
 * the gateway or the pool owns them; then what the proxy sets itself (the priority it applied,
 * forwarding headers, the pool's key, the body's type and coding, the trace context).
 */
final class UpstreamHeaders {
  /**
   * Credentials the client presented to the gateway; never forwarded when the gateway owns them.
   */
  private static final Set<String> CLIENT_CREDENTIALS =
      Set.of("authorization", "api-key", "x-api-key");

  /**
   * What a pass-through does not forward, either way: the hop's own headers, and what the proxy
   * sets itself. Unlike a parsed body, a relayed one keeps its encoding and length.
   */
  static final Set<String> RAW_HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "proxy-authenticate",
          "proxy-authorization",
          "proxy-connection",
          "te",
          "trailer",
          "transfer-encoding",
          "upgrade",
          "host",
          "content-length",
          "expect",
          "traceparent",
          "tracestate");

  /**
   * What a parsed request does not forward: the pass-through's set, and its encodings, since the
   * body goes out as the proxy parsed it, plain.
   */
  private static final Set<String> HOP_BY_HOP =
      with(RAW_HOP_BY_HOP, "accept-encoding", "content-encoding");

  private static Set<String> with(Set<String> base, String... more) {
    Set<String> all = new HashSet<>(base);
    all.addAll(List.of(more));
    return Set.copyOf(all);
  }

  private static final TextMapSetter<MultiMap> SETTER =
      (carrier, key, value) -> carrier.set(key, value);

  private final TextMapPropagator propagator;
  private final boolean gatewayOwnsCredentials;
  private final ForwardedHeaders forwarded;

  /**
   * {@code gatewayOwnsCredentials}: with auth enabled the client's key is the gateway's, so it is
   * never passed on; {@code forwarded}: whose forwarding headers are believed.
   */
  UpstreamHeaders(
      TextMapPropagator propagator,
      boolean gatewayOwnsCredentials,
      ProxyConfig.Forwarded forwarded) {
    this.propagator = propagator;
    this.gatewayOwnsCredentials = gatewayOwnsCredentials;
    this.forwarded = new ForwardedHeaders(forwarded);
  }

  /**
   * Fills {@code headers}, those of the request to an upstream of {@code pool}, from {@code ctx}'s
   * request; the upstream's trace continues under {@code span}.
   */
  void fill(MultiMap headers, RequestContext ctx, UpstreamPool pool, Span span) {
    boolean dropCredentials = gatewayOwnsCredentials || pool.apiKey() != null;
    boolean trusted = forwarded.trusts(ctx.request().remoteAddress());
    Set<String> named = ForwardedHeaders.connectionOptions(ctx.request());
    boolean raw = ctx.route().api() == ApiRoute.Api.PASSTHROUGH;
    Set<String> hopByHop = raw ? RAW_HOP_BY_HOP : HOP_BY_HOP;
    for (Map.Entry<String, String> h : ctx.request().headers()) {
      String name = h.getKey().toLowerCase(Locale.ROOT);
      if (!hopByHop.contains(name)
          && !named.contains(name)
          && !AuthPhase.PRIORITY_HEADER.equals(name)
          && !(!trusted && ForwardedHeaders.CLAIMS.contains(name))
          && !(dropCredentials && CLIENT_CREDENTIALS.contains(name))) {
        headers.add(h.getKey(), h.getValue());
      }
    }
    if (ctx.request().headers().contains(AuthPhase.PRIORITY_HEADER)) {
      // Once, as the proxy applied it (the first header, capped at what the key may use): a
      // repeated header is never passed on for the next hop to read its own.
      headers.set(AuthPhase.PRIORITY_HEADER, ctx.priority().label());
    }
    if (!pool.config().external()) {
      // A third party learns nothing of the client's address or this host's name.
      forwarded.apply(ctx.request(), headers, trusted);
    }
    // The operator's key for an external provider goes only where a route sends it: a
    // pass-through carries it only when its route names the pool, so that no client reaches the
    // provider's other endpoints (files, batches) with it.
    if (pool.apiKey() != null && (!raw || ctx.route().pool() != null)) {
      headers.set("authorization", "Bearer " + pool.apiKey());
    }
    if (!raw) {
      headers.set("content-type", "application/json");
      // The proxy reads what comes back: it asks for it plain (RFC 9110 §12.5.3; with no
      // Accept-Encoding any coding would be acceptable), so a coded answer is the upstream's
      // fault and is refused as malformed (see UpstreamExchange.onResponse).
      headers.set("accept-encoding", "identity");
    }
    propagator.inject(Context.root().with(span), headers, SETTER);
  }
}
