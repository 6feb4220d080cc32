package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.KeyStore;
import io.phasemeter.proxy.gateway.Limiter;
import io.phasemeter.proxy.upstream.UpstreamPool;
import io.vertx.core.Vertx;
import java.util.List;
import java.util.Map;

/**
 * What the {@link Pipeline} handles requests with: built once from the config by the proxy's
 * runtime, which also registers its meters and closes it. The pipeline only reads it.
 */
public interface PipelineRuntime {
  /** The Vert.x instance the listeners and upstream clients run on. */
  Vertx vertx();

  /** The configuration everything was built from. */
  ProxyConfig config();

  /** The clock every duration is measured with. */
  NanoClock clock();

  /** Where the request's spans go; a no-op instance when {@code telemetry.enabled} is false. */
  OpenTelemetry openTelemetry();

  /**
   * Keeps phase spans deferred until the root ends; null when phase spans are SDK spans from the
   * start (an OpenTelemetry instance given by the embedder) or nothing is measured.
   */
  SpanDeferral spanDeferral();

  /** Told about every finished request, in this order. */
  List<RequestObserver> observers();

  /** The API keys; null when {@code auth.enabled} is false. */
  KeyStore keys();

  /** The per-key request and token rate limits. */
  Limiter limiter();

  /** Each configured pool's upstreams, in config order. */
  List<UpstreamPool> upstreamPools();

  /** Each configured pool's slots and queue, by pool name, in config order. */
  Map<String, SlotPool> slotPools();

  /** The requests in flight, in all and by pool. */
  InFlight inFlight();

  /** The bounds on request bodies, and what is held against them now. */
  BodyBudget bodyBudget();

  /**
   * Judges each finished request against its per-request objectives; null when nothing is judged
   * (nothing is measured).
   */
  default SloJudge sloJudge() {
    return null;
  }
}
