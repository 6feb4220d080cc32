package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.opentelemetry.sdk.trace.samplers.SamplingDecision;
import io.phasemeter.proxy.pipeline.FinishedRequests;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ExportDecisionSpanProcessorTest {

  private static final long T0 = 1_730_000_000_000_000_000L;
  private static final Duration FAST = Duration.ofMillis(40);
  private static final Duration SLOW_THRESHOLD = Duration.ofSeconds(2);

  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private SdkTracerProvider provider;
  private ExportDecisionSpanProcessor decisions;
  private Tracer tracer;

  private void build(double ratio, boolean keepErrors, int maxPendingRoots) {
    decisions =
        new ExportDecisionSpanProcessor(
            SimpleSpanProcessor.create(exporter),
            ratio,
            keepErrors,
            SLOW_THRESHOLD,
            maxPendingRoots);
    provider = SdkTracerProvider.builder().addSpanProcessor(decisions).build();
    tracer = provider.get("test");
  }

  private void build(double ratio) {
    build(ratio, true, 1000);
  }

  @AfterEach
  void shutdown() {
    if (provider != null) {
      provider.shutdown().join(5, TimeUnit.SECONDS);
    }
  }

  /** A finished request: two children that end first, then the root. */
  private final class Request {
    Context parent = Context.root();
    String outcome = "success";
    StatusCode status = StatusCode.UNSET;
    Duration duration = FAST;
    boolean endRoot = true;

    Request parent(String traceId) {
      parent = FinishedRequests.remoteParent(traceId);
      return this;
    }

    Request outcome(String value) {
      outcome = value;
      return this;
    }

    Request status(StatusCode value) {
      status = value;
      return this;
    }

    Request duration(Duration value) {
      duration = value;
      return this;
    }

    Request unfinished() {
      endRoot = false;
      return this;
    }

    /** Runs the request and returns its root's span context. */
    SpanContext run() {
      Span root =
          tracer
              .spanBuilder("POST /v1/chat/completions")
              .setSpanKind(SpanKind.SERVER)
              .setParent(parent)
              .setStartTimestamp(T0, TimeUnit.NANOSECONDS)
              .startSpan();
      Context inRoot = parent.with(root);
      long t = T0;
      for (String name : List.of("inference.acquire_slot", "inference.generate")) {
        tracer
            .spanBuilder(name)
            .setParent(inRoot)
            .setStartTimestamp(t + 1_000, TimeUnit.NANOSECONDS)
            .startSpan()
            .end(t + 2_000, TimeUnit.NANOSECONDS);
        t += 2_000;
      }
      if (outcome != null) {
        root.setAttribute("llm.outcome", outcome);
      }
      if (status != StatusCode.UNSET) {
        root.setStatus(status);
      }
      if (endRoot) {
        root.end(T0 + duration.toNanos(), TimeUnit.NANOSECONDS);
      }
      return root.getSpanContext();
    }
  }

  private Request request() {
    return new Request();
  }

  private List<SpanData> exportedOf(SpanContext root) {
    return exporter.getFinishedSpanItems().stream()
        .filter(s -> s.getTraceId().equals(root.getTraceId()))
        .toList();
  }

  private void assertWholeRequestExported(SpanContext root) {
    List<SpanData> spans = exportedOf(root);
    assertThat(spans)
        .extracting(SpanData::getName)
        .containsExactly(
            "inference.acquire_slot", "inference.generate", "POST /v1/chat/completions");
    assertThat(spans.subList(0, 2))
        .allSatisfy(c -> assertThat(c.getParentSpanId()).isEqualTo(root.getSpanId()));
  }

  private static String traceId(SplittableRandom random) {
    return String.format(Locale.ROOT, "%016x%016x", random.nextLong(), random.nextLong());
  }

  @Test
  void ratioOneExportsEverything() {
    build(1.0);

    SpanContext a = request().run();
    SpanContext b = request().run();

    assertWholeRequestExported(a);
    assertWholeRequestExported(b);
    assertThat(exporter.getFinishedSpanItems()).hasSize(6);
    assertThat(decisions.exportedRatio()).isEqualTo(1.0);
  }

  @Test
  void ratioZeroDropsAFastSuccessWithItsChildren() {
    build(0.0);

    request().run();

    assertThat(exporter.getFinishedSpanItems()).isEmpty();
    assertThat(decisions.exportedRatio()).isZero();
    assertThat(decisions.evictedSpans()).isZero();
  }

  @Test
  void failedOutcomeIsKeptWithAllItsChildren() {
    build(0.0);

    SpanContext kept = request().outcome("timeout").run();
    request().run();

    assertWholeRequestExported(kept);
    assertThat(exporter.getFinishedSpanItems()).hasSize(3);
  }

  @Test
  void errorStatusIsKeptWithAllItsChildren() {
    build(0.0);

    // A root without llm.outcome (not the proxy's: its roots always say it) is judged by status.
    SpanContext kept = request().outcome(null).status(StatusCode.ERROR).run();

    assertWholeRequestExported(kept);
  }

  @Test
  void errorsFollowTheRatioWhenKeepErrorsIsOff() {
    build(0.0, false, 1000);

    request().outcome("upstream_error").status(StatusCode.ERROR).run();

    assertThat(exporter.getFinishedSpanItems()).isEmpty();
  }

  @Test
  void slowRequestIsKeptWithAllItsChildren() {
    build(0.0);

    SpanContext slow = request().duration(Duration.ofMillis(2500)).run();
    SpanContext atThreshold = request().duration(SLOW_THRESHOLD).run();
    SpanContext justUnder = request().duration(SLOW_THRESHOLD.minusNanos(1)).run();

    assertWholeRequestExported(slow);
    assertWholeRequestExported(atThreshold);
    assertThat(exportedOf(justUnder)).isEmpty();
  }

  @Test
  void halfRatioKeepsAboutHalfByTraceIdAndAgreesWithTheSdkSampler() {
    build(0.5);
    Sampler sdk = Sampler.traceIdRatioBased(0.5);
    SplittableRandom random = new SplittableRandom(42);
    int requests = 2000;
    List<String> ids = new ArrayList<>();
    Set<String> expected = new HashSet<>();
    for (int i = 0; i < requests; i++) {
      String id = traceId(random);
      ids.add(id);
      if (sdk.shouldSample(
                  Context.root(), id, "root", SpanKind.SERVER, Attributes.empty(), List.of())
              .getDecision()
          == SamplingDecision.RECORD_AND_SAMPLE) {
        expected.add(id);
      }
      request().parent(id).run();
    }

    Set<String> kept = new HashSet<>();
    for (SpanData s : exporter.getFinishedSpanItems()) {
      kept.add(s.getTraceId());
    }
    // Binomial(2000, 0.5): standard deviation 22; +-100 is more than four of them.
    assertThat(kept.size()).isBetween(900, 1100);
    assertThat(exporter.getFinishedSpanItems()).hasSize(kept.size() * 3);
    assertThat(decisions.exportedRatio()).isEqualTo(kept.size() / (double) requests);
    assertThat(kept).isEqualTo(expected);

    // The same trace ids again: the same decisions.
    exporter.reset();
    for (String id : ids) {
      request().parent(id).run();
    }
    Set<String> again = new HashSet<>();
    exporter.getFinishedSpanItems().forEach(s -> again.add(s.getTraceId()));
    assertThat(again).isEqualTo(kept);
  }

  @Test
  void rootWithARemoteParentIsALocalRoot() {
    build(1.0);

    SpanContext root = request().parent("4bf92f3577b34da6a3ce929d0e0e4736").run();

    assertThat(root.getTraceId()).isEqualTo("4bf92f3577b34da6a3ce929d0e0e4736");
    assertWholeRequestExported(root);
    assertThat(exportedOf(root).get(2).getParentSpanId()).isEqualTo("00f067aa0ba902b7");
    assertThat(decisions.evictedSpans()).isZero();
  }

  @Test
  void rootWithARemoteParentIsDecidedToo() {
    build(0.0);

    request().parent("4bf92f3577b34da6a3ce929d0e0e4736").run();
    SpanContext failed =
        request().parent("5bf92f3577b34da6a3ce929d0e0e4736").outcome("cancelled").run();

    assertThat(exporter.getFinishedSpanItems()).hasSize(3);
    assertWholeRequestExported(failed);
    assertThat(decisions.exportedRatio()).isEqualTo(0.5);
  }

  @Test
  void exportedRatioReportsTheKeptShare() {
    build(0.0);
    assertThat(decisions.exportedRatio()).isEqualTo(1.0);

    request().run();
    request().run();
    request().run();
    request().outcome("rejected").run();

    assertThat(decisions.exportedRatio()).isEqualTo(0.25);
  }

  @Test
  void childrenWhoseRootNeverEndsAreBoundedAndCounted() {
    build(1.0, true, 10);

    for (int i = 0; i < 100; i++) {
      request().unfinished().run();
    }

    // 100 groups of two children, at most 10 groups may wait: at least 180 spans evicted.
    await().atMost(Duration.ofSeconds(10)).until(() -> decisions.evictedSpans() >= 180);
    assertThat(decisions.evictedSpans()).isLessThanOrEqualTo(200);
    assertThat(exporter.getFinishedSpanItems()).isEmpty();
    assertThat(decisions.exportedRatio()).isEqualTo(1.0);
  }

  @Test
  void manyOrphansAreAllAccountedFor() {
    build(1.0, true, 10);

    for (int i = 0; i < 20_000; i++) {
      request().unfinished().run();
    }

    await().atMost(Duration.ofSeconds(10)).until(() -> decisions.evictedSpans() >= 39_980);
  }

  @Test
  void withNothingToExportToNoChildWaitsAndTheShareIsStillCounted() {
    decisions = new ExportDecisionSpanProcessor(null, 0.0, true, SLOW_THRESHOLD, 10);
    provider = SdkTracerProvider.builder().addSpanProcessor(decisions).build();
    tracer = provider.get("test");

    for (int i = 0; i < 100; i++) {
      request().run();
      request().unfinished().run();
    }
    request().outcome("timeout").run();

    assertThat(decisions.pendingRoots()).isZero();
    assertThat(decisions.evictedSpans()).isZero();
    assertThat(decisions.exportedRatio()).isEqualTo(1.0 / 101);
  }

  @Test
  void theBoundEvictsTheOldestWaitingRequestFirst() {
    build(1.0, true, 3);

    request().unfinished().run(); // oldest: pushed out by the fourth
    for (int i = 0; i < 2; i++) {
      request().unfinished().run();
    }
    assertThat(decisions.pendingRoots()).isEqualTo(3);
    SpanContext newest = request().run(); // waits as the fourth, then its root ends at once

    assertThat(decisions.evictedSpans()).isEqualTo(2);
    assertThat(decisions.pendingRoots()).isEqualTo(2);
    assertWholeRequestExported(newest);
  }

  @Test
  void aLongRequestUnderTheBoundKeepsItsEarlyChildrenHoweverManyRequestsPassIt() {
    build(1.0, true, 3);

    Span root =
        tracer
            .spanBuilder("POST /v1/chat/completions")
            .setSpanKind(SpanKind.SERVER)
            .setStartTimestamp(T0, TimeUnit.NANOSECONDS)
            .startSpan();
    Context inRoot = Context.root().with(root);
    tracer
        .spanBuilder("inference.acquire_slot")
        .setParent(inRoot)
        .setStartTimestamp(T0 + 1_000, TimeUnit.NANOSECONDS)
        .startSpan()
        .end(T0 + 2_000, TimeUnit.NANOSECONDS);
    // Ten times the bound's worth of requests start waiting and finish while it generates.
    for (int i = 0; i < 30; i++) {
      request().run();
    }
    tracer
        .spanBuilder("inference.generate")
        .setParent(inRoot)
        .setStartTimestamp(T0 + 2_000, TimeUnit.NANOSECONDS)
        .startSpan()
        .end(T0 + 3_000, TimeUnit.NANOSECONDS);
    root.setAttribute("llm.outcome", "success");
    root.end(T0 + FAST.toNanos(), TimeUnit.NANOSECONDS);

    assertThat(decisions.evictedSpans()).isZero();
    assertWholeRequestExported(root.getSpanContext());
    assertThat(decisions.pendingRoots()).isZero();
  }

  @Test
  void theDecisionAskedAheadIsTheDecisionTakenWhenTheRootEnds() {
    // Deferred phase spans are built only when exports() says so before the root ends: it must
    // agree with onEnd on every outcome, at the slow threshold, and on both sides of the ratio.
    build(0.5);
    SplittableRandom random = new SplittableRandom(7);
    List<String> outcomes = List.of("success", "client_error", "cancelled", "upstream_error");
    List<Duration> durations =
        List.of(FAST, SLOW_THRESHOLD.minusNanos(1), SLOW_THRESHOLD, SLOW_THRESHOLD.plusNanos(1));
    int kept = 0;
    int dropped = 0;
    for (int i = 0; i < 400; i++) {
      String traceId =
          String.format(Locale.ROOT, "%016x%016x", random.nextLong(), random.nextLong());
      String outcome = outcomes.get(i % outcomes.size());
      Duration duration = durations.get((i / outcomes.size()) % durations.size());
      boolean ahead = decisions.exports(!outcome.equals("success"), duration.toNanos(), traceId);
      SpanContext root = request().parent(traceId).outcome(outcome).duration(duration).run();
      assertThat(!exportedOf(root).isEmpty())
          .as("%s, %s, %s", outcome, duration, traceId)
          .isEqualTo(ahead);
      if (ahead) {
        kept++;
      } else {
        dropped++;
      }
    }
    assertThat(kept).isPositive();
    assertThat(dropped).isPositive();
  }
}
