package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.upstream.ResponseEvent;
import io.phasemeter.proxy.upstream.StreamChunk;

/**
 * The usage and finish reason an upstream reports, in a chunk, an event or a whole body, taken into
 * the request's context; the numbers are checked before anything adds or charges them.
 */
final class UpstreamUsage {
  /**
   * The largest token count an upstream's usage may report; beyond it (or negative) the usage is
   * taken as unknown. No model has a context anywhere near it, and sums of such counts stay far
   * from overflowing a long.
   */
  static final long MAX_USAGE_TOKENS = 1L << 32;

  private UpstreamUsage() {}

  /** Takes what a chat or text completion's chunk (or whole body) reports. */
  static void take(RequestContext ctx, StreamChunk chunk) {
    if (chunk.hasUsage()) {
      ctx.usage(plausibleTokens(chunk.promptTokens()), plausibleTokens(chunk.completionTokens()));
    }
    if (chunk.finishReason() != null) {
      ctx.finishedFor(chunk.finishReason());
    }
  }

  /** Takes what a Responses API event (or whole response) reports. */
  static void take(RequestContext ctx, ResponseEvent r) {
    if (r.hasUsage()) {
      ctx.usage(plausibleTokens(r.inputTokens()), plausibleTokens(r.outputTokens()));
    }
    if (r.finishReason() != null) {
      ctx.finishedFor(r.finishReason());
    }
  }

  /** {@code n} when it is a token count an upstream can have reported, else -1 (unknown). */
  static long plausibleTokens(long n) {
    return n >= 0 && n <= MAX_USAGE_TOKENS ? n : -1;
  }
}
