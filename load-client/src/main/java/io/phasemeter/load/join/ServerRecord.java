package io.phasemeter.load.join;

import java.util.Map;

/**
 * The proxy's record of one request (docs/design.md §5, schema v1), as read from its feed.
 * Durations in milliseconds, on the proxy's clock; null when the proxy did not observe them.
 *
 * @param phasesMs phase name ({@code auth}, {@code receive}, {@code prepare}, {@code route}, {@code
 *     queue}, {@code generation}, {@code write}) to duration
 * @param sampled whether the proxy exported this request's trace
 * @param route the record's {@code route} ({@code /v1/chat/completions}, {@code /v1/responses}, …),
 *     or null when it had none
 * @param operation the record's {@code operation} ({@code chat}, {@code text_completion}, {@code
 *     responses}, {@code embeddings}), or null: records of proxies before it existed have none. The
 *     join needs neither: it pairs on the trace id alone.
 * @param tenant the record's {@code tenant} (an allowlisted name or {@code other}), or null:
 *     records of proxies before tenants have none
 * @param slo the proxy's own goodput verdict (the record's {@code slo}), or null when it did not
 *     count the request or predates it
 */
public record ServerRecord(
    String traceId,
    String model,
    String pool,
    boolean stream,
    int status,
    String outcome,
    double rootMs,
    Double serverTtftMs,
    Map<String, Double> phasesMs,
    Double unattributedMs,
    Double tpotMs,
    Long inputTokens,
    Long outputTokens,
    boolean sampled,
    String engineStatus,
    boolean external,
    String route,
    String operation,
    String tenant,
    ServerSlo slo) {

  /** A record without {@code tenant} and {@code slo} (a proxy before them). */
  public ServerRecord(
      String traceId,
      String model,
      String pool,
      boolean stream,
      int status,
      String outcome,
      double rootMs,
      Double serverTtftMs,
      Map<String, Double> phasesMs,
      Double unattributedMs,
      Double tpotMs,
      Long inputTokens,
      Long outputTokens,
      boolean sampled,
      String engineStatus,
      boolean external,
      String route,
      String operation) {
    this(
        traceId,
        model,
        pool,
        stream,
        status,
        outcome,
        rootMs,
        serverTtftMs,
        phasesMs,
        unattributedMs,
        tpotMs,
        inputTokens,
        outputTokens,
        sampled,
        engineStatus,
        external,
        route,
        operation,
        null,
        null);
  }

  /** The same record with the proxy's {@code tenant} and {@code slo}. */
  public ServerRecord with(String tenant, ServerSlo slo) {
    return new ServerRecord(
        traceId,
        model,
        pool,
        stream,
        status,
        outcome,
        rootMs,
        serverTtftMs,
        phasesMs,
        unattributedMs,
        tpotMs,
        inputTokens,
        outputTokens,
        sampled,
        engineStatus,
        external,
        route,
        operation,
        tenant,
        slo);
  }

  /** A record without {@code route} and {@code operation}. */
  public ServerRecord(
      String traceId,
      String model,
      String pool,
      boolean stream,
      int status,
      String outcome,
      double rootMs,
      Double serverTtftMs,
      Map<String, Double> phasesMs,
      Double unattributedMs,
      Double tpotMs,
      Long inputTokens,
      Long outputTokens,
      boolean sampled,
      String engineStatus,
      boolean external) {
    this(
        traceId,
        model,
        pool,
        stream,
        status,
        outcome,
        rootMs,
        serverTtftMs,
        phasesMs,
        unattributedMs,
        tpotMs,
        inputTokens,
        outputTokens,
        sampled,
        engineStatus,
        external,
        null,
        null);
  }

  /** A record without the engine's split ({@code telemetry.engine_spans} off) of a proxy pool. */
  public ServerRecord(
      String traceId,
      String model,
      String pool,
      boolean stream,
      int status,
      String outcome,
      double rootMs,
      Double serverTtftMs,
      Map<String, Double> phasesMs,
      Double unattributedMs,
      Double tpotMs,
      Long inputTokens,
      Long outputTokens,
      boolean sampled) {
    this(
        traceId,
        model,
        pool,
        stream,
        status,
        outcome,
        rootMs,
        serverTtftMs,
        phasesMs,
        unattributedMs,
        tpotMs,
        inputTokens,
        outputTokens,
        sampled,
        null,
        false);
  }

  /** auth + prepare + route, when all three ran. */
  public Double gatewayMs() {
    Double a = phasesMs.get("auth");
    Double p = phasesMs.get("prepare");
    Double r = phasesMs.get("route");
    return a == null || p == null || r == null ? null : a + p + r;
  }
}
