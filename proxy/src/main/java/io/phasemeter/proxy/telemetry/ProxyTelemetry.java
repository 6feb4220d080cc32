package io.phasemeter.proxy.telemetry;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.common.InternalTelemetryVersion;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.SpanDeferral;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Builds the proxy's OpenTelemetry SDK from proxy.yaml, with the standard {@code OTEL_*} variables
 * winning over the file. No endpoint configured means spans are recorded but not exported.
 */
public final class ProxyTelemetry implements MeterBinder, AutoCloseable {
  private final OpenTelemetrySdk sdk;
  private final ExportDecisionSpanProcessor decisions;
  private final String exportTarget;
  private final SpanExportHealth health;

  private ProxyTelemetry(
      OpenTelemetrySdk sdk,
      ExportDecisionSpanProcessor decisions,
      String exportTarget,
      SpanExportHealth health) {
    this.health = health;
    this.sdk = sdk;
    this.decisions = decisions;
    this.exportTarget = exportTarget;
  }

  /** Builds the SDK for {@code config}, reading overrides from {@code env}. */
  public static ProxyTelemetry create(
      ProxyConfig.Telemetry config, Map<String, String> env, String version, NanoClock clock) {
    String serviceName = firstNonBlank(env.get("OTEL_SERVICE_NAME"), config.serviceName());
    String protocol =
        firstNonBlank(
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            env.get("OTEL_EXPORTER_OTLP_PROTOCOL"),
            config.otlp().protocol());
    protocol = protocol.toLowerCase(java.util.Locale.ROOT);
    if (!protocol.equals("grpc") && !protocol.equals("http/protobuf")) {
      throw new io.phasemeter.proxy.config.ConfigException(
          "OTEL_EXPORTER_OTLP_PROTOCOL: '"
              + protocol
              + "' is not supported (use http/protobuf or grpc)");
    }
    String tracesEndpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    String baseEndpoint =
        firstNonBlank(env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), config.otlp().endpoint());
    String endpoint = null;
    if (tracesEndpoint != null && !tracesEndpoint.isBlank()) {
      endpoint = tracesEndpoint.trim();
    } else if (baseEndpoint != null) {
      endpoint = baseEndpoint.trim();
      if (protocol.startsWith("http") && !endpoint.endsWith("/v1/traces")) {
        endpoint = endpoint.replaceAll("/+$", "") + "/v1/traces";
      }
    }
    SpanExportHealth health = new SpanExportHealth();
    SpanExporter exporter = null;
    if (endpoint != null) {
      exporter =
          health.measure(
              protocol.equals("grpc")
                  ? OtlpGrpcSpanExporter.builder().setEndpoint(endpoint).build()
                  : OtlpHttpSpanExporter.builder().setEndpoint(endpoint).build());
    }
    SpanProcessor export =
        exporter == null
            ? null
            : BatchSpanProcessor.builder(exporter)
                .setMaxQueueSize(MAX_QUEUE)
                .setScheduleDelay(1, TimeUnit.SECONDS)
                .setMeterProvider(health.meterProvider())
                .setInternalTelemetryVersion(InternalTelemetryVersion.LATEST)
                .build();
    ExportDecisionSpanProcessor decisions =
        new ExportDecisionSpanProcessor(
            export,
            config.sampling().ratio(),
            config.sampling().keepErrors(),
            config.sampling().keepSlowerThan(),
            100_000);
    Resource resource =
        Resource.getDefault()
            .merge(
                Resource.create(
                    Attributes.builder()
                        .put("service.name", serviceName)
                        .put("service.version", version)
                        .build()));
    SdkTracerProvider tracerProvider =
        SdkTracerProvider.builder()
            .setResource(resource)
            .setSampler(Sampler.alwaysOn())
            .setClock(new OtelClock(clock))
            .setIdGenerator(new PresetIdGenerator())
            .addSpanProcessor(decisions)
            .build();
    OpenTelemetrySdk sdk =
        OpenTelemetrySdk.builder()
            .setTracerProvider(tracerProvider)
            .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
            .build();
    return new ProxyTelemetry(
        sdk, decisions, endpoint == null ? null : protocol + " " + endpoint, health);
  }

  /** Bound on spans waiting for export; beyond it they are dropped and counted. */
  public static final int MAX_QUEUE = 8192;

  /** How span export is doing (queue, drops, export time). */
  public SpanExportHealth health() {
    return health;
  }

  /** Registers the export's health and the share of traces exported ({@link TraceExportMeters}). */
  @Override
  public void bindTo(MeterRegistry registry) {
    TraceExportMeters.of(this).bindTo(registry);
  }

  public OpenTelemetry openTelemetry() {
    return sdk;
  }

  /** The export decision processor (its exported share is a metric). */
  public ExportDecisionSpanProcessor decisions() {
    return decisions;
  }

  /**
   * Phase spans kept deferred until the root ends (docs/design.md §3: what is exported is decided
   * then), and turned into this SDK's spans, with the ids they handed out, only for requests that
   * are exported: with no exporter, or at a ratio below 1, most requests never build them.
   */
  public SpanDeferral spanDeferral() {
    return PresetIdGenerator.deferral(decisions::exports);
  }

  /** A human description of where spans go, or null when they are not exported. */
  public String exportTarget() {
    return exportTarget;
  }

  @Override
  public void close() {
    sdk.getSdkTracerProvider().shutdown().join(5, TimeUnit.SECONDS);
    health.meterProvider().shutdown().join(5, TimeUnit.SECONDS);
  }

  private static String firstNonBlank(String... values) {
    for (String v : values) {
      if (v != null && !v.isBlank()) {
        return v.trim();
      }
    }
    return null;
  }

  /** Lets the SDK stamp spans from the proxy's clock. */
  private static final class OtelClock implements io.opentelemetry.sdk.common.Clock {
    private final NanoClock clock;

    OtelClock(NanoClock clock) {
      this.clock = clock;
    }

    @Override
    public long now() {
      return clock.toEpochNanos(clock.nanoTime());
    }

    @Override
    public long nanoTime() {
      return clock.nanoTime();
    }
  }
}
