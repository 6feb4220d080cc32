package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.opentelemetry.sdk.trace.samplers.SamplingDecision;
import io.phasemeter.proxy.config.ProxyConfig;
import java.time.Duration;
import java.util.Collections;

/**
 * Which finished requests have their traces exported (docs/design.md §3): all that did not succeed,
 * all at least as slow as a threshold, and a ratio of the rest chosen by trace id, the same way the
 * SDK's trace-id ratio sampler chooses. A pure function, so the record of a request can state the
 * same decision the span processor made.
 */
public final class ExportPolicy {
  private final double ratio;
  private final Sampler ratioSampler;
  private final boolean keepErrors;
  private final long keepSlowerThanNanos;

  public ExportPolicy(double ratio, boolean keepErrors, Duration keepSlowerThan) {
    this.ratio = ratio;
    this.ratioSampler = Sampler.traceIdRatioBased(ratio);
    this.keepErrors = keepErrors;
    this.keepSlowerThanNanos = keepSlowerThan.toNanos();
  }

  /** The policy {@code telemetry.sampling} configures. */
  public static ExportPolicy of(ProxyConfig.Sampling sampling) {
    return new ExportPolicy(sampling.ratio(), sampling.keepErrors(), sampling.keepSlowerThan());
  }

  /** Whether a request with these facts is exported. */
  public boolean keep(boolean failed, long rootNanos, String traceId) {
    if (keepErrors && failed) {
      return true;
    }
    if (rootNanos >= keepSlowerThanNanos) {
      return true;
    }
    return withinRatio(traceId);
  }

  /** The SDK's own trace-id ratio rule, so the choice matches any ratio sampler upstream. */
  boolean withinRatio(String traceId) {
    if (ratio >= 1.0) {
      return true;
    }
    if (ratio <= 0.0 || traceId == null || traceId.length() != 32) {
      return false;
    }
    return ratioSampler
            .shouldSample(
                Context.root(),
                traceId,
                "request",
                SpanKind.SERVER,
                Attributes.empty(),
                Collections.emptyList())
            .getDecision()
        == SamplingDecision.RECORD_AND_SAMPLE;
  }

  /** A human description, for reports that must state their sampling. */
  public String describe() {
    return "ratio="
        + ratio
        + ", keep_errors="
        + keepErrors
        + ", keep_slower_than_ms="
        + keepSlowerThanNanos / 1_000_000;
  }
}
