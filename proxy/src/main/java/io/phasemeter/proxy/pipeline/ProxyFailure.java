package io.phasemeter.proxy.pipeline;

/**
 * A typed failure anywhere in the pipeline. {@link ErrorResponder} is the one place that turns it
 * into an OpenAI-style error; the message goes to the client only and must never carry prompt or
 * completion text into spans or logs (spans get {@link Kind#code()} only).
 */
public final class ProxyFailure extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Every way a request can fail, with its status, OpenAI error type and code, and outcome. */
  public enum Kind {
    INVALID_JSON(400, "invalid_request_error", "invalid_json", Outcome.CLIENT_ERROR),
    INVALID_REQUEST(400, "invalid_request_error", "invalid_request", Outcome.CLIENT_ERROR),
    UNSUPPORTED_MEDIA_TYPE(
        415, "invalid_request_error", "unsupported_media_type", Outcome.CLIENT_ERROR),
    MODEL_NOT_FOUND(404, "invalid_request_error", "model_not_found", Outcome.CLIENT_ERROR),
    UNKNOWN_URL(404, "invalid_request_error", "unknown_url", Outcome.CLIENT_ERROR),
    ROUTE_DENIED(403, "permission_error", "route_denied", Outcome.CLIENT_ERROR),
    METHOD_NOT_ALLOWED(405, "invalid_request_error", "method_not_allowed", Outcome.CLIENT_ERROR),
    BODY_TOO_LARGE(413, "invalid_request_error", "request_too_large", Outcome.CLIENT_ERROR),
    URI_TOO_LONG(414, "invalid_request_error", "request_uri_too_long", Outcome.CLIENT_ERROR),
    UNSUPPORTED_TRANSFER_ENCODING(
        501, "invalid_request_error", "unsupported_transfer_encoding", Outcome.CLIENT_ERROR),
    HEADERS_TOO_LARGE(
        431, "invalid_request_error", "request_headers_too_large", Outcome.CLIENT_ERROR),
    INVALID_API_KEY(401, "invalid_request_error", "invalid_api_key", Outcome.CLIENT_ERROR),
    INVALID_PRIORITY(400, "invalid_request_error", "invalid_priority", Outcome.CLIENT_ERROR),
    INVALID_SLO_HEADER(400, "invalid_request_error", "invalid_slo_header", Outcome.CLIENT_ERROR),
    SLO_OVERRIDE_DENIED(403, "permission_error", "slo_override_denied", Outcome.CLIENT_ERROR),
    RATE_LIMIT_REQUESTS(429, "requests", "rate_limit_exceeded", Outcome.REJECTED),
    RATE_LIMIT_TOKENS(429, "tokens", "rate_limit_exceeded", Outcome.REJECTED),
    QUEUE_FULL(429, "rate_limit_error", "queue_full", Outcome.REJECTED),
    SHUTTING_DOWN(503, "server_error", "shutting_down", Outcome.REJECTED),
    OVERLOADED(503, "server_error", "overloaded", Outcome.REJECTED),
    RATE_LIMITER_UNAVAILABLE(503, "server_error", "rate_limiter_unavailable", Outcome.REJECTED),
    NO_HEALTHY_UPSTREAM(503, "server_error", "no_healthy_upstream", Outcome.UPSTREAM_ERROR),
    UPSTREAM_BUSY(503, "server_error", "upstream_busy", Outcome.REJECTED),
    QUEUE_TIMEOUT(503, "server_error", "queue_timeout", Outcome.TIMEOUT),
    UPSTREAM_UNAVAILABLE(502, "server_error", "upstream_unavailable", Outcome.UPSTREAM_ERROR),
    UPSTREAM_ERROR(502, "server_error", "upstream_error", Outcome.UPSTREAM_ERROR),
    UPSTREAM_OVERLOADED(503, "server_error", "upstream_overloaded", Outcome.UPSTREAM_ERROR),
    UPSTREAM_MALFORMED(502, "server_error", "upstream_malformed_response", Outcome.UPSTREAM_ERROR),
    UPSTREAM_DISCONNECTED(502, "server_error", "upstream_disconnected", Outcome.UPSTREAM_ERROR),
    UPSTREAM_TIMEOUT(504, "server_error", "upstream_timeout", Outcome.TIMEOUT),
    CLIENT_CANCELLED(499, "invalid_request_error", "client_cancelled", Outcome.CANCELLED),
    CLIENT_STALLED(408, "invalid_request_error", "client_stalled", Outcome.CANCELLED),
    REQUEST_TIMEOUT(408, "invalid_request_error", "request_timeout", Outcome.CLIENT_ERROR),
    INTERNAL(500, "server_error", "internal_error", Outcome.UPSTREAM_ERROR);

    private final int status;
    private final String type;
    private final String code;
    private final Outcome outcome;

    Kind(int status, String type, String code, Outcome outcome) {
      this.status = status;
      this.type = type;
      this.code = code;
      this.outcome = outcome;
    }

    /** The HTTP status sent to the client. */
    public int status() {
      return status;
    }

    /** The OpenAI error {@code type}. */
    public String type() {
      return type;
    }

    /** The OpenAI error {@code code}, also the span's {@code error.type}. */
    public String code() {
      return code;
    }

    /** The request's outcome. */
    public Outcome outcome() {
      return outcome;
    }
  }

  private final Kind kind;
  private final String param;
  private final long retryAfterSeconds;

  private ProxyFailure(Kind kind, String message, String param, long retryAfterSeconds) {
    super(message, null, false, false);
    this.kind = kind;
    this.param = param;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** A failure of {@code kind} with a message for the client. */
  public static ProxyFailure of(Kind kind, String message) {
    return new ProxyFailure(kind, message, null, -1);
  }

  /** A failure that names the request parameter at fault. */
  public static ProxyFailure ofParam(Kind kind, String message, String param) {
    return new ProxyFailure(kind, message, param, -1);
  }

  /** A failure that tells the client when to retry. */
  public static ProxyFailure retryAfter(Kind kind, String message, long seconds) {
    return new ProxyFailure(kind, message, null, seconds);
  }

  public Kind kind() {
    return kind;
  }

  /** The OpenAI error {@code param}, or null. */
  public String param() {
    return param;
  }

  /** Seconds for {@code Retry-After}, or -1 for none. */
  public long retryAfterSeconds() {
    return retryAfterSeconds;
  }
}
