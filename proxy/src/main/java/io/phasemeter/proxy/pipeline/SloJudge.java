package io.phasemeter.proxy.pipeline;

/**
 * Judges a finished request against its per-request objectives (docs/design.md, "Server-side
 * goodput"): the budgets' and its own {@code x-slo-*} headers'. The pipeline asks once per request,
 * on its event loop, after its root ended and before its root span ends, so that the verdict is on
 * the span, the record and the metric alike.
 */
@FunctionalInterface
public interface SloJudge {
  /**
   * The verdict on {@code ctx}, or null when the request is not counted (no objective applies, or
   * it ended in a way that says nothing about the service: the client's error or cancellation, the
   * key's own rate limit). Must not block.
   */
  SloJudgement judge(RequestContext ctx);
}
