package io.phasemeter.proxy.pipeline;

/**
 * How a request ended: its outcome, its error type, and for a failure what the client is told. The
 * one place that decides it ({@link #of}); {@link Pipeline}'s chain asks once, at its end, and
 * records the answer with {@link RequestContext#concluded}.
 *
 * @param outcome {@code llm.outcome}
 * @param errorType {@code error.type}, or null for a success
 * @param answer for a failure, what the client gets; {@link Answer#NONE} otherwise
 * @param failure the failure, classified, or null
 */
record Verdict(Outcome outcome, String errorType, Answer answer, ProxyFailure failure) {

  /** What the client is told after a failure. */
  enum Answer {
    /** Nothing more: it went away, or the response already ended. */
    NONE,
    /** Its connection is closed at once: it stopped reading, the stream cannot be finished. */
    CLOSE,
    /** An OpenAI-style error (or a final error event on a started stream). */
    ERROR
  }

  private static final Verdict SUCCESS = new Verdict(Outcome.SUCCESS, null, Answer.NONE, null);
  private static final Verdict UPSTREAM_REPORTED_ERROR =
      new Verdict(
          Outcome.UPSTREAM_ERROR, ProxyFailure.Kind.UPSTREAM_ERROR.code(), Answer.NONE, null);

  /**
   * The verdict on {@code ctx}, which failed with {@code failure} or, when it is null, ran to its
   * end. A failure decides by its kind, except that a body that broke its framing is that failure
   * whatever phase it stopped, and a client that went away (or stopped reading) is a cancellation
   * whatever failed; otherwise what the upstream answered decides: an error it reported in a 200
   * fails the request, a 4xx it passed through is the client's error, and a pass-through's relayed
   * status says which of the two it was.
   */
  static Verdict of(RequestContext ctx, Throwable failure) {
    if (failure == null) {
      if (ctx.upstreamReportedError()) {
        return UPSTREAM_REPORTED_ERROR;
      }
      int relayed = ctx.relayedStatus();
      if (relayed >= 400) {
        // A pass-through relays the upstream's answer as it came: a 4xx is the client's error,
        // anything from 500 up the upstream's, never a success.
        return new Verdict(
            relayed >= 500 ? Outcome.UPSTREAM_ERROR : Outcome.CLIENT_ERROR,
            GeneratePhase.upstreamErrorType(relayed),
            Answer.NONE,
            null);
      }
      if (ctx.passthroughStatus() > 0) {
        return new Verdict(
            Outcome.CLIENT_ERROR,
            GeneratePhase.upstreamErrorType(ctx.passthroughStatus()),
            Answer.NONE,
            null);
      }
      return SUCCESS;
    }
    // The phase the body's failure stopped failed its own way (a queue left, an upload cut).
    ProxyFailure f =
        ctx.bodyFailure() != null ? ctx.bodyFailure() : ErrorResponder.classify(failure);
    boolean closed = ctx.response().closed();
    if (f.kind() == ProxyFailure.Kind.CLIENT_STALLED && !closed) {
      return new Verdict(Outcome.CANCELLED, f.kind().code(), Answer.CLOSE, f);
    }
    if (ctx.relaysRaw() && ctx.response().headWritten() && !closed && !ctx.isCancelled()) {
      // A relayed body cut short cannot be finished: an error event appended to it would make a
      // corrupt body look whole. The connection is closed, so the client sees it was cut.
      return new Verdict(f.kind().outcome(), f.kind().code(), Answer.CLOSE, f);
    }
    if (ctx.isCancelled() || f.kind() == ProxyFailure.Kind.CLIENT_CANCELLED || closed) {
      String type =
          ctx.cancelledByShutdown()
              ? ProxyFailure.Kind.SHUTTING_DOWN.code()
              : ProxyFailure.Kind.CLIENT_CANCELLED.code();
      return new Verdict(Outcome.CANCELLED, type, Answer.NONE, f);
    }
    return new Verdict(f.kind().outcome(), f.kind().code(), Answer.ERROR, f);
  }

  /** Whether the phases the failure interrupted are marked as errors (not the client's doing). */
  boolean marksError() {
    return (answer == Answer.ERROR || (answer == Answer.CLOSE && outcome != Outcome.CANCELLED))
        && outcome != Outcome.CLIENT_ERROR;
  }
}
