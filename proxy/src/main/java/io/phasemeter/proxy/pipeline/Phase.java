package io.phasemeter.proxy.pipeline;

import io.opentelemetry.api.trace.SpanKind;
import io.phasemeter.core.Phases;

/**
 * The steps of the pipeline, in the order a request passes them (docs/design.md §2), each with its
 * child span; names and meanings come from the {@link Phases} catalogue.
 */
public enum Phase {
  AUTH(Phases.AUTH, "auth.check", SpanKind.INTERNAL),
  RECEIVE(Phases.RECEIVE, "request.receive", SpanKind.INTERNAL),
  PREPARE(Phases.PREPARE, "request.prepare", SpanKind.INTERNAL),
  ROUTE(Phases.ROUTE, "route.select", SpanKind.INTERNAL),
  QUEUE(Phases.QUEUE, "inference.acquire_slot", SpanKind.INTERNAL),
  GENERATION(Phases.GENERATION, "inference.generate", SpanKind.CLIENT),
  WRITE(Phases.WRITE, "response.write", SpanKind.INTERNAL);

  private static final Phase[] VALUES = values();

  private final Phases entry;
  private final String spanName;
  private final SpanKind kind;

  Phase(Phases entry, String spanName, SpanKind kind) {
    if (entry.source() != Phases.Source.PIPELINE) {
      throw new IllegalArgumentException(entry + " is not a pipeline phase");
    }
    this.entry = entry;
    this.spanName = spanName;
    this.kind = kind;
  }

  /** The {@code llm.phase} value, also the key in records and {@code Server-Timing}. */
  public String label() {
    return entry.key();
  }

  /** The phase's entry in the catalogue. */
  public Phases entry() {
    return entry;
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
