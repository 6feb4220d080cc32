package io.phasemeter.proxy.pipeline;

/** Told about every measured request once it has ended (metrics, records, tests). */
public interface RequestObserver {

  /**
   * Called once per request, on the request's event loop, after its root span ended. Must not
   * block; {@code ctx} must not be kept after the call returns.
   */
  void onFinished(RequestContext ctx);

  /**
   * Called on the request's event loop for each gap between two content chunks of a stream, as it
   * happens (so inter-token latency is recorded without keeping the gaps). Must not block.
   */
  default void onInterTokenGap(RequestContext ctx, long gapNanos) {}
}
