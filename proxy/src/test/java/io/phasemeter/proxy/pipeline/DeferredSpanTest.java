package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.telemetry.PresetIdGenerator;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Deferred phase spans (docs/design.md §3: everything recorded, export decided when the root ends):
 * an exported request's spans are the same, field for field, as the SDK spans the same request gets
 * live, with the ids they handed out before the root ended; a request that is not exported builds
 * no SDK span for its phases; the export decision gets the root's own duration and outcome.
 */
class DeferredSpanTest {
  private static final long EPOCH = 1_700_000_000_000_000_000L;

  /** A hand clock: {@link #advance} moves it. */
  private static final class HandClock implements NanoClock {
    long now = 1_000_000;

    @Override
    public long nanoTime() {
      return now;
    }

    @Override
    public long toEpochNanos(long nanoTime) {
      return EPOCH + nanoTime;
    }

    void advance(long micros) {
      now += micros * 1_000;
    }
  }

  /** Records what it was asked, answers {@link #exported}. */
  private static final class Decision implements SpanDeferral {
    boolean exported;
    final List<String> asked = new ArrayList<>();

    @Override
    public boolean exports(boolean failed, long rootNanos, String traceId) {
      asked.add(failed + " " + rootNanos + " " + traceId);
      return exported;
    }

    @Override
    public Span start(SpanBuilder builder, String spanId) {
      return PresetIdGenerator.startWithId(builder, spanId);
    }
  }

  private final HandClock sdkClock = new HandClock();
  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private final SdkTracerProvider provider =
      SdkTracerProvider.builder()
          .setIdGenerator(new PresetIdGenerator())
          // The SDK stamps live events from the same hand clock the pipeline reads, as the
          // proxy's SDK does from the proxy's clock.
          .setClock(
              new io.opentelemetry.sdk.common.Clock() {
                @Override
                public long now() {
                  return sdkClock.toEpochNanos(sdkClock.now);
                }

                @Override
                public long nanoTime() {
                  return sdkClock.now;
                }
              })
          .addSpanProcessor(SimpleSpanProcessor.create(exporter))
          .build();
  private final Tracer tracer = provider.get("test");

  @AfterEach
  void close() {
    provider.close();
  }

  /**
   * One request the way the phases write it: attributes, a retry event, an error status on the
   * generation span, and the write phase left open for {@code finish} to close. Returns the
   * generation span's id as the upstream traceparent would have carried it.
   */
  private String script(RequestContext ctx, HandClock clock) {
    Span auth = ctx.begin(Phase.AUTH, clock.now);
    auth.setAttribute("llm.auth", "verified");
    clock.advance(20);
    ctx.end(Phase.AUTH, clock.now);
    ctx.begin(Phase.RECEIVE, clock.now);
    clock.advance(35);
    ctx.end(Phase.RECEIVE, clock.now);
    ctx.begin(Phase.PREPARE, clock.now);
    clock.advance(12);
    ctx.end(Phase.PREPARE, clock.now);
    ctx.begin(Phase.ROUTE, clock.now);
    clock.advance(3);
    ctx.end(Phase.ROUTE, clock.now);
    Span queue = ctx.begin(Phase.QUEUE, clock.now);
    queue.setAttribute("llm.queue.depth_at_entry", 7L);
    queue.setAttribute("llm.queue.outcome", "timeout");
    queue.setAttribute("llm.queue.outcome", "acquired");
    clock.advance(400);
    ctx.end(Phase.QUEUE, clock.now);
    Span gen = ctx.begin(Phase.GENERATION, clock.now);
    String traceparentSpanId = gen.getSpanContext().getSpanId();
    gen.setAttribute("llm.streaming", true);
    gen.setAttribute("server.port", 8000L);
    clock.advance(900);
    gen.addEvent("upstream.retry", Attributes.of(AttributeKey.stringKey("error.type"), "reset"));
    clock.advance(5_000);
    gen.setStatus(StatusCode.ERROR, "upstream reset twice");
    ctx.end(Phase.GENERATION, clock.now);
    ctx.begin(Phase.WRITE, clock.now);
    clock.advance(60);
    ctx.statusSent(502);
    ctx.concluded(
        new Verdict(Outcome.UPSTREAM_ERROR, "upstream_reset", Verdict.Answer.ERROR, null));
    ctx.finish(clock.now);
    return traceparentSpanId;
  }

  private RequestContext context(HandClock clock, SpanDeferral deferral) {
    return new RequestContext(
        clock,
        tracer,
        new RequestObserver[0],
        null,
        ApiRoute.CHAT,
        FinishedRequests.remoteParent("4bf92f3577b34da6a3ce929d0e0e4736"),
        clock.now,
        deferral);
  }

  private static SpanData root(List<SpanData> spans) {
    return spans.stream().filter(s -> s.getKind() == SpanKind.SERVER).findFirst().orElseThrow();
  }

  private static List<SpanData> children(List<SpanData> spans) {
    SpanData root = root(spans);
    return spans.stream()
        .filter(s -> s.getParentSpanId().equals(root.getSpanId()))
        .sorted(Comparator.comparingLong(SpanData::getStartEpochNanos))
        .toList();
  }

  @Test
  void anExportedRequestsSpansAreTheLiveSpansWithTheIdsAlreadyHandedOut() {
    HandClock clock = sdkClock;
    script(context(clock, null), clock);
    List<SpanData> live = List.copyOf(exporter.getFinishedSpanItems());
    exporter.reset();

    Decision decision = new Decision();
    decision.exported = true;
    clock.now = new HandClock().now;
    RequestContext ctx = context(clock, decision);
    String traceparentSpanId = script(ctx, clock);
    List<SpanData> deferred = exporter.getFinishedSpanItems();

    assertThat(deferred).hasSize(8).hasSameSizeAs(live);
    List<SpanData> liveChildren = children(live);
    List<SpanData> deferredChildren = children(deferred);
    assertThat(deferredChildren).hasSize(7);
    for (int i = 0; i < 7; i++) {
      SpanData l = liveChildren.get(i);
      SpanData d = deferredChildren.get(i);
      assertThat(d.getName()).isEqualTo(l.getName());
      assertThat(d.getKind()).isEqualTo(l.getKind());
      assertThat(d.getStartEpochNanos()).isEqualTo(l.getStartEpochNanos());
      assertThat(d.getEndEpochNanos()).isEqualTo(l.getEndEpochNanos());
      assertThat(d.getAttributes()).isEqualTo(l.getAttributes());
      assertThat(d.getStatus()).isEqualTo(l.getStatus());
      assertThat(d.getEvents()).hasSameSizeAs(l.getEvents());
      for (int e = 0; e < l.getEvents().size(); e++) {
        EventData le = l.getEvents().get(e);
        EventData de = d.getEvents().get(e);
        assertThat(de.getName()).isEqualTo(le.getName());
        assertThat(de.getEpochNanos()).isEqualTo(le.getEpochNanos());
        assertThat(de.getAttributes()).isEqualTo(le.getAttributes());
      }
      assertThat(d.getTraceId()).isEqualTo(root(deferred).getTraceId());
      assertThat(d.getSpanContext().isSampled()).isTrue();
      // The id a phase handed out while running is the id it is exported with.
      assertThat(d.getSpanId())
          .isEqualTo(ctx.phaseSpan(Phase.all()[i]).getSpanContext().getSpanId());
    }
    SpanData generation = deferredChildren.get(Phase.GENERATION.ordinal());
    assertThat(generation.getName()).isEqualTo("inference.generate");
    assertThat(generation.getSpanId()).isEqualTo(traceparentSpanId);
    assertThat(generation.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    // The write phase was open when the request finished: it ends with the root.
    assertThat(deferredChildren.get(Phase.WRITE.ordinal()).getEndEpochNanos())
        .isEqualTo(root(deferred).getEndEpochNanos());
    assertThat(root(deferred).getAttributes()).isEqualTo(root(live).getAttributes());
    // The decision was asked once, with the root's own duration as the SDK measures it.
    SpanData r = root(deferred);
    assertThat(decision.asked)
        .containsExactly(
            "true " + (r.getEndEpochNanos() - r.getStartEpochNanos()) + " " + r.getTraceId());
  }

  @Test
  void aRequestThatIsNotExportedBuildsNoPhaseSpanButKeepsItsIds() {
    Decision decision = new Decision();
    HandClock clock = new HandClock();
    RequestContext ctx = context(clock, decision);
    String traceparentSpanId = script(ctx, clock);

    // Only the root, on which the export decision is made, is an SDK span.
    assertThat(exporter.getFinishedSpanItems()).hasSize(1);
    assertThat(exporter.getFinishedSpanItems().get(0).getKind()).isEqualTo(SpanKind.SERVER);
    assertThat(decision.asked).hasSize(1);
    // Exemplars and the upstream traceparent still name valid spans of this trace.
    for (Phase p : Phase.all()) {
      SpanContext c = ctx.phaseSpan(p).getSpanContext();
      assertThat(c.isValid()).isTrue();
      assertThat(c.getTraceId()).isEqualTo(ctx.traceId());
      assertThat(c.getSpanId()).isNotEqualTo(ctx.spanId());
    }
    assertThat(ctx.phaseSpan(Phase.GENERATION).getSpanContext().getSpanId())
        .isEqualTo(traceparentSpanId);
    assertThat(ctx.phaseNanos(Phase.QUEUE)).isEqualTo(400_000);
    assertThat(ctx.phaseNanos(Phase.WRITE)).isEqualTo(60_000);
  }

  @Test
  void aRootThatRecordsNothingKeepsTheNoopSpans() {
    Decision decision = new Decision();
    decision.exported = true;
    HandClock clock = new HandClock();
    RequestContext ctx =
        new RequestContext(
            clock,
            io.opentelemetry.api.OpenTelemetry.noop().getTracer("off"),
            new RequestObserver[0],
            null,
            ApiRoute.CHAT,
            Context.root(),
            clock.now,
            decision);
    script(ctx, clock);
    assertThat(ctx.phaseSpan(Phase.QUEUE)).isNotInstanceOf(DeferredSpan.class);
    assertThat(decision.asked).isEmpty();
  }

  @Test
  void attributesAndEventsStopAtTheSdksDefaultLimitsAndNothingChangesAfterTheEnd() {
    HandClock clock = new HandClock();
    Span root = tracer.spanBuilder("root").startSpan();
    DeferredSpan span =
        new DeferredSpan(
            clock, root, "phase", SpanKind.INTERNAL, clock.toEpochNanos(clock.now), null, null);
    for (int i = 0; i < DeferredSpan.MAX_ATTRIBUTES + 10; i++) {
      span.setAttribute("a" + i, (long) i);
    }
    for (int i = 0; i < DeferredSpan.MAX_EVENTS + 10; i++) {
      span.addEvent("e" + i);
    }
    span.setAttribute("a0", 42L);
    clock.advance(10);
    span.end(clock.toEpochNanos(clock.now), TimeUnit.NANOSECONDS);
    span.setAttribute("late", "ignored");
    span.addEvent("late");
    span.updateName("renamed");
    span.end(clock.toEpochNanos(clock.now + 99_999), TimeUnit.NANOSECONDS);
    assertThat(span.isRecording()).isFalse();

    // Replayed into an SDK that allows far more, so that what is kept is DeferredSpan's doing.
    InMemorySpanExporter roomy = InMemorySpanExporter.create();
    SdkTracerProvider generous =
        SdkTracerProvider.builder()
            .setIdGenerator(new PresetIdGenerator())
            .setSpanLimits(
                io.opentelemetry.sdk.trace.SpanLimits.builder()
                    .setMaxNumberOfAttributes(10_000)
                    .setMaxNumberOfEvents(10_000)
                    .build())
            .addSpanProcessor(SimpleSpanProcessor.create(roomy))
            .build();
    span.materialize(generous.get("roomy"), Context.root().with(root), new Decision(), 0);
    root.end();
    SpanData d =
        roomy.getFinishedSpanItems().stream()
            .filter(s -> s.getName().equals("phase"))
            .findFirst()
            .orElseThrow();
    assertThat(d.getAttributes().size()).isEqualTo(DeferredSpan.MAX_ATTRIBUTES);
    assertThat(d.getAttributes().get(AttributeKey.longKey("a0"))).isEqualTo(42L);
    assertThat(d.getAttributes().get(AttributeKey.stringKey("late"))).isNull();
    assertThat(d.getEvents()).hasSize(DeferredSpan.MAX_EVENTS);
    assertThat(d.getEndEpochNanos() - d.getStartEpochNanos()).isEqualTo(10_000);
    assertThat(d.getSpanId()).isEqualTo(span.getSpanContext().getSpanId());
    assertThat(d.getParentSpanId()).isEqualTo(root.getSpanContext().getSpanId());
    generous.close();
  }

  @Test
  void aDeferralThatFailsCostsThePhaseSpansNeverTheRequest() {
    SpanDeferral broken =
        new SpanDeferral() {
          @Override
          public boolean exports(boolean failed, long rootNanos, String traceId) {
            throw new IllegalStateException("broken deferral");
          }

          @Override
          public Span start(SpanBuilder builder, String spanId) {
            throw new IllegalStateException("unreachable");
          }
        };
    HandClock clock = new HandClock();
    RequestContext ctx = context(clock, broken);
    script(ctx, clock);
    assertThat(ctx.isFinished()).isTrue();
    assertThat(ctx.rootNanos()).isPositive();
    // The root still ended, and alone.
    assertThat(exporter.getFinishedSpanItems()).hasSize(1);
    assertThat(exporter.getFinishedSpanItems().get(0).getKind()).isEqualTo(SpanKind.SERVER);
  }
}
