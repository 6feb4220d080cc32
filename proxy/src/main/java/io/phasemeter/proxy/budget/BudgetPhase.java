package io.phasemeter.proxy.budget;

import io.phasemeter.core.Phases;
import io.phasemeter.proxy.telemetry.BucketLayout.Metric;
import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * The phase keys a budget may limit ({@code limits_ms} in budgets.yaml): every phase of the {@link
 * Phases} catalogue except the gateway's three parts, with the histogram that observes it.
 * Server-side phases have a Prometheus histogram on the proxy's admin port and get an alert rule;
 * client-only phases exist only after the load client joins its own observation with the proxy's
 * record, so only the load client can judge them.
 */
public enum BudgetPhase {
  GATEWAY(Phases.GATEWAY, Metric.PHASE),
  RECEIVE(Phases.RECEIVE, Metric.PHASE),
  QUEUE(Phases.QUEUE, Metric.PHASE),
  GENERATION(Phases.GENERATION, Metric.PHASE),
  // Inside generation, from the engine's own span (telemetry.engine_spans).
  ENGINE_QUEUE(Phases.ENGINE_QUEUE, Metric.PHASE),
  PREFILL(Phases.PREFILL, Metric.PHASE),
  DECODE(Phases.DECODE, Metric.PHASE),
  WRITE(Phases.WRITE, Metric.PHASE),
  UNATTRIBUTED(Phases.UNATTRIBUTED, Metric.PHASE),
  TTFT(Phases.TTFT, Metric.TTFT),
  SERVER_TTFT(Phases.SERVER_TTFT, Metric.TTFT),
  TOTAL(Phases.TOTAL, Metric.REQUEST),
  SERVER_ROOT(Phases.SERVER_ROOT, Metric.REQUEST),
  TPOT(Phases.TPOT, Metric.TPOT),
  ITL(Phases.ITL, Metric.ITL),
  NETWORK_ENVELOPE(Phases.NETWORK_ENVELOPE, null),
  TTFT_ENVELOPE(Phases.TTFT_ENVELOPE, null),
  CLIENT_TOTAL(Phases.CLIENT_TOTAL, null),
  CLIENT_TTFT(Phases.CLIENT_TTFT, null),
  TRANSPORT_SETUP(Phases.TRANSPORT_SETUP, null),
  DNS(Phases.DNS, null),
  CONNECT(Phases.CONNECT, null),
  TLS(Phases.TLS, null),
  SCHEDULE_LAG(Phases.SCHEDULE_LAG, null);

  private final Phases entry;
  private final String key;
  private final Metric metric;

  BudgetPhase(Phases entry, Metric metric) {
    this.entry = entry;
    this.key = entry.key();
    this.metric = metric;
  }

  /** The key as written in {@code limits_ms}. */
  public String key() {
    return key;
  }

  /** Whether the proxy exports a histogram for this phase, so Prometheus can alert on it. */
  public boolean serverSide() {
    return metric != null;
  }

  /**
   * The histogram's base name (append {@code _bucket}, {@code _sum}, {@code _count}).
   *
   * @throws IllegalStateException for a client-only phase
   */
  public String metric() {
    requireServerSide();
    return metric.promName();
  }

  /**
   * The histogram that observes this phase (docs/design.md §4).
   *
   * @throws IllegalStateException for a client-only phase
   */
  public Metric histogram() {
    requireServerSide();
    return metric;
  }

  /**
   * The label matchers that select this phase's series of {@link #metric()}, in PromQL syntax
   * without braces (e.g. {@code llm_phase="queue"}); empty when the whole metric is the phase.
   *
   * @throws IllegalStateException for a client-only phase
   */
  public String matcher() {
    requireServerSide();
    if (metric == Metric.PHASE) {
      return "llm_phase=\"" + key + "\"";
    }
    // Latency budgets are over successful requests (docs/design.md §2); the error rate is its own
    // gate.
    return metric == Metric.REQUEST ? "outcome=\"success\"" : "";
  }

  /** Who owns this phase when it breaks its budget. */
  public String owner() {
    return entry.owner();
  }

  /** The phase's entry in the catalogue. */
  public Phases entry() {
    return entry;
  }

  /** The phase for a {@code limits_ms} key, if there is one. */
  public static Optional<BudgetPhase> fromKey(String key) {
    return Arrays.stream(values()).filter(p -> p.key.equals(key)).findFirst();
  }

  /** Every allowed key, comma-separated, in declaration order (for error messages). */
  public static String knownKeys() {
    return Arrays.stream(values()).map(BudgetPhase::key).collect(Collectors.joining(", "));
  }

  /** The phase in CamelCase, for alert names ({@code server_ttft} becomes {@code ServerTtft}). */
  String camelCase() {
    return Budget.camelCase(key);
  }

  private void requireServerSide() {
    if (metric == null) {
      throw new IllegalStateException(
          key.toUpperCase(Locale.ROOT) + " is judged by the load client; the proxy has no metric");
    }
  }
}
