package io.phasemeter.core;

import io.opentelemetry.api.common.AttributeKey;
import java.util.List;

/**
 * Every attribute the proxy puts on its spans (docs/design.md §3), declared once. Names follow the
 * OpenTelemetry semantic conventions (HTTP, server, GenAI) where one exists, {@code llm.*}
 * otherwise. No attribute carries a prompt, a completion or a key.
 */
public final class SpanAttributes {
  private SpanAttributes() {}

  // The root (SERVER) span.
  public static final AttributeKey<String> HTTP_REQUEST_METHOD =
      AttributeKey.stringKey("http.request.method");
  public static final AttributeKey<String> HTTP_ROUTE = AttributeKey.stringKey("http.route");
  public static final AttributeKey<String> URL_PATH = AttributeKey.stringKey("url.path");
  public static final AttributeKey<Long> HTTP_RESPONSE_STATUS_CODE =
      AttributeKey.longKey("http.response.status_code");

  /**
   * The HTTP version the client spoke: {@code 1.1} or {@code 2} (OTel semconv {@code
   * network.protocol.version}); one value per stream over HTTP/2.
   */
  public static final AttributeKey<String> NETWORK_PROTOCOL_VERSION =
      AttributeKey.stringKey("network.protocol.version");

  public static final AttributeKey<String> GEN_AI_OPERATION_NAME =
      AttributeKey.stringKey("gen_ai.operation.name");
  public static final AttributeKey<String> GEN_AI_REQUEST_MODEL =
      AttributeKey.stringKey("gen_ai.request.model");
  public static final AttributeKey<Long> GEN_AI_REQUEST_MAX_TOKENS =
      AttributeKey.longKey("gen_ai.request.max_tokens");
  public static final AttributeKey<List<String>> GEN_AI_RESPONSE_FINISH_REASONS =
      AttributeKey.stringArrayKey("gen_ai.response.finish_reasons");
  public static final AttributeKey<Long> GEN_AI_USAGE_INPUT_TOKENS =
      AttributeKey.longKey("gen_ai.usage.input_tokens");
  public static final AttributeKey<Long> GEN_AI_USAGE_OUTPUT_TOKENS =
      AttributeKey.longKey("gen_ai.usage.output_tokens");
  public static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");
  public static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("llm.outcome");
  public static final AttributeKey<String> POOL = AttributeKey.stringKey("llm.pool");
  public static final AttributeKey<Boolean> STREAMING = AttributeKey.booleanKey("llm.streaming");
  public static final AttributeKey<Double> SERVER_TTFT_MS =
      AttributeKey.doubleKey("llm.server_ttft_ms");
  public static final AttributeKey<Double> TPOT_MS = AttributeKey.doubleKey("llm.tpot_ms");
  public static final AttributeKey<Double> ITL_MEAN_MS = AttributeKey.doubleKey("llm.itl_mean_ms");
  public static final AttributeKey<Double> ITL_MAX_MS = AttributeKey.doubleKey("llm.itl_max_ms");

  /**
   * The request's tenant, as its {@code llm_tenant} metric label: an allowlisted name or {@code
   * other} (docs/design.md, "Tenants"); never a key or a header's raw value.
   */
  public static final AttributeKey<String> TENANT = AttributeKey.stringKey("llm.tenant");

  /**
   * The proxy's verdict on the request's server-side objectives ({@code met} or {@code missed});
   * only on a request it counted (docs/design.md, "Server-side goodput").
   */
  public static final AttributeKey<String> SLO_RESULT = AttributeKey.stringKey("llm.slo.result");

  /**
   * The first objective the request missed ({@code server_ttft}, {@code tpot}, …), {@code error}
   * for a counted failure, {@code none} when met; beside {@link #SLO_RESULT}.
   */
  public static final AttributeKey<String> SLO_OBJECTIVE =
      AttributeKey.stringKey("llm.slo.objective");

  // Every phase span.
  /** The phase's name from {@link Phases}. */
  public static final AttributeKey<String> PHASE = AttributeKey.stringKey("llm.phase");

  // auth.check
  public static final AttributeKey<String> AUTH = AttributeKey.stringKey("llm.auth");

  /** The key's name from the keys file, never the key itself. */
  public static final AttributeKey<String> KEY_NAME = AttributeKey.stringKey("llm.key_name");

  /** Which rate limit refused the request: {@code requests} or {@code tokens}. */
  public static final AttributeKey<String> RATE_LIMIT = AttributeKey.stringKey("llm.rate_limit");

  /** Who decided the rate limits: {@code local}, {@code shared} (Redis) or {@code fallback}. */
  public static final AttributeKey<String> RATE_LIMIT_SOURCE =
      AttributeKey.stringKey("llm.rate_limit.source");

  // inference.acquire_slot
  public static final AttributeKey<String> MODEL = AttributeKey.stringKey("llm.model");
  public static final AttributeKey<String> PRIORITY = AttributeKey.stringKey("llm.priority");
  public static final AttributeKey<Long> QUEUE_DEPTH_AT_ENTRY =
      AttributeKey.longKey("llm.queue.depth_at_entry");
  public static final AttributeKey<String> QUEUE_OUTCOME =
      AttributeKey.stringKey("llm.queue.outcome");

  // inference.generate (CLIENT)
  public static final AttributeKey<String> SERVER_ADDRESS =
      AttributeKey.stringKey("server.address");
  public static final AttributeKey<Long> SERVER_PORT = AttributeKey.longKey("server.port");

  /**
   * On the {@code upstream.connect} event of {@code inference.generate}: how long the attempt's new
   * connection to the upstream took, from asking for it to having it (TCP connect, and the TLS
   * handshake for an {@code https://} upstream). No event when a pooled or spare connection was
   * used.
   */
  public static final AttributeKey<Double> UPSTREAM_CONNECT_MS =
      AttributeKey.doubleKey("llm.upstream.connect_ms");

  /** The TLS version of that connection ({@code 1.2}, {@code 1.3}), as OpenTelemetry names it. */
  public static final AttributeKey<String> TLS_PROTOCOL_VERSION =
      AttributeKey.stringKey("tls.protocol.version");

  /**
   * Why the upstream in {@link #SERVER_ADDRESS} was chosen: {@code least_loaded}, {@code
   * engine_load}, {@code engine_load_fallback} or {@code only_available} (the proxy's {@code
   * RouteReason}); the last choice when the request was retried on another upstream.
   */
  public static final AttributeKey<String> ROUTE_REASON =
      AttributeKey.stringKey("llm.route.reason");

  /** The upstream's own error type, from an allowlist; anything else is {@code other}. */
  public static final AttributeKey<String> UPSTREAM_ERROR_TYPE =
      AttributeKey.stringKey("llm.upstream.error_type");
}
