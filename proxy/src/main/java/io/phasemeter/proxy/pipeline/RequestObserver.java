package io.phasemeter.proxy.pipeline;

/** Told about every measured request once it has ended (metrics, records, tests). */
@FunctionalInterface
public interface RequestObserver {

  /**
   * Called once per request, on the request's event loop, after its root span ended. Must not
   * block; {@code ctx} must not be kept after the call returns.
   */
  void onFinished(RequestContext ctx);
}
