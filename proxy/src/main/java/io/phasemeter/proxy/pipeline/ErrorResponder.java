package io.phasemeter.proxy.pipeline;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
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
 * Which failures are answered so, and the request's outcome, is {@link Verdict}'s to decide; the
 * write is timed as phase {@code write} by {@link Pipeline}'s chain.
 */
public final class ErrorResponder {
  private static final Logger LOG = LoggerFactory.getLogger(ErrorResponder.class);
  private static final JsonFactory JSON = new JsonFactory();

  /**
   * Logs a failure the operator should hear of (an internal error, an upstream's failure) by its
   * code and pool, never by request or response text.
   */
  static void log(RequestContext ctx, ProxyFailure f, Throwable cause) {
    if (f.kind() == ProxyFailure.Kind.INTERNAL) {
      LOG.warn(
          "internal error on {} (pool {}): {}",
          ctx.route().path(),
          ctx.poolName(),
          cause.toString());
    } else if (f.kind().outcome() == Outcome.UPSTREAM_ERROR
        || f.kind() == ProxyFailure.Kind.UPSTREAM_TIMEOUT) {
      LOG.warn("upstream failure {} (pool {})", f.kind().code(), ctx.poolName());
    }
  }

  /**
   * Tells the client about {@code f}: the error with its status, or a final error event once a
   * stream has started. Completes (never fails) when the answer is written, or when its bounded
   * write gave up and cut the connection.
   */
  Future<Void> respond(RequestContext ctx, ProxyFailure f) {
    HttpServerResponse response = ctx.response();
    Future<Void> written;
    if (!response.headWritten()) {
      ctx.statusSent(f.kind().status());
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
        ctx.pool() == null
            ? DEFAULT_WRITE_BOUND_MS
            : ctx.pool().timeouts().clientWrite().toMillis();
    return written
        .timeout(Math.max(1, boundMs), java.util.concurrent.TimeUnit.MILLISECONDS)
        .onFailure(
            err -> {
              if (err instanceof java.util.concurrent.TimeoutException) {
                Connections.forceClose(ctx.request().connection());
              }
            })
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
}
