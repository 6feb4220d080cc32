package io.phasemeter.proxy.pipeline;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.phasemeter.core.SpanAttributes;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place where failures become OpenAI-style errors: {@code {"error": {"message", "type",
 * "param", "code"}}} with the failure's status, or, once a stream has started, a final {@code data:
 * {"error": …}} event. Logs name the failure's code and the pool, never request or response text.
 */
public final class ErrorResponder {
  private static final Logger LOG = LoggerFactory.getLogger(ErrorResponder.class);
  private static final JsonFactory JSON = new JsonFactory();

  /** Answers a request that failed (or was cancelled) and stamps its outcome. */
  Future<Void> respond(RequestContext ctx, Throwable failure) {
    ProxyFailure f = classify(failure);
    HttpServerResponse response = ctx.response();
    if (f.kind() == ProxyFailure.Kind.CLIENT_STALLED && !response.closed()) {
      // A client that stopped reading: the stream cannot be finished; close the connection.
      ctx.outcome = Outcome.CANCELLED;
      ctx.errorType = f.kind().code();
      markOpenPhases(ctx, ctx.errorType, false);
      // At once: a graceful close waits for the queued bytes, which this client will never read.
      Connections.forceClose(ctx.request().connection());
      return Future.succeededFuture();
    }
    if (ctx.isCancelled() || f.kind() == ProxyFailure.Kind.CLIENT_CANCELLED || response.closed()) {
      ctx.outcome = Outcome.CANCELLED;
      ctx.errorType =
          ctx.cancelledByShutdown
              ? ProxyFailure.Kind.SHUTTING_DOWN.code()
              : ProxyFailure.Kind.CLIENT_CANCELLED.code();
      if (!response.headWritten()) {
        ctx.status = ProxyFailure.Kind.CLIENT_CANCELLED.status();
      }
      markOpenPhases(ctx, ctx.errorType, false);
      return Future.succeededFuture();
    }
    ctx.outcome = f.kind().outcome();
    ctx.errorType = f.kind().code();
    markOpenPhases(ctx, ctx.errorType, f.kind().outcome() != Outcome.CLIENT_ERROR);
    if (f.kind() == ProxyFailure.Kind.INTERNAL) {
      LOG.warn(
          "internal error on {} (pool {}): {}",
          ctx.route().path(),
          ctx.poolName(),
          failure.toString());
    } else if (f.kind().outcome() == Outcome.UPSTREAM_ERROR
        || f.kind() == ProxyFailure.Kind.UPSTREAM_TIMEOUT) {
      LOG.warn("upstream failure {} (pool {})", f.kind().code(), ctx.poolName());
    }
    if (!ctx.isOpen(Phase.WRITE)) {
      ctx.begin(Phase.WRITE);
    }
    Future<Void> written;
    if (!response.headWritten()) {
      ctx.status = f.kind().status();
      response.setStatusCode(f.kind().status());
      response.putHeader("content-type", "application/json");
      if (f.retryAfterSeconds() >= 0) {
        response.putHeader("retry-after", Long.toString(f.retryAfterSeconds()));
      }
      // A body left unread (refused before it was read: a bad key, a rate limit) would be taken
      // for the next request on this connection: close it instead.
      boolean closeAfter =
          f.kind() == ProxyFailure.Kind.BODY_TOO_LARGE
              || f.kind() == ProxyFailure.Kind.REQUEST_TIMEOUT
              || !ctx.request().isEnded();
      if (closeAfter) {
        response.putHeader("connection", "close");
      }
      written = response.end(Buffer.buffer(body(f)));
      if (closeAfter) {
        written = written.andThen(ar -> ctx.request().connection().close());
      }
    } else {
      // The stream already started with a 200: say what went wrong in the stream itself.
      written =
          response
              .write(Buffer.buffer("data: " + body(f) + "\n\n"))
              .compose(v -> response.end(), err -> response.end());
    }
    // A client that reads nothing would hold the request open forever: bound the error's write
    // as a response's is bounded, then cut the connection.
    long boundMs =
        ctx.pool == null ? DEFAULT_WRITE_BOUND_MS : ctx.pool.timeouts().clientWrite().toMillis();
    return written
        .timeout(Math.max(1, boundMs), java.util.concurrent.TimeUnit.MILLISECONDS)
        .onFailure(
            err -> {
              if (err instanceof java.util.concurrent.TimeoutException) {
                Connections.forceClose(ctx.request().connection());
              }
            })
        .andThen(ar -> ctx.end(Phase.WRITE))
        .otherwiseEmpty();
  }

  /** How long an error may take to be written when no pool says (the default client_write). */
  static final long DEFAULT_WRITE_BOUND_MS = 30_000;

  /** Renders the OpenAI error body for {@code f}. */
  public static String body(ProxyFailure f) {
    StringWriter out = new StringWriter(160);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeObjectFieldStart("error");
      g.writeStringField("message", f.getMessage());
      g.writeStringField("type", f.kind().type());
      g.writeStringField("param", f.param());
      g.writeStringField("code", f.kind().code());
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  static ProxyFailure classify(Throwable t) {
    if (t instanceof ProxyFailure pf) {
      return pf;
    }
    return ProxyFailure.of(ProxyFailure.Kind.INTERNAL, "The proxy failed to handle the request.");
  }

  /** Marks and ends the phases the failure interrupted: a phase ends when it fails. */
  private static void markOpenPhases(RequestContext ctx, String code, boolean isError) {
    long now = ctx.now();
    for (Phase p : Phase.all()) {
      if (ctx.isOpen(p) && p != Phase.WRITE) {
        Span s = ctx.span(p);
        s.setAttribute(SpanAttributes.ERROR_TYPE, code);
        if (isError) {
          s.setStatus(StatusCode.ERROR);
        }
        ctx.end(p, now);
      }
    }
  }
}
