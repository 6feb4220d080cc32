package io.phasemeter.proxy.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.SpanContext;
import io.phasemeter.proxy.config.ProxyConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Matching by trace id with a hand-driven ticker: no sleeps, no timing thresholds. */
class EngineSpansTest {
  private final long[] now = {1_000};
  private final Map<String, EngineTimings> published = new LinkedHashMap<>();
  private final List<String> observed = new ArrayList<>();

  private EngineSpans engine(int maxPending) {
    return new EngineSpans(
        new ProxyConfig.EngineSpans(true, Duration.ofSeconds(2), maxPending),
        () -> now[0],
        List.of((r, t) -> observed.add(r.traceId() + "=" + (t == null ? "missing" : "matched"))));
  }

  private void hold(EngineSpans e, String traceId) {
    e.hold(
        new EngineSpans.Request(traceId, "m", "p", SpanContext.getInvalid()),
        t -> published.put(traceId, t));
  }

  private static EngineTimings timings(long queue) {
    return new EngineTimings(queue, 2, 3, queue + 2, queue + 5);
  }

  @Test
  void aSpanAfterItsRecordReleasesTheRecordAtOnce() {
    EngineSpans e = engine(10);
    hold(e, "a");
    assertThat(published).isEmpty();
    e.onEngineSpan("a", timings(7));
    assertThat(published).containsEntry("a", timings(7));
    assertThat(observed).containsExactly("a=matched");
    assertThat(e.stats().matched()).isEqualTo(1);
    assertThat(e.stats().heldRecords()).isZero();
  }

  @Test
  void aSpanBeforeItsRecordWaitsForIt() {
    EngineSpans e = engine(10);
    e.onEngineSpan("a", timings(7));
    assertThat(e.stats().heldTimings()).isEqualTo(1);
    hold(e, "a");
    assertThat(published).containsEntry("a", timings(7));
    assertThat(e.stats().heldTimings()).isZero();
    assertThat(e.stats().coverage()).isEqualTo(1.0);
  }

  @Test
  void aRecordWithoutSpanIsPublishedAsMissingOnceTheWaitIsOver() {
    EngineSpans e = engine(10);
    hold(e, "a");
    now[0] += Duration.ofMillis(1_999).toNanos();
    e.expire();
    assertThat(published).isEmpty();
    now[0] += Duration.ofMillis(1).toNanos();
    e.expire();
    assertThat(published).containsOnlyKeys("a");
    assertThat(published.get("a")).isNull();
    assertThat(observed).containsExactly("a=missing");
    // A span that comes too late is held for a record that never comes, then dropped.
    e.onEngineSpan("a", timings(7));
    now[0] += Duration.ofSeconds(2).toNanos();
    e.expire();
    EngineSpans.Stats s = e.stats();
    assertThat(s.missing()).isEqualTo(1);
    assertThat(s.matched()).isZero();
    assertThat(s.unmatched()).isEqualTo(1);
    assertThat(s.coverage()).isEqualTo(0.0);
    assertThat(s.heldRecords() + s.heldTimings()).isZero();
  }

  @Test
  void atTheBoundTheOldestHeldRecordIsPublishedAsMissingAndCounted() {
    EngineSpans e = engine(3);
    for (String id : List.of("a", "b", "c", "d", "e")) {
      hold(e, id);
      now[0]++;
    }
    assertThat(published).containsOnlyKeys("a", "b");
    assertThat(published.values()).containsOnlyNulls();
    EngineSpans.Stats s = e.stats();
    assertThat(s.evictedRecords()).isEqualTo(2);
    assertThat(s.missing()).isEqualTo(2);
    assertThat(s.heldRecords()).isEqualTo(3);
    // The newest ones still match.
    e.onEngineSpan("e", timings(1));
    assertThat(published).containsEntry("e", timings(1));
  }

  @Test
  void atTheBoundTheOldestHeldSpanIsDroppedAndCounted() {
    EngineSpans e = engine(2);
    e.onEngineSpan("a", timings(1));
    e.onEngineSpan("b", timings(2));
    e.onEngineSpan("c", timings(3));
    EngineSpans.Stats s = e.stats();
    assertThat(s.evictedTimings()).isEqualTo(1);
    assertThat(s.unmatched()).isEqualTo(1);
    assertThat(s.heldTimings()).isEqualTo(2);
    hold(e, "a");
    hold(e, "c");
    assertThat(published).containsOnlyKeys("c").containsEntry("c", timings(3));
    assertThat(e.stats().heldRecords()).as("a waits: its span was dropped").isEqualTo(1);
  }

  @Test
  void flushPublishesEveryHeldRecordAsMissing() {
    EngineSpans e = engine(10);
    hold(e, "a");
    hold(e, "b");
    e.flush();
    assertThat(published).containsOnlyKeys("a", "b");
    assertThat(e.stats().missing()).isEqualTo(2);
  }
}
