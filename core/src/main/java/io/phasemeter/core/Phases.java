package io.phasemeter.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.function.ToDoubleFunction;
import java.util.stream.Collectors;

/**
 * The one catalogue of what Phasemeter measures about a request (docs/design.md §2): every phase
 * and derived figure, its name, its place in reports, who to page when it breaks a budget, and what
 * it measures. The proxy's pipeline, its metrics, live stats and budgets, the load client's live
 * table, join, report and budget gates all take their names and lists from here; the names are a
 * contract with dashboards and users.
 *
 * <p>Declaration order is report order. The three parts of {@link #GATEWAY} ({@link #AUTH}, {@link
 * #PREPARE}, {@link #ROUTE}) have their own spans and {@code llm_phase} series but are reported
 * only as their sum; {@link #TTFT} and {@link #TOTAL} are the budget file's older names for {@link
 * #SERVER_TTFT} and {@link #SERVER_ROOT}.
 */
public enum Phases {
  CLIENT_TOTAL(
      "client_total",
      Source.CLIENT,
      Owner.END_TO_END,
      "E2EL: intended start to the last byte read (client clock)"),
  CLIENT_TTFT(
      "client_ttft",
      Source.CLIENT,
      Owner.END_TO_END,
      "TTFT: intended start to the first content-bearing event parsed"),
  TRANSPORT_SETUP(
      "transport_setup",
      Source.CLIENT,
      Owner.NETWORK,
      "waiting for a pooled connection + dns + connect + tls"),
  DNS(
      "dns",
      Source.CLIENT,
      Owner.NETWORK,
      "inside transport_setup: resolving the host name (none for an IP literal)"),
  CONNECT(
      "connect",
      Source.CLIENT,
      Owner.NETWORK,
      "inside transport_setup: asking for the connection to TCP up (plain http: to the"
          + " connection ready, for h2c with the server's SETTINGS)"),
  TLS(
      "tls",
      Source.CLIENT,
      Owner.NETWORK,
      "inside transport_setup: TCP up to the connection ready: the handshake (h2: and the"
          + " server's SETTINGS; https only)"),
  NETWORK_ENVELOPE(
      "network_envelope",
      Source.JOINED,
      Owner.NETWORK,
      "client_total - server_root, per request, after the join"),
  TTFT_ENVELOPE(
      "ttft_envelope",
      Source.JOINED,
      Owner.NETWORK,
      "client_ttft - server_ttft, per request, after the join"),
  SERVER_ROOT(
      "server_root",
      Source.PROXY,
      Owner.MODEL,
      "the proxy's root span: headers parsed to the last byte handed over"),
  SERVER_TTFT(
      "server_ttft",
      Source.PROXY,
      Owner.MODEL,
      "proxy root start to the first content chunk written to the client"),
  GATEWAY("gateway", Source.PROXY, Owner.GATEWAY, "auth + prepare + route, in the proxy"),
  AUTH(
      "auth",
      Source.PIPELINE,
      Owner.GATEWAY,
      "the API key, the request-rate decision and the priority"),
  RECEIVE(
      "receive",
      Source.PIPELINE,
      Owner.CLIENT_UPLOAD,
      "reading the request body in the proxy (client upload)"),
  PREPARE(
      "prepare",
      Source.PIPELINE,
      Owner.GATEWAY,
      "parsing, checking and rewriting the body; the token-rate decision"),
  ROUTE(
      "route",
      Source.PIPELINE,
      Owner.GATEWAY,
      "the pool that serves the model, and one of its upstreams up"),
  QUEUE("queue", Source.PIPELINE, Owner.CAPACITY, "waiting for an inference slot in the proxy"),
  GENERATION(
      "generation",
      Source.PIPELINE,
      Owner.MODEL,
      "the upstream request: started to last upstream byte"),
  ENGINE_QUEUE(
      "engine_queue",
      Source.ENGINE,
      Owner.ENGINE_CAPACITY,
      "inside generation: waiting in the engine's own scheduler queue (vLLM's span)"),
  PREFILL(
      "prefill",
      Source.ENGINE,
      Owner.MODEL,
      "inside generation: the engine's prefill, scheduled to first token"),
  DECODE(
      "decode",
      Source.ENGINE,
      Owner.MODEL,
      "inside generation: the engine's decode, first to last token"),
  WRITE(
      "write", Source.PIPELINE, Owner.GATEWAY, "the response tail after the upstream's last byte"),
  UNATTRIBUTED(
      "unattributed", Source.PROXY, Owner.GATEWAY, "server_root minus the sum of its phases"),
  TPOT(
      "tpot",
      Source.STREAM,
      Owner.MODEL,
      "(t_last_token - t_first_token) / (n - 1), client side, vLLM's definition"),
  ITL("itl", Source.STREAM, Owner.MODEL, "each gap between content events, client side"),
  SCHEDULE_LAG(
      "schedule_lag",
      Source.CLIENT,
      Owner.LOAD_CLIENT,
      "actual start minus intended start, over every started request"),
  TTFT("ttft", Source.PROXY, Owner.MODEL, "the budget file's name for server_ttft"),
  TOTAL("total", Source.PROXY, Owner.MODEL, "the budget file's name for server_root");

  /** Where a figure is observed. */
  public enum Source {
    /** A step of the proxy's pipeline, with its own child span and {@code llm_phase} series. */
    PIPELINE,
    /** Derived by the proxy from its spans (sums, the root, token timing). */
    PROXY,
    /** From the engine's own span, inside generation ({@code telemetry.engine_spans}). */
    ENGINE,
    /** Timed on the token stream by each side on its own (reports show the client's). */
    STREAM,
    /** Observed only by the load client. */
    CLIENT,
    /** A per-request difference of the client's and the proxy's figures, after the join. */
    JOINED
  }

  /** Who to page; the words appear in alert labels and annotations and in BREACH lines. */
  private static final class Owner {
    static final String GATEWAY = "gateway";
    // receive is the client's upload: network-bound, not the gateway's work.
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

  private static final List<Phases> REPORTED;

  static {
    List<Phases> reported = new ArrayList<>();
    for (Phases p : values()) {
      if (p.reported()) {
        reported.add(p);
      }
    }
    REPORTED = Collections.unmodifiableList(reported);
  }

  private final String key;
  private final Source source;
  private final String owner;
  private final String meaning;

  Phases(String key, Source source, String owner, String meaning) {
    this.key = key;
    this.source = source;
    this.owner = owner;
    this.meaning = meaning;
  }

  /** The name: the {@code limits_ms} key, the report row, the record key where there is one. */
  public String key() {
    return key;
  }

  /** Where the figure is observed. */
  public Source source() {
    return source;
  }

  /** Who owns this phase when it breaks its budget. */
  public String owner() {
    return owner;
  }

  /** What it measures, in one line (report glossary, summary.json definitions). */
  public String meaning() {
    return meaning;
  }

  /**
   * The phase this one is another name for: itself unless it is {@link #TTFT} or {@link #TOTAL}.
   */
  public Phases canonical() {
    return switch (this) {
      case TTFT -> SERVER_TTFT;
      case TOTAL -> SERVER_ROOT;
      default -> this;
    };
  }

  /**
   * Whether reports, the live table and summary.json have a row for it: every phase except the
   * gateway's three parts (reported as {@link #GATEWAY}) and the two older names.
   */
  public boolean reported() {
    return this != AUTH && this != PREPARE && this != ROUTE && canonical() == this;
  }

  /**
   * The phases a sum is made of, for naming the part that broke its budget; empty for a phase that
   * is not a sum. TTFT sums count generation only up to the first token.
   */
  public List<Phases> parts() {
    return switch (canonical()) {
      case CLIENT_TOTAL -> List.of(NETWORK_ENVELOPE, GATEWAY, RECEIVE, QUEUE, GENERATION, WRITE);
      case SERVER_ROOT -> List.of(GATEWAY, RECEIVE, QUEUE, GENERATION, WRITE);
      case CLIENT_TTFT -> List.of(TTFT_ENVELOPE, GATEWAY, RECEIVE, QUEUE, GENERATION);
      case SERVER_TTFT -> List.of(GATEWAY, RECEIVE, QUEUE, GENERATION);
      default -> List.of();
    };
  }

  /** Whether this is a time-to-first-token figure (its generation part ends at the first token). */
  public boolean toFirstToken() {
    Phases c = canonical();
    return c == CLIENT_TTFT || c == SERVER_TTFT;
  }

  /**
   * A part's figure inside this sum, from each phase's figure ({@code ms}; NaN where not measured):
   * the part's own, except {@link #GENERATION} in a time-to-first-token sum, bounded by the sum
   * minus its other measured parts (generation is measured to the last byte, a TTFT counts it only
   * up to the first token). The one rule for naming a sum's part: the BREACH line and the search's
   * limiting phase both use it.
   */
  public double partMs(Phases part, ToDoubleFunction<Phases> ms) {
    double own = ms.applyAsDouble(part);
    if (part != GENERATION || !toFirstToken()) {
      return own;
    }
    double others = 0;
    for (Phases o : parts()) {
      double v = ms.applyAsDouble(o);
      if (o != GENERATION && !Double.isNaN(v)) {
        others += v;
      }
    }
    return Math.min(own, ms.applyAsDouble(canonical()) - others);
  }

  /** The reported phases in report order. */
  public static List<Phases> inReportOrder() {
    return REPORTED;
  }

  /** The names of {@link #inReportOrder()}. */
  public static List<String> reportedKeys() {
    return REPORTED.stream().map(Phases::key).collect(Collectors.toUnmodifiableList());
  }

  /** The entry named {@code key}, if there is one. */
  public static Optional<Phases> fromKey(String key) {
    for (Phases p : values()) {
      if (p.key.equals(key)) {
        return Optional.of(p);
      }
    }
    return Optional.empty();
  }
}
