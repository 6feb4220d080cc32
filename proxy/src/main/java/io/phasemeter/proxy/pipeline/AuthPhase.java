package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.Span;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.proxy.gateway.ApiKey;
import io.phasemeter.proxy.gateway.Decision;
import io.phasemeter.proxy.gateway.KeyStore;
import io.phasemeter.proxy.gateway.Limiter;
import io.phasemeter.proxy.gateway.Priority;
import io.phasemeter.proxy.gateway.SharedLimiter;
import io.phasemeter.proxy.gateway.Verification;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import java.util.Map;

/**
 * Phase {@code auth}: key verification, the request-rate decision and the request's priority.
 *
 * <p>With {@code auth.enabled: false} (announced at start-up) every client is admitted at normal
 * priority and may pick another with {@code x-priority}. With auth on, the key comes from {@code
 * Authorization: Bearer …} (or {@code api-key} / {@code x-api-key}); its priority is the keys
 * file's, which {@code x-priority} may lower always and raise only when the key allows it. The
 * token-rate decision needs the body, so {@link PreparePhase} takes it; see {@link #admitTokens}.
 *
 * <p>The request's tenant is decided here, once ({@link TenantResolver}): from the tenant header
 * first, so a request refused for its key still has one, then from the verified key's name. The
 * request's own objectives ({@code x-slo-*}, {@link SloHeaders}) are read here too, once the key is
 * known: a key may be denied them.
 *
 * <p>With {@code auth.client_cert: true} (mTLS on the listener) the connection's client certificate
 * names the key instead of a header: the key whose name is the certificate subject's common name
 * (CN), as an nginx operator maps {@code $ssl_client_s_dn}. API key headers are then not consulted;
 * a certificate whose CN names no key is refused like a wrong key.
 */
final class AuthPhase {
  static final String PRIORITY_HEADER = "x-priority";

  private final KeyStore keys;
  private final Limiter limiter;
  private final TenantResolver tenants;
  private final boolean clientCert;

  /** {@code keys} null: auth is off. */
  AuthPhase(KeyStore keys, Limiter limiter, TenantResolver tenants) {
    this(keys, limiter, tenants, false);
  }

  /** {@code clientCert}: the client certificate's CN names the key ({@code auth.client_cert}). */
  AuthPhase(KeyStore keys, Limiter limiter, TenantResolver tenants, boolean clientCert) {
    this.keys = keys;
    this.limiter = limiter;
    this.tenants = tenants;
    this.clientCert = clientCert && keys != null;
  }

  /**
   * Verifies the key and takes one request from its bucket; throws the refusal. {@code span} is the
   * phase's, opened by the pipeline.
   */
  Future<Void> check(RequestContext ctx, Span span) {
    try {
      return verifyAndAdmit(ctx, span);
    } catch (ProxyFailure f) {
      return Future.failedFuture(f);
    }
  }

  private Future<Void> verifyAndAdmit(RequestContext ctx, Span span) {
    MultiMap headers = ctx.request().headers();
    ctx.tenant(tenants.fromHeaders(headers));
    if (keys == null) {
      ctx.admitted(requestedPriority(headers, Priority.HIGH, Priority.NORMAL));
      span.setAttribute(SpanAttributes.AUTH, "disabled");
      ctx.sloHeaders(SloHeaders.parse(headers, null));
      return Future.succeededFuture();
    }
    Verification v = clientCert ? verifyCertificate(ctx.request()) : verify(headers);
    if (clientCert && !v.verified()) {
      span.setAttribute(
          SpanAttributes.AUTH, v instanceof Verification.Missing ? "missing" : "invalid");
      throw ProxyFailure.of(
          ProxyFailure.Kind.INVALID_API_KEY,
          v instanceof Verification.Missing
              ? "No client certificate was presented; this gateway authenticates clients by"
                  + " their certificate."
              : "Your client certificate names no key of this gateway. Ask your gateway's"
                  + " operator for a certificate whose common name is your key's name.");
    }
    if (v instanceof Verification.Missing) {
      span.setAttribute(SpanAttributes.AUTH, "missing");
      throw ProxyFailure.of(
          ProxyFailure.Kind.INVALID_API_KEY,
          "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.");
    }
    if (!(v instanceof Verification.Verified verified)) {
      span.setAttribute(SpanAttributes.AUTH, "invalid");
      throw ProxyFailure.of(
          ProxyFailure.Kind.INVALID_API_KEY,
          "Incorrect API key provided. Ask your gateway's operator for a valid key.");
    }
    ApiKey key = verified.key();
    String keyTenant = tenants.ofKey(key);
    if (keyTenant != null) {
      ctx.tenant(keyTenant);
    }
    span.setAttribute(SpanAttributes.AUTH, "verified");
    span.setAttribute(SpanAttributes.KEY_NAME, key.name());
    if (ctx.route().adminOnly() && !key.admin()) {
      throw ProxyFailure.of(
          ProxyFailure.Kind.ROUTE_DENIED,
          "Key '"
              + key.name()
              + "' may not use "
              + ctx.route().path()
              + ": it needs an admin key.");
    }
    ctx.authenticated(
        key,
        requestedPriority(
            headers, key.allowPriorityHeader() ? Priority.HIGH : key.priority(), key.priority()));
    // Before the rate limits: a refused header costs the key nothing.
    ctx.sloHeaders(SloHeaders.parse(headers, key));
    if (!key.limitsRequests() && !key.limitsTokens()) {
      // Nothing to count: no round trip to a shared store either.
      return Future.succeededFuture();
    }
    return limiter
        .admitRequest(key)
        .recover(AuthPhase::unavailable)
        .map(
            d -> {
              putHeaders(ctx, d);
              span.setAttribute(SpanAttributes.RATE_LIMIT_SOURCE, d.source());
              if (d.allowed()) {
                ctx.requestAdmittedBy(d.source());
                RequestContext c = ctx;
                ctx.whenFinished(() -> settle(c));
                return null;
              }
              span.setAttribute(SpanAttributes.RATE_LIMIT, "requests");
              throw ProxyFailure.retryAfter(
                  ProxyFailure.Kind.RATE_LIMIT_REQUESTS,
                  "Rate limit reached for key '"
                      + key.name()
                      + "' on requests per minute: limit "
                      + key.rpm()
                      + ". Please try again in "
                      + d.retryAfterSeconds()
                      + "s.",
                  d.retryAfterSeconds());
            });
  }

  /** A shared limiter that fails closed refuses with 503 while its store cannot answer. */
  private static Future<Decision> unavailable(Throwable t) {
    if (t instanceof SharedLimiter.Unavailable u) {
      return Future.failedFuture(
          ProxyFailure.retryAfter(ProxyFailure.Kind.RATE_LIMITER_UNAVAILABLE, u.getMessage(), 1));
    }
    return Future.failedFuture(t);
  }

  /**
   * Takes the request's token estimate (input estimate + {@code max_tokens}) from its key's bucket,
   * once the body is parsed; refuses with 429 when the key is out of tokens. The estimate is
   * settled against the actual usage when the request ends. {@code span}: phase prepare's.
   */
  Future<Void> admitTokens(RequestContext ctx, Span span) {
    ApiKey key = ctx.apiKey();
    long estimate = ctx.tokenEstimate();
    if (key == null || estimate < 0 || !key.limitsTokens()) {
      return Future.succeededFuture();
    }
    return limiter
        .admitTokens(key, estimate)
        .recover(
            t -> {
              if (t instanceof SharedLimiter.Unavailable) {
                limiter.refundRequest(key, ctx.requestLimitSource());
              }
              return unavailable(t);
            })
        .map(d -> tokensDecided(ctx, key, estimate, d, span));
  }

  private Void tokensDecided(RequestContext ctx, ApiKey key, long estimate, Decision d, Span span) {
    putHeaders(ctx, d);
    if (!d.allowed()) {
      limiter.refundRequest(key, ctx.requestLimitSource());
      span.setAttribute(SpanAttributes.RATE_LIMIT, "tokens");
      if (d.refusal() == Decision.Refusal.TOO_LARGE) {
        throw ProxyFailure.of(
            ProxyFailure.Kind.RATE_LIMIT_TOKENS,
            "Request too large for key '"
                + key.name()
                + "': it needs about "
                + estimate
                + " tokens (input estimate + max_tokens) and the limit is "
                + key.tpm()
                + " tokens per minute. Send fewer tokens or lower max_tokens.");
      }
      throw ProxyFailure.retryAfter(
          ProxyFailure.Kind.RATE_LIMIT_TOKENS,
          "Rate limit reached for key '"
              + key.name()
              + "' on tokens per minute: limit "
              + key.tpm()
              + ", requested about "
              + estimate
              + ". Please try again in "
              + d.retryAfterSeconds()
              + "s.",
          d.retryAfterSeconds());
    }
    ctx.tokensAdmitted(estimate, d.source());
    return null;
  }

  /**
   * When an admitted request ends: a request refused as invalid before it reached an upstream gives
   * its request back (it never ran); admitted tokens are settled against the usage if known, else
   * all of the estimate is charged if the request reached an upstream.
   */
  private void settle(RequestContext ctx) {
    if (ctx.upstreamAttempts() == 0 && neverRan(ctx.errorType())) {
      limiter.refundRequest(ctx.apiKey(), ctx.requestLimitSource());
    }
    if (!ctx.tokensAdmitted()) {
      return;
    }
    long actual;
    if (ctx.inputTokens() >= 0 || ctx.outputTokens() >= 0) {
      actual = Math.max(0, ctx.inputTokens()) + Math.max(0, ctx.outputTokens());
    } else {
      actual = ctx.upstreamAttempts() > 0 ? ctx.tokenEstimate() : 0;
    }
    limiter.settleTokens(ctx.apiKey(), ctx.tokenEstimate(), actual, ctx.tokenLimitSource());
  }

  /**
   * Refusals that say nothing about the key's pace: the parsed body was invalid, or the proxy had
   * no room for it. A body too large or too slow is not among them: refunding those would make
   * holding uploads free.
   */
  private static boolean neverRan(String errorType) {
    return errorType != null
        && (errorType.equals(ProxyFailure.Kind.INVALID_JSON.code())
            || errorType.equals(ProxyFailure.Kind.INVALID_REQUEST.code())
            || errorType.equals(ProxyFailure.Kind.UNSUPPORTED_MEDIA_TYPE.code())
            || errorType.equals(ProxyFailure.Kind.MODEL_NOT_FOUND.code())
            || errorType.equals(ProxyFailure.Kind.OVERLOADED.code()));
  }

  /** Whether {@code GET /v1/models} may be answered: auth off, or a valid key presented. */
  boolean admitsListing(io.vertx.core.http.HttpServerRequest request) {
    if (keys == null) {
      return true;
    }
    return (clientCert ? verifyCertificate(request) : verify(request.headers())).verified();
  }

  /** The key the connection's client certificate names by its subject's CN. */
  private Verification verifyCertificate(io.vertx.core.http.HttpServerRequest request) {
    return keys.verifyName(ClientCertificates.commonName(request.connection()));
  }

  private Verification verify(MultiMap headers) {
    String authorization = headers.get("authorization");
    if (authorization != null) {
      return keys.verify(authorization);
    }
    String raw = headers.get("api-key");
    if (raw == null) {
      raw = headers.get("x-api-key");
    }
    return keys.verifyKey(raw);
  }

  /**
   * The priority from {@code x-priority}, capped at {@code highest}; {@code fallback} without the
   * header. A value that is no priority is refused (400), so a typo never silently means normal.
   */
  private static Priority requestedPriority(MultiMap headers, Priority highest, Priority fallback) {
    String asked = headers.get(PRIORITY_HEADER);
    if (asked == null) {
      return fallback;
    }
    Priority p;
    try {
      p = Priority.parse(asked);
    } catch (IllegalArgumentException e) {
      throw ProxyFailure.ofParam(
          ProxyFailure.Kind.INVALID_PRIORITY,
          "The x-priority header must be high, normal or low.",
          PRIORITY_HEADER);
    }
    // Lowering is always allowed; raising only up to what the key may use.
    return p.ordinal() < highest.ordinal() ? highest : p;
  }

  private static void putHeaders(RequestContext ctx, Decision d) {
    for (Map.Entry<String, String> h : d.headerMap().entrySet()) {
      ctx.response().headers().set(h.getKey(), h.getValue());
    }
  }
}
