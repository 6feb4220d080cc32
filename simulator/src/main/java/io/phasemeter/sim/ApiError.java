package io.phasemeter.sim;

import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonObject;

/** A failure that becomes vLLM's error body: {@code {"error":{message,type,param,code}}}. */
final class ApiError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  final int status;
  final String type;
  final String param;

  ApiError(int status, String type, String message, String param) {
    super(message, null, false, false);
    this.status = status;
    this.type = type;
    this.param = param;
  }

  static ApiError badRequest(String message, String param) {
    return new ApiError(400, "BadRequestError", message, param);
  }

  static ApiError notFound(String message, String param) {
    return new ApiError(404, "NotFoundError", message, param);
  }

  static ApiError internal(String message) {
    return new ApiError(500, "InternalServerError", message, null);
  }

  static ApiError unavailable(String message) {
    return new ApiError(503, "ServiceUnavailableError", message, null);
  }

  /** Answers {@code response} with this error's status and body. */
  void sendTo(HttpServerResponse response) {
    OpenAiJson.send(response, status, body());
  }

  JsonObject body() {
    return new JsonObject()
        .put(
            "error",
            new JsonObject()
                .put("message", getMessage())
                .put("type", type)
                .put("param", param)
                .put("code", status));
  }
}
