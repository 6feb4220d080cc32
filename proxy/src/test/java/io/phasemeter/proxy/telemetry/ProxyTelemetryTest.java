package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ProxyTelemetryTest {

  private static final ProxyConfig.Telemetry DEFAULTS = ConfigLoader.defaults().telemetry();
  private static final ProxyConfig.Telemetry FROM_FILE =
      ConfigLoader.parse(
              """
              telemetry:
                service_name: from-file
                otlp: {endpoint: 'http://file-collector:4318'}
              """,
              "proxy.yaml")
          .telemetry();

  /** A clock the test sets by hand. */
  private static final class FakeClock implements NanoClock {
    long now = 5_000;

    @Override
    public long nanoTime() {
      return now;
    }

    @Override
    public long toEpochNanos(long nanoTime) {
      return 1_700_000_000_000_000_000L + nanoTime;
    }
  }

  private final List<ProxyTelemetry> created = new ArrayList<>();

  private ProxyTelemetry create(ProxyConfig.Telemetry config, Map<String, String> env) {
    ProxyTelemetry t = ProxyTelemetry.create(config, env, "1.2.3", new FakeClock());
    created.add(t);
    return t;
  }

  @AfterEach
  void closeAll() {
    created.forEach(ProxyTelemetry::close);
  }

  private static Resource resourceOf(ProxyTelemetry t) {
    // Never ended, so nothing is sent to the (unreachable) collector.
    Span span = t.openTelemetry().getTracer("test").spanBuilder("probe").startSpan();
    return ((ReadableSpan) span).toSpanData().getResource();
  }

  @Test
  void noEndpointMeansNoExport() {
    ProxyTelemetry t = create(DEFAULTS, Map.of());

    assertThat(t.exportTarget()).isNull();
    assertThat(t.openTelemetry()).isNotNull();
    assertThat(t.decisions().exportedRatio()).isEqualTo(1.0);
  }

  @Test
  void fileEndpointGetsTheTracesPath() {
    ProxyTelemetry t = create(FROM_FILE, Map.of());

    assertThat(t.exportTarget()).isEqualTo("http/protobuf http://file-collector:4318/v1/traces");
  }

  @Test
  void standardEndpointVariableWinsOverTheFile() {
    ProxyTelemetry t =
        create(FROM_FILE, Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"));

    assertThat(t.exportTarget()).contains("http://localhost:4318/v1/traces");
    assertThat(t.exportTarget()).doesNotContain("file-collector");
  }

  @Test
  void endpointWithATrailingSlashOrTheFullPathIsNotDoubled() {
    assertThat(
            create(DEFAULTS, Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318/"))
                .exportTarget())
        .endsWith(" http://localhost:4318/v1/traces");
    assertThat(
            create(
                    DEFAULTS,
                    Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318/v1/traces"))
                .exportTarget())
        .endsWith(" http://localhost:4318/v1/traces");
  }

  @Test
  void tracesEndpointWinsAndIsUsedAsIs() {
    ProxyTelemetry t =
        create(
            FROM_FILE,
            Map.of(
                "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/custom"));

    assertThat(t.exportTarget()).isEqualTo("http/protobuf http://traces:9999/custom");
  }

  @Test
  void grpcProtocolFromTheEnvironment() {
    ProxyTelemetry t =
        create(
            DEFAULTS,
            Map.of(
                "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317",
                "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"));

    assertThat(t.exportTarget()).isEqualTo("grpc http://localhost:4317");
  }

  @Test
  void tracesProtocolWinsOverTheGeneralOne() {
    ProxyTelemetry t =
        create(
            DEFAULTS,
            Map.of(
                "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"));

    assertThat(t.exportTarget()).isEqualTo("http/protobuf http://localhost:4318/v1/traces");
  }

  @Test
  void serviceNameFromTheFileAndTheVersion() {
    Resource r = resourceOf(create(FROM_FILE, Map.of()));

    assertThat(r.getAttribute(AttributeKey.stringKey("service.name"))).isEqualTo("from-file");
    assertThat(r.getAttribute(AttributeKey.stringKey("service.version"))).isEqualTo("1.2.3");
  }

  @Test
  void serviceNameVariableWinsOverTheFile() {
    Resource r = resourceOf(create(FROM_FILE, Map.of("OTEL_SERVICE_NAME", "from-env")));

    assertThat(r.getAttribute(AttributeKey.stringKey("service.name"))).isEqualTo("from-env");
  }

  @Test
  void blankVariablesAreIgnored() {
    ProxyTelemetry t =
        create(
            FROM_FILE,
            Map.of(
                "OTEL_SERVICE_NAME", " ",
                "OTEL_EXPORTER_OTLP_ENDPOINT", "",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "  "));

    assertThat(t.exportTarget()).isEqualTo("http/protobuf http://file-collector:4318/v1/traces");
    assertThat(resourceOf(t).getAttribute(AttributeKey.stringKey("service.name")))
        .isEqualTo("from-file");
  }

  @Test
  void spansAreStampedFromTheInjectedClock() {
    FakeClock clock = new FakeClock();
    ProxyTelemetry t = ProxyTelemetry.create(DEFAULTS, Map.of(), "1.2.3", clock);
    created.add(t);

    Span span = t.openTelemetry().getTracer("test").spanBuilder("timed").startSpan();
    clock.now += 250_000_000;
    span.end();

    ReadableSpan readable = (ReadableSpan) span;
    assertThat(readable.toSpanData().getStartEpochNanos()).isEqualTo(clock.toEpochNanos(5_000));
    assertThat(readable.getLatencyNanos()).isEqualTo(250_000_000);
  }

  @Test
  void propagatesW3cTraceContext() {
    ProxyTelemetry t = create(DEFAULTS, Map.of());

    assertThat(t.openTelemetry().getPropagators().getTextMapPropagator().fields())
        .contains("traceparent");
  }

  @Test
  void closeDoesNotThrow() {
    ProxyTelemetry quiet = ProxyTelemetry.create(DEFAULTS, Map.of(), "1.2.3", new FakeClock());
    ProxyTelemetry exporting =
        ProxyTelemetry.create(
            DEFAULTS,
            Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            "1.2.3",
            NanoClock.system());

    assertThatCode(quiet::close).doesNotThrowAnyException();
    assertThatCode(exporting::close).doesNotThrowAnyException();
  }

  @Test
  void phaseSpansAreBuiltOnlyForExportedRequestsAndKeepTheIdTheyHandedOut() {
    String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    ProxyTelemetry quiet = create(DEFAULTS, Map.of());
    // Nothing to export to: no request's phase spans are ever built, however slow or failed.
    assertThat(quiet.spanDeferral().exports(true, Long.MAX_VALUE, traceId)).isFalse();
    ProxyTelemetry exporting =
        create(DEFAULTS, Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"));
    // The default sampling exports everything.
    assertThat(exporting.spanDeferral().exports(false, 1, traceId)).isTrue();
    ProxyTelemetry sampled =
        create(
            ConfigLoader.parse(
                    "telemetry:\n  otlp: {endpoint: http://127.0.0.1:9}\n"
                        + "  sampling: {ratio: 0.0, keep_errors: true, keep_slower_than: 2s}\n",
                    "sampled.yaml")
                .telemetry(),
            Map.of());
    assertThat(sampled.spanDeferral().exports(false, 1_999_999_999L, traceId)).isFalse();
    assertThat(sampled.spanDeferral().exports(false, 2_000_000_000L, traceId)).isTrue();
    assertThat(sampled.spanDeferral().exports(true, 1, traceId)).isTrue();

    var tracer = quiet.openTelemetry().getTracer("test");
    Span chosen = quiet.spanDeferral().start(tracer.spanBuilder("phase"), "00f067aa0ba902b7");
    Span next = tracer.spanBuilder("other").startSpan();
    assertThat(chosen.getSpanContext().getSpanId()).isEqualTo("00f067aa0ba902b7");
    assertThat(next.getSpanContext().getSpanId()).isNotEqualTo("00f067aa0ba902b7");
    assertThat(next.getSpanContext().isValid()).isTrue();
    chosen.end();
    next.end();
  }
}
