package io.phasemeter.proxy.pipeline;

/**
 * Phase {@code auth}: key verification and the rate-limit decision. With {@code auth.enabled:
 * false} (announced at start-up) every client is admitted and the phase records the decision only.
 */
final class AuthPhase {
  void check(RequestContext ctx, long start) {
    ctx.begin(Phase.AUTH, start);
    ctx.end(Phase.AUTH);
  }
}
