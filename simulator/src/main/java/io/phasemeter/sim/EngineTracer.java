package io.phasemeter.sim;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.vertx.core.MultiMap;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Exports one {@code llm_request} span per finished request, the way vLLM does when started with
 * {@code --otlp-traces-endpoint}: kind SERVER, a child of the incoming {@code traceparent},
 * starting at the engine's arrival and ending at the last token, with vLLM's attribute names and
 * units (seconds as doubles). The times are the simulator's own: queue = waiting for a slot,
 * prefill = slot granted → first token, decode = first → last token.
 */
final class EngineTracer implements AutoCloseable {
  static final String SPAN_NAME = "llm_request";

  private static final AttributeKey<String> REQUEST_ID =
      AttributeKey.stringKey("gen_ai.request.id");
  private static final AttributeKey<String> RESPONSE_MODEL =
      AttributeKey.stringKey("gen_ai.response.model");
  private static final AttributeKey<Long> MAX_TOKENS =
      AttributeKey.longKey("gen_ai.request.max_tokens");
  private static final AttributeKey<Long> PROMPT_TOKENS =
      AttributeKey.longKey("gen_ai.usage.prompt_tokens");
  private static final AttributeKey<Long> COMPLETION_TOKENS =
      AttributeKey.longKey("gen_ai.usage.completion_tokens");
  private static final AttributeKey<Double> TIME_IN_QUEUE =
      AttributeKey.doubleKey("gen_ai.latency.time_in_queue");
  private static final AttributeKey<Double> TIME_TO_FIRST_TOKEN =
      AttributeKey.doubleKey("gen_ai.latency.time_to_first_token");
  private static final AttributeKey<Double> E2E = AttributeKey.doubleKey("gen_ai.latency.e2e");
  private static final AttributeKey<Double> PREFILL =
      AttributeKey.doubleKey("gen_ai.latency.time_in_model_prefill");
  private static final AttributeKey<Double> DECODE =
      AttributeKey.doubleKey("gen_ai.latency.time_in_model_decode");
  private static final AttributeKey<Double> INFERENCE =
      AttributeKey.doubleKey("gen_ai.latency.time_in_model_inference");

  private static final TextMapGetter<MultiMap> HEADERS =
      new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(MultiMap carrier) {
          return carrier.names();
        }

        @Override
        public String get(MultiMap carrier, String key) {
          return carrier == null ? null : carrier.get(key);
        }
      };

  private final SdkTracerProvider provider;
  private final Tracer tracer;
  private final LongSupplier clock;
  private final long epochNanosAtOrigin;
  private final long clockAtOrigin;

  private EngineTracer(SdkTracerProvider provider, LongSupplier clock) {
    this.provider = provider;
    this.tracer = provider == null ? null : provider.get("phasemeter-sim");
    this.clock = clock;
    this.clockAtOrigin = clock.getAsLong();
    this.epochNanosAtOrigin = System.currentTimeMillis() * 1_000_000L;
  }

  /** A tracer exporting to {@code endpoint}, or one that exports nothing when it is null. */
  static EngineTracer create(String endpoint, LongSupplier clock) {
    if (endpoint == null) {
      return new EngineTracer(null, clock);
    }
    SdkTracerProvider provider =
        SdkTracerProvider.builder()
            .setResource(
                Resource.getDefault()
                    .merge(
                        Resource.create(
                            Attributes.of(
                                AttributeKey.stringKey("service.name"), "phasemeter-sim"))))
            .addSpanProcessor(
                BatchSpanProcessor.builder(
                        OtlpHttpSpanExporter.builder().setEndpoint(endpoint).build())
                    // Small batches, soon: a measuring proxy waits a bounded time for each span.
                    .setScheduleDelay(Duration.ofMillis(100))
                    .build())
            .build();
    return new EngineTracer(provider, clock);
  }

  /** The parent context carried by the request's headers ({@code traceparent}), if any. */
  Context parent(MultiMap headers) {
    if (provider == null) {
      return null;
    }
    return W3CTraceContextPropagator.getInstance().extract(Context.root(), headers, HEADERS);
  }

  /** The sequence generated its last token: export its span. */
  void finished(Sequence s) {
    if (provider == null || s.traceParent == null) {
      return;
    }
    long arrival = s.arrivalNanos;
    long first = s.firstTokenNanos;
    long last = s.lastTokenNanos;
    tracer
        .spanBuilder(SPAN_NAME)
        .setParent(s.traceParent)
        .setSpanKind(SpanKind.SERVER)
        .setStartTimestamp(epochNanos(arrival), TimeUnit.NANOSECONDS)
        .setAttribute(REQUEST_ID, s.requestId)
        .setAttribute(RESPONSE_MODEL, s.request.model())
        .setAttribute(MAX_TOKENS, (long) s.request.maxTokens())
        .setAttribute(PROMPT_TOKENS, (long) s.request.promptTokens())
        .setAttribute(COMPLETION_TOKENS, (long) s.plan.completionTokens())
        .setAttribute(TIME_IN_QUEUE, seconds(s.startNanos - arrival))
        .setAttribute(TIME_TO_FIRST_TOKEN, seconds(first - arrival))
        .setAttribute(PREFILL, seconds(first - s.startNanos))
        .setAttribute(DECODE, seconds(last - first))
        .setAttribute(INFERENCE, seconds(last - s.startNanos))
        .setAttribute(E2E, seconds(last - arrival))
        .startSpan()
        .end(epochNanos(last), TimeUnit.NANOSECONDS);
  }

  private long epochNanos(long clockNanos) {
    return epochNanosAtOrigin + (clockNanos - clockAtOrigin);
  }

  private static double seconds(long nanos) {
    return nanos / 1e9;
  }

  /** Exports what is queued, then stops. */
  @Override
  public void close() {
    if (provider != null) {
      provider.shutdown().join(5, TimeUnit.SECONDS);
    }
  }
}
