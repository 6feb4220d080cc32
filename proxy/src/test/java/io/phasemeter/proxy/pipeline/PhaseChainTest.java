package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.phasemeter.core.NanoClock;
import io.phasemeter.core.SpanAttributes;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.http.HttpVersion;
import java.lang.reflect.Proxy;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The chain times every phase, exactly once, where the phase ended: on success when its future
 * completes (generation where it marked), on failure as the phase's kind says, on cancellation as
 * on any failure; and the outcome comes from one {@link Verdict}.
 */
class PhaseChainTest {
  private static final class HandClock implements NanoClock {
    long now = 1_000_000;

    @Override
    public long nanoTime() {
      return now;
    }

    @Override
    public long toEpochNanos(long nanoTime) {
      return nanoTime;
    }

    void advance(long micros) {
      now += micros * 1_000;
    }
  }

  private final HandClock clock = new HandClock();
  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private final SdkTracerProvider provider =
      SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build();
  private boolean responseClosed;
  private boolean headWritten;

  @AfterEach
  void close() {
    provider.close();
  }

  private RequestContext context() {
    HttpServerResponse response =
        (HttpServerResponse)
            Proxy.newProxyInstance(
                getClass().getClassLoader(),
                new Class<?>[] {HttpServerResponse.class},
                (self, method, args) ->
                    switch (method.getName()) {
                      case "closed" -> responseClosed;
                      case "headWritten" -> headWritten;
                      default -> throw new UnsupportedOperationException(method.getName());
                    });
    HttpServerRequest request =
        (HttpServerRequest)
            Proxy.newProxyInstance(
                getClass().getClassLoader(),
                new Class<?>[] {HttpServerRequest.class},
                (self, method, args) ->
                    switch (method.getName()) {
                      case "response" -> response;
                      // The root span's network.protocol.version and tls.protocol.version.
                      case "version" -> HttpVersion.HTTP_1_1;
                      case "isSSL" -> false;
                      default -> throw new UnsupportedOperationException(method.getName());
                    });
    return new RequestContext(
        clock,
        provider.get("test"),
        new RequestObserver[0],
        request,
        ApiRoute.CHAT,
        Context.root(),
        clock.now);
  }

  /** The one exported span of {@code phase} (fails when there are none or several). */
  private SpanData span(Phase phase) {
    List<SpanData> spans =
        exporter.getFinishedSpanItems().stream()
            .filter(s -> phase.label().equals(s.getAttributes().get(SpanAttributes.PHASE)))
            .toList();
    assertThat(spans).as(phase.label()).hasSize(1);
    return spans.get(0);
  }

  private static ProxyFailure failure(ProxyFailure.Kind kind) {
    return ProxyFailure.of(kind, "test");
  }

  /** What Pipeline.conclude does before it answers. */
  private static Verdict conclude(RequestContext ctx, Throwable failure) {
    Verdict v = Verdict.of(ctx, failure);
    ctx.concluded(v);
    if (failure != null) {
      PhaseChain.interrupted(ctx, v);
    }
    return v;
  }

  @Test
  void aPhaseThatSucceedsEndsWhenItsFutureCompletes() {
    RequestContext ctx = context();
    long start = clock.now;
    Future<Void> sync =
        PhaseChain.timed(ctx, Phase.AUTH, start, span -> PhaseChain.done(() -> clock.advance(7)));
    assertThat(sync.succeeded()).isTrue();
    Promise<Void> upload = Promise.promise();
    PhaseChain.timed(ctx, Phase.RECEIVE, span -> upload.future());
    clock.advance(30);
    assertThat(ctx.isOpen(Phase.RECEIVE)).isTrue();
    upload.complete();
    clock.advance(100);
    conclude(ctx, null);
    ctx.finish(clock.now);

    assertThat(ctx.phaseNanos(Phase.AUTH)).isEqualTo(7_000);
    assertThat(ctx.phaseNanos(Phase.RECEIVE)).isEqualTo(30_000);
    assertThat(span(Phase.AUTH).getEndEpochNanos()).isEqualTo(start + 7_000);
    assertThat(span(Phase.RECEIVE).getEndEpochNanos()).isEqualTo(start + 37_000);
    assertThat(ctx.outcome()).isEqualTo(Outcome.SUCCESS);
    assertThat(ctx.errorType()).isNull();
  }

  @Test
  void generationEndsWhereItMarkedItsEnd() {
    RequestContext ctx = context();
    Promise<Void> exchange = Promise.promise();
    long[] lastByte = new long[1];
    PhaseChain.timedToMark(
        ctx,
        Phase.GENERATION,
        timer -> {
          clock.advance(500);
          lastByte[0] = clock.now;
          timer.endAt(lastByte[0]);
          return exchange.future();
        });
    clock.advance(40);
    exchange.complete();
    ctx.finish(clock.now);

    assertThat(ctx.phaseNanos(Phase.GENERATION)).isEqualTo(500_000);
    assertThat(span(Phase.GENERATION).getEndEpochNanos()).isEqualTo(lastByte[0]);
  }

  @Test
  void anInterruptedPhaseIsMarkedByTheVerdictAndEndedOnce() {
    RequestContext ctx = context();
    Future<Void> f =
        PhaseChain.timed(
            ctx,
            Phase.PREPARE,
            span ->
                PhaseChain.done(
                    () -> {
                      clock.advance(12);
                      throw failure(ProxyFailure.Kind.INVALID_JSON);
                    }));
    assertThat(f.failed()).isTrue();
    assertThat(ctx.isOpen(Phase.PREPARE)).as("left for the verdict").isTrue();
    clock.advance(1);
    Verdict v = conclude(ctx, f.cause());
    clock.advance(50);
    ctx.finish(clock.now);

    assertThat(v.answer()).isEqualTo(Verdict.Answer.ERROR);
    assertThat(ctx.outcome()).isEqualTo(Outcome.CLIENT_ERROR);
    assertThat(ctx.errorType()).isEqualTo("invalid_json");
    SpanData prepare = span(Phase.PREPARE);
    assertThat(ctx.phaseNanos(Phase.PREPARE)).isEqualTo(13_000);
    assertThat(prepare.getAttributes().get(SpanAttributes.ERROR_TYPE)).isEqualTo("invalid_json");
    // The client's error: no error status.
    assertThat(prepare.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
  }

  @Test
  void aServerSideFailureMarksTheInterruptedPhaseAsAnError() {
    RequestContext ctx = context();
    Future<UpstreamPoolStub> f =
        PhaseChain.timed(
            ctx,
            Phase.ROUTE,
            span -> {
              throw failure(ProxyFailure.Kind.NO_HEALTHY_UPSTREAM);
            });
    conclude(ctx, f.cause());
    ctx.finish(clock.now);

    assertThat(ctx.outcome()).isEqualTo(Outcome.UPSTREAM_ERROR);
    assertThat(span(Phase.ROUTE).getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(span(Phase.ROUTE).getAttributes().get(SpanAttributes.ERROR_TYPE))
        .isEqualTo("no_healthy_upstream");
  }

  private record UpstreamPoolStub() {}

  @Test
  void aQueueRefusalEndsTheQueueAsItFailsAndLeavesItUnmarked() {
    RequestContext ctx = context();
    Promise<Void> ticket = Promise.promise();
    PhaseChain.timed(ctx, Phase.QUEUE, span -> ticket.future());
    clock.advance(400);
    ticket.fail(failure(ProxyFailure.Kind.QUEUE_TIMEOUT));
    assertThat(ctx.isOpen(Phase.QUEUE)).isFalse();
    clock.advance(3);
    conclude(ctx, ticket.future().cause());
    ctx.finish(clock.now);

    assertThat(ctx.phaseNanos(Phase.QUEUE)).isEqualTo(400_000);
    assertThat(span(Phase.QUEUE).getAttributes().get(SpanAttributes.ERROR_TYPE)).isNull();
    assertThat(ctx.outcome()).isEqualTo(Outcome.TIMEOUT);
    assertThat(ctx.errorType()).isEqualTo("queue_timeout");
  }

  @Test
  void anUnexpectedExceptionInterruptsAnyPhase() {
    RequestContext ctx = context();
    Future<Void> f =
        PhaseChain.timed(
            ctx,
            Phase.QUEUE,
            span -> {
              throw new IllegalStateException("bug");
            });
    assertThat(ctx.isOpen(Phase.QUEUE)).isTrue();
    conclude(ctx, f.cause());
    ctx.finish(clock.now);

    assertThat(ctx.errorType()).isEqualTo("internal_error");
    assertThat(span(Phase.QUEUE).getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
  }

  @Test
  void aCancelledPhaseEndsOnceAsACancellation() {
    RequestContext ctx = context();
    Promise<Void> upload = Promise.promise();
    PhaseChain.timed(
        ctx,
        Phase.RECEIVE,
        span -> {
          ctx.onCancel(() -> upload.tryFail(failure(ProxyFailure.Kind.CLIENT_CANCELLED)));
          return upload.future();
        });
    clock.advance(20);
    ctx.cancel();
    Verdict v = conclude(ctx, upload.future().cause());
    clock.advance(5);
    ctx.finish(clock.now);

    assertThat(v.answer()).isEqualTo(Verdict.Answer.NONE);
    assertThat(ctx.outcome()).isEqualTo(Outcome.CANCELLED);
    assertThat(ctx.phaseNanos(Phase.RECEIVE)).isEqualTo(20_000);
    SpanData receive = span(Phase.RECEIVE);
    assertThat(receive.getAttributes().get(SpanAttributes.ERROR_TYPE))
        .isEqualTo("client_cancelled");
    assertThat(receive.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
  }

  @Test
  void generationCancelledEndsAsItFails() {
    RequestContext ctx = context();
    ctx.cancelledAtShutdown();
    Promise<Void> exchange = Promise.promise();
    PhaseChain.timedToMark(ctx, Phase.GENERATION, timer -> exchange.future());
    clock.advance(70);
    exchange.fail(failure(ProxyFailure.Kind.SHUTTING_DOWN));
    clock.advance(9);
    ctx.cancel();
    conclude(ctx, exchange.future().cause());
    ctx.finish(clock.now);

    assertThat(ctx.phaseNanos(Phase.GENERATION)).isEqualTo(70_000);
    assertThat(ctx.outcome()).isEqualTo(Outcome.CANCELLED);
    assertThat(ctx.errorType()).isEqualTo("shutting_down");
  }

  @Test
  void theErrorAnswerIsTimedAsWriteOnce() {
    RequestContext ctx = context();
    Promise<Void> written = Promise.promise();
    PhaseChain.answer(ctx, written::future);
    assertThat(ctx.isOpen(Phase.WRITE)).isTrue();
    clock.advance(60);
    written.complete();
    clock.advance(1);
    ctx.finish(clock.now);

    assertThat(ctx.phaseNanos(Phase.WRITE)).isEqualTo(60_000);
    span(Phase.WRITE);
  }

  @Test
  void theVerdictOnARequestThatRanToItsEnd() {
    RequestContext passed = context();
    passed.passedThrough(404, "application/json", null);
    assertThat(Verdict.of(passed, null))
        .extracting(Verdict::outcome, Verdict::errorType)
        .containsExactly(Outcome.CLIENT_ERROR, "upstream_404");

    RequestContext reported = context();
    reported.upstreamReportedError("EngineDeadError");
    assertThat(Verdict.of(reported, null))
        .extracting(Verdict::outcome, Verdict::errorType)
        .containsExactly(Outcome.UPSTREAM_ERROR, "upstream_error");

    // A failure wins over what the upstream answered: the client that left is a cancellation.
    assertThat(Verdict.of(reported, failure(ProxyFailure.Kind.CLIENT_CANCELLED)).outcome())
        .isEqualTo(Outcome.CANCELLED);
  }

  @Test
  void aClientThatStoppedReadingIsClosedAndCancelled() {
    RequestContext ctx = context();
    Verdict v = Verdict.of(ctx, failure(ProxyFailure.Kind.CLIENT_STALLED));
    assertThat(v.answer()).isEqualTo(Verdict.Answer.CLOSE);
    assertThat(v.outcome()).isEqualTo(Outcome.CANCELLED);
    assertThat(v.errorType()).isEqualTo("client_stalled");

    responseClosed = true;
    Verdict closed = Verdict.of(ctx, failure(ProxyFailure.Kind.CLIENT_STALLED));
    assertThat(closed.answer()).isEqualTo(Verdict.Answer.NONE);
    assertThat(closed.errorType()).isEqualTo("client_cancelled");
  }

  @Test
  void theOutcomeIsDecidedOnce() {
    RequestContext ctx = context();
    ctx.concluded(Verdict.of(ctx, failure(ProxyFailure.Kind.QUEUE_FULL)));
    ctx.concluded(Verdict.of(ctx, null));
    ctx.finish(clock.now);
    assertThat(ctx.outcome()).isEqualTo(Outcome.REJECTED);
    assertThat(ctx.errorType()).isEqualTo("queue_full");
  }
}
