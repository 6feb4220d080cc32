package io.phasemeter.load.http;

/**
 * One request as the load client measured it, on the client's monotonic clock. Durations are in
 * nanoseconds, -1 when not reached. Latencies run from the <em>intended</em> start (open model), so
 * a late start shows as {@link #scheduleLagNanos()} and in every latency, never hidden.
 *
 * @param seq the request's number in this run
 * @param traceId the W3C trace id this request carried (32 hex)
 * @param bucket low-cardinality length-bucket tag (e.g. {@code doc-qa}, {@code 1k})
 * @param step index of the arrival-rate step (0 when not stepping)
 * @param intendedNanos scheduled start (client clock)
 * @param actualNanos when the request actually started (client clock)
 * @param transportSetupNanos waiting for a connection plus connecting
 * @param ttfbNanos intended start to the response headers
 * @param ttftNanos intended start to the first event carrying content (not the role chunk)
 * @param totalNanos intended start to the last byte read
 * @param tpotNanos (t_last_token - t_first_token) / (n - 1), vLLM's definition; -1 for n ≤ 1
 * @param itlCount inter-token gaps observed (each was also recorded into the run's histogram)
 * @param status HTTP status, 0 when none arrived
 * @param error how it ended
 * @param invalidReason why the request failed, for every failure class (a {@link FailureReason}
 *     line); null only on success
 * @param promptTokens tokens asked for as input (-1 when free text)
 * @param maxTokens output tokens asked for
 * @param usagePromptTokens usage.prompt_tokens reported, -1 if none
 * @param usageCompletionTokens usage.completion_tokens reported, -1 if none
 * @param serverTiming the response's Server-Timing header, or null
 * @param retried whether the request was sent once more on a fresh connection after the reused one
 *     it first went out on turned out closed (a stale connection)
 * @param turn the request's turn in its session, 1 for the first; 0 outside any session
 * @param session the session's id (the {@code x-session-id} header sent), or null outside any
 * @param dnsNanos inside {@code transportSetupNanos}: resolving the host name for the connection
 *     this request opened; -1 on a reused connection or for an IP literal
 * @param connectNanos inside {@code transportSetupNanos}: the TCP connect of the connection this
 *     request opened (for h2c, up to the connection being ready); -1 on a reused connection
 * @param tlsNanos inside {@code transportSetupNanos}: TCP connected to the TLS handshake done (and,
 *     for h2, the connection ready); -1 on a reused connection or over plain http
 */
public record ClientResult(
    long seq,
    String traceId,
    String bucket,
    int step,
    long intendedNanos,
    long actualNanos,
    long transportSetupNanos,
    long ttfbNanos,
    long ttftNanos,
    long totalNanos,
    long tpotNanos,
    long itlCount,
    int status,
    ErrorClass error,
    String invalidReason,
    int promptTokens,
    int maxTokens,
    long usagePromptTokens,
    long usageCompletionTokens,
    String serverTiming,
    boolean retried,
    int turn,
    String session,
    long dnsNanos,
    long connectNanos,
    long tlsNanos) {

  /** A request in a session, or outside one, without its connection's set-up split. */
  public ClientResult(
      long seq,
      String traceId,
      String bucket,
      int step,
      long intendedNanos,
      long actualNanos,
      long transportSetupNanos,
      long ttfbNanos,
      long ttftNanos,
      long totalNanos,
      long tpotNanos,
      long itlCount,
      int status,
      ErrorClass error,
      String invalidReason,
      int promptTokens,
      int maxTokens,
      long usagePromptTokens,
      long usageCompletionTokens,
      String serverTiming,
      boolean retried,
      int turn,
      String session) {
    this(
        seq,
        traceId,
        bucket,
        step,
        intendedNanos,
        actualNanos,
        transportSetupNanos,
        ttfbNanos,
        ttftNanos,
        totalNanos,
        tpotNanos,
        itlCount,
        status,
        error,
        invalidReason,
        promptTokens,
        maxTokens,
        usagePromptTokens,
        usageCompletionTokens,
        serverTiming,
        retried,
        turn,
        session,
        -1,
        -1,
        -1);
  }

  /** A request outside any session (turn 0, no session). */
  public ClientResult(
      long seq,
      String traceId,
      String bucket,
      int step,
      long intendedNanos,
      long actualNanos,
      long transportSetupNanos,
      long ttfbNanos,
      long ttftNanos,
      long totalNanos,
      long tpotNanos,
      long itlCount,
      int status,
      ErrorClass error,
      String invalidReason,
      int promptTokens,
      int maxTokens,
      long usagePromptTokens,
      long usageCompletionTokens,
      String serverTiming,
      boolean retried) {
    this(
        seq,
        traceId,
        bucket,
        step,
        intendedNanos,
        actualNanos,
        transportSetupNanos,
        ttfbNanos,
        ttftNanos,
        totalNanos,
        tpotNanos,
        itlCount,
        status,
        error,
        invalidReason,
        promptTokens,
        maxTokens,
        usagePromptTokens,
        usageCompletionTokens,
        serverTiming,
        retried,
        0,
        null);
  }

  /** A request that was sent once ({@code retried} false), outside any session. */
  public ClientResult(
      long seq,
      String traceId,
      String bucket,
      int step,
      long intendedNanos,
      long actualNanos,
      long transportSetupNanos,
      long ttfbNanos,
      long ttftNanos,
      long totalNanos,
      long tpotNanos,
      long itlCount,
      int status,
      ErrorClass error,
      String invalidReason,
      int promptTokens,
      int maxTokens,
      long usagePromptTokens,
      long usageCompletionTokens,
      String serverTiming) {
    this(
        seq,
        traceId,
        bucket,
        step,
        intendedNanos,
        actualNanos,
        transportSetupNanos,
        ttfbNanos,
        ttftNanos,
        totalNanos,
        tpotNanos,
        itlCount,
        status,
        error,
        invalidReason,
        promptTokens,
        maxTokens,
        usagePromptTokens,
        usageCompletionTokens,
        serverTiming,
        false);
  }

  /** The same result with {@code session} as its session (what an output says for the id). */
  public ClientResult withSession(String session) {
    return new ClientResult(
        seq,
        traceId,
        bucket,
        step,
        intendedNanos,
        actualNanos,
        transportSetupNanos,
        ttfbNanos,
        ttftNanos,
        totalNanos,
        tpotNanos,
        itlCount,
        status,
        error,
        invalidReason,
        promptTokens,
        maxTokens,
        usagePromptTokens,
        usageCompletionTokens,
        serverTiming,
        retried,
        turn,
        session,
        dnsNanos,
        connectNanos,
        tlsNanos);
  }

  /** When its last byte was read (client clock), or -1 when not known. */
  public long endNanos() {
    return totalNanos < 0 ? -1 : intendedNanos + totalNanos;
  }

  /** How late the request left compared with its schedule. */
  public long scheduleLagNanos() {
    return actualNanos - intendedNanos;
  }

  /** Whether the request succeeded (complete and valid). */
  public boolean ok() {
    return error == ErrorClass.NONE;
  }
}
