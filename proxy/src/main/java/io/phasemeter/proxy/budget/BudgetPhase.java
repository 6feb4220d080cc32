package io.phasemeter.proxy.budget;

import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * The phase keys a budget may limit ({@code limits_ms} in budgets.yaml), and where each one is
 * observed. Server-side phases have a Prometheus histogram on the proxy's admin port and get an
 * alert rule; client-only phases exist only after the load client joins its own observation with
 * the proxy's record, so only the load client can judge them.
 */
public enum BudgetPhase {
  GATEWAY("gateway", PhaseMetric.PHASE, "gateway", Owner.GATEWAY),
  RECEIVE("receive", PhaseMetric.PHASE, "receive", Owner.CLIENT_UPLOAD),
  QUEUE("queue", PhaseMetric.PHASE, "queue", Owner.CAPACITY),
  GENERATION("generation", PhaseMetric.PHASE, "generation", Owner.MODEL),
  // Inside generation, from the engine's own span (telemetry.engine_spans).
  ENGINE_QUEUE("engine_queue", PhaseMetric.PHASE, "engine_queue", Owner.ENGINE_CAPACITY),
  PREFILL("prefill", PhaseMetric.PHASE, "prefill", Owner.MODEL),
  DECODE("decode", PhaseMetric.PHASE, "decode", Owner.MODEL),
  WRITE("write", PhaseMetric.PHASE, "write", Owner.GATEWAY),
  UNATTRIBUTED("unattributed", PhaseMetric.PHASE, "unattributed", Owner.GATEWAY),
  TTFT("ttft", PhaseMetric.TTFT, null, Owner.MODEL),
  SERVER_TTFT("server_ttft", PhaseMetric.TTFT, null, Owner.MODEL),
  TOTAL("total", PhaseMetric.REQUEST, null, Owner.MODEL),
  SERVER_ROOT("server_root", PhaseMetric.REQUEST, null, Owner.MODEL),
  TPOT("tpot", PhaseMetric.TPOT, null, Owner.MODEL),
  ITL("itl", PhaseMetric.ITL, null, Owner.MODEL),
  NETWORK_ENVELOPE("network_envelope", null, null, Owner.NETWORK),
  TTFT_ENVELOPE("ttft_envelope", null, null, Owner.NETWORK),
  CLIENT_TOTAL("client_total", null, null, Owner.END_TO_END),
  CLIENT_TTFT("client_ttft", null, null, Owner.END_TO_END),
  TRANSPORT_SETUP("transport_setup", null, null, Owner.NETWORK),
  SCHEDULE_LAG("schedule_lag", null, null, Owner.LOAD_CLIENT);

  /** The histograms the proxy exports for server-side phases (DESIGN.md §4). */
  private enum PhaseMetric {
    PHASE("llm_phase_duration_seconds"),
    TTFT("gen_ai_server_time_to_first_token_seconds"),
    REQUEST("gen_ai_server_request_duration_seconds"),
    TPOT("gen_ai_server_time_per_output_token_seconds"),
    ITL("llm_inter_token_latency_seconds");

    private final String name;

    PhaseMetric(String name) {
      this.name = name;
    }
  }

  /** Who to page; the words appear in alert labels and annotations. */
  private static final class Owner {
    static final String GATEWAY = "gateway";
    // DESIGN.md §2: receive is the client's upload, network-bound, not the gateway's work.
    static final String CLIENT_UPLOAD = "network (client upload)";
    static final String CAPACITY = "inference-pool capacity";
    static final String MODEL = "inference pool / model server";
    // The proxy admitted more than the engine runs at once: the engine's scheduler queue.
    static final String ENGINE_CAPACITY = "model server capacity (its own scheduler queue)";
    static final String NETWORK = "network";
    static final String END_TO_END = "end to end (see the phase breakdown)";
    static final String LOAD_CLIENT = "load client (it could not keep its schedule)";

    private Owner() {}
  }

  private final String key;
  private final PhaseMetric metric;
  private final String phaseLabel;
  private final String owner;

  BudgetPhase(String key, PhaseMetric metric, String phaseLabel, String owner) {
    this.key = key;
    this.metric = metric;
    this.phaseLabel = phaseLabel;
    this.owner = owner;
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
    return metric.name;
  }

  /**
   * The label matchers that select this phase's series of {@link #metric()}, in PromQL syntax
   * without braces (e.g. {@code llm_phase="queue"}); empty when the whole metric is the phase.
   *
   * @throws IllegalStateException for a client-only phase
   */
  public String matcher() {
    requireServerSide();
    if (phaseLabel != null) {
      return "llm_phase=\"" + phaseLabel + "\"";
    }
    // Latency budgets are over successful requests (DESIGN.md §2); the error rate is its own gate.
    return metric == PhaseMetric.REQUEST ? "outcome=\"success\"" : "";
  }

  /** Who owns this phase when it breaks its budget. */
  public String owner() {
    return owner;
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
