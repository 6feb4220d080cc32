package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanId;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A phase span kept as plain fields until its request's root ends (see {@link SpanDeferral}): a
 * name, a kind, two timestamps, a random id, the attributes in two small arrays, and the rare
 * events and status. {@link #materialize} replays it into an SDK span with the same id and
 * timestamps when the request is exported; otherwise it is dropped with the request, having cost
 * one object and two arrays instead of the SDK's span, its attribute map, its context and its id
 * strings. Its {@link SpanContext} (for the upstream {@code traceparent} and exemplars) is built
 * only when asked for.
 *
 * <p>Confined to its request's event loop, like {@link RequestContext}. Limits match the SDK's
 * defaults: at most {@value #MAX_ATTRIBUTES} attributes and {@value #MAX_EVENTS} events, the rest
 * dropped.
 */
final class DeferredSpan implements Span {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(DeferredSpan.class);
  private static final java.util.concurrent.atomic.AtomicBoolean ID_MISMATCH_LOGGED =
      new java.util.concurrent.atomic.AtomicBoolean();
  static final int MAX_ATTRIBUTES = 128;
  static final int MAX_EVENTS = 128;

  private record Event(String name, Attributes attributes, long epochNanos) {}

  private final NanoClock clock;
  private final Span parent;
  private final SpanKind kind;
  private final long startEpochNanos;
  private final long id;
  private String name;
  // The first attribute, llm.phase, of every phase span: kept without arrays.
  private final AttributeKey<String> firstKey;
  private final String firstValue;
  private AttributeKey<?>[] keys;
  private Object[] values;
  private int attributeCount;
  private List<Event> events;
  private StatusCode status = StatusCode.UNSET;
  private String statusDescription;
  private long endEpochNanos = -1;
  private SpanContext context;

  /**
   * @param firstKey an attribute every span of this kind has (the phase's {@code llm.phase}), kept
   *     in a field so that a span with no other attribute allocates no array; null for none
   */
  DeferredSpan(
      NanoClock clock,
      Span parent,
      String name,
      SpanKind kind,
      long startEpochNanos,
      AttributeKey<String> firstKey,
      String firstValue) {
    this.firstKey = firstKey;
    this.firstValue = firstValue;
    this.clock = clock;
    this.parent = parent;
    this.name = name;
    this.kind = kind;
    this.startEpochNanos = startEpochNanos;
    long random;
    do {
      random = ThreadLocalRandom.current().nextLong();
    } while (random == 0);
    this.id = random;
  }

  @Override
  public <T> Span setAttribute(AttributeKey<T> key, T value) {
    if (key == null || key.getKey().isEmpty() || value == null || isEnded()) {
      return this;
    }
    // A value for the first key overrides it, as a later put does in the SDK.
    for (int i = 0; i < attributeCount; i++) {
      if (keys[i].equals(key)) {
        values[i] = value;
        return this;
      }
    }
    if (attributeCount + (firstKey == null ? 0 : 1) >= MAX_ATTRIBUTES && !key.equals(firstKey)) {
      return this;
    }
    if (keys == null) {
      keys = new AttributeKey<?>[4];
      values = new Object[4];
    } else if (attributeCount == keys.length) {
      int n = Math.min(MAX_ATTRIBUTES, keys.length * 2);
      keys = java.util.Arrays.copyOf(keys, n);
      values = java.util.Arrays.copyOf(values, n);
    }
    keys[attributeCount] = key;
    values[attributeCount] = value;
    attributeCount++;
    return this;
  }

  @Override
  public Span addEvent(String name, Attributes attributes) {
    return addEvent(name, attributes, clock.toEpochNanos(clock.nanoTime()), TimeUnit.NANOSECONDS);
  }

  @Override
  public Span addEvent(String name, Attributes attributes, long timestamp, TimeUnit unit) {
    if (name == null || unit == null || isEnded()) {
      return this;
    }
    if (events == null) {
      events = new ArrayList<>(2);
    }
    if (events.size() < MAX_EVENTS) {
      events.add(
          new Event(
              name, attributes == null ? Attributes.empty() : attributes, unit.toNanos(timestamp)));
    }
    return this;
  }

  @Override
  public Span setStatus(StatusCode statusCode, String description) {
    // As the SDK: OK is final, and an UNSET never overwrites.
    if (statusCode == null
        || isEnded()
        || status == StatusCode.OK
        || statusCode == StatusCode.UNSET) {
      return this;
    }
    status = statusCode;
    statusDescription = description;
    return this;
  }

  @Override
  public Span recordException(Throwable exception, Attributes additionalAttributes) {
    if (exception == null) {
      return this;
    }
    // Type and message only: no stack trace is kept for a span that may never be exported.
    var b = Attributes.builder().put("exception.type", exception.getClass().getCanonicalName());
    if (exception.getMessage() != null) {
      b.put("exception.message", exception.getMessage());
    }
    if (additionalAttributes != null) {
      b.putAll(additionalAttributes);
    }
    return addEvent("exception", b.build());
  }

  @Override
  public Span updateName(String name) {
    if (name != null && !isEnded()) {
      this.name = name;
    }
    return this;
  }

  @Override
  public void end() {
    end(clock.toEpochNanos(clock.nanoTime()), TimeUnit.NANOSECONDS);
  }

  @Override
  public void end(long timestamp, TimeUnit unit) {
    if (isEnded()) {
      return;
    }
    // As the SDK: a zero timestamp (or no unit) means now.
    long at =
        timestamp == 0 || unit == null
            ? clock.toEpochNanos(clock.nanoTime())
            : unit.toNanos(timestamp);
    endEpochNanos = Math.max(startEpochNanos, at);
  }

  private boolean isEnded() {
    return endEpochNanos >= 0;
  }

  @Override
  public SpanContext getSpanContext() {
    SpanContext c = context;
    if (c == null) {
      SpanContext p = parent.getSpanContext();
      c =
          p.isValid()
              ? SpanContext.create(
                  p.getTraceId(), SpanId.fromLong(id), p.getTraceFlags(), p.getTraceState())
              : SpanContext.getInvalid();
      context = c;
    }
    return c;
  }

  @Override
  public boolean isRecording() {
    return !isEnded();
  }

  /**
   * Replays this span, ended, into an SDK span of {@code tracer} under {@code parentContext}, with
   * this span's id (through {@code deferral}), timestamps, attributes, events and status. An open
   * span is ended at {@code at} (epoch nanoseconds) first.
   */
  @SuppressWarnings("unchecked")
  void materialize(Tracer tracer, Context parentContext, SpanDeferral deferral, long at) {
    end(at, TimeUnit.NANOSECONDS);
    SpanBuilder b =
        tracer
            .spanBuilder(name)
            .setParent(parentContext)
            .setSpanKind(kind)
            .setStartTimestamp(startEpochNanos, TimeUnit.NANOSECONDS);
    if (firstKey != null) {
      b.setAttribute(firstKey, firstValue);
    }
    for (int i = 0; i < attributeCount; i++) {
      b.setAttribute((AttributeKey<Object>) keys[i], values[i]);
    }
    String spanId = getSpanContext().getSpanId();
    Span span = deferral.start(b, spanId);
    if (!span.getSpanContext().getSpanId().equals(spanId)
        && ID_MISMATCH_LOGGED.compareAndSet(false, true)) {
      // The traceparent sent upstream and the exemplars carry spanId: they name nothing now.
      LOG.warn(
          "the OpenTelemetry SDK given with a span deferral did not keep the span id it was handed"
              + " (its IdGenerator must honour SpanDeferral.start, as PresetIdGenerator does):"
              + " exported phase spans will not match traceparent or exemplars");
    }
    if (events != null) {
      for (Event e : events) {
        span.addEvent(e.name(), e.attributes(), e.epochNanos(), TimeUnit.NANOSECONDS);
      }
    }
    if (status != StatusCode.UNSET) {
      span.setStatus(status, statusDescription);
    }
    span.end(endEpochNanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public String toString() {
    return "DeferredSpan{" + name + ", " + getSpanContext().getSpanId() + "}";
  }
}
