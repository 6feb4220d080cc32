package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.SpanKind;

/** The phases of one request, in pipeline order (DESIGN.md §2). Names are a stable contract. */
public enum Phase {
  AUTH("auth", "auth.check", SpanKind.INTERNAL),
  RECEIVE("receive", "request.receive", SpanKind.INTERNAL),
  PREPARE("prepare", "request.prepare", SpanKind.INTERNAL),
  ROUTE("route", "route.select", SpanKind.INTERNAL),
  QUEUE("queue", "inference.acquire_slot", SpanKind.INTERNAL),
  GENERATION("generation", "inference.generate", SpanKind.CLIENT),
  WRITE("write", "response.write", SpanKind.INTERNAL);

  private static final Phase[] VALUES = values();

  private final String label;
  private final String spanName;
  private final SpanKind kind;

  Phase(String label, String spanName, SpanKind kind) {
    this.label = label;
    this.spanName = spanName;
    this.kind = kind;
  }

  /** The {@code llm.phase} value, also the key in records and {@code Server-Timing}. */
  public String label() {
    return label;
  }

  /** The child span's name. */
  public String spanName() {
    return spanName;
  }

  /** The child span's kind. */
  public SpanKind kind() {
    return kind;
  }

  /** All phases in order, without copying: for the per-request paths; callers must not modify. */
  public static Phase[] all() {
    return VALUES;
  }
}
