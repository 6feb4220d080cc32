package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import io.phasemeter.load.join.ServerSlo;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * One request the client and the proxy judged differently, and why: the objective the side that
 * missed missed first, the same figure on the other side (client_ttft against server_ttft,
 * client_total against server_root, the client's TPOT against the proxy's, a proxy phase against
 * itself), the envelope between them (client − proxy) and whether it alone accounts for the
 * different verdict: it does when the other side's figure holds under the limit that was missed.
 *
 * @param traceId the request's trace id
 * @param tenant the record's tenant, or null
 * @param client the client's side: good or missed, the objective compared, value and limit
 * @param server the proxy's side: met or missed, the objective compared, value and limit
 * @param envelopeMs client figure − proxy figure of the objective compared; NaN when the two sides
 *     compared the same figure (a proxy phase) or one has none
 * @param envelopeAccounts whether the other side's figure holds under the missed limit: without the
 *     envelope the verdicts would agree on this objective
 * @param cause why the verdicts differ
 * @param explanation the same in words, for the report
 */
record Disagreement(
    String traceId,
    String tenant,
    Side client,
    Side server,
    double envelopeMs,
    boolean envelopeAccounts,
    Cause cause,
    String explanation) {

  /**
   * One side's verdict.
   *
   * @param ok good (client) or met (proxy)
   * @param objective the catalogue key compared: the first missed on the side that missed, the same
   *     figure on the other; {@code error} for a failure; null when there is none
   * @param valueMs that side's figure; NaN when absent
   * @param limitMs that side's limit on it; NaN when it sets none
   */
  record Side(boolean ok, String objective, double valueMs, double limitMs) {}

  /** Why two verdicts differ; {@link #key()} is summary.json's word. */
  enum Cause {
    /** The other side's figure holds under the missed limit: the envelope took it over. */
    ENVELOPE("envelope"),
    /** Both sides judge the figure, with limits that differ. */
    LIMITS("limits"),
    /** Only the side that missed sets an objective on the figure (or only it has the figure). */
    ONE_SIDE("one_side"),
    /** One side counted a failure. */
    ERROR("error"),
    /** The client had no figure for its objective (not good, unjudged). */
    UNJUDGED("unjudged");

    private final String key;

    Cause(String key) {
      this.key = key;
    }

    String key() {
      return key;
    }
  }

  /** The proxy's per-request header for each objective it lets a request set. */
  private static final Map<String, String> HEADERS =
      Map.of(
          "server_ttft", "x-slo-ttft-ms", "tpot", "x-slo-tpot-ms", "server_root", "x-slo-e2e-ms");

  /**
   * Explains why {@code goodput}'s verdict {@code v} on {@code p} differs from the proxy's (the
   * record's {@code slo}): call it only when they differ.
   */
  static Disagreement of(Goodput goodput, Pair p, Verdict v) {
    ServerRecord r = p.server();
    ServerSlo s = r.slo();
    double[] figures = Goodput.figures(p);
    return v.good()
        ? proxyMissed(goodput, p, r, s, figures)
        : clientMissed(goodput, p, v, r, s, figures);
  }

  private static Disagreement clientMissed(
      Goodput goodput, Pair p, Verdict v, ServerRecord r, ServerSlo s, double[] figures) {
    String x = v.firstMissed();
    String trace = p.client().traceId();
    if (Verdict.ERROR.equals(x)) {
      String why =
          "the request failed at the client ("
              + p.client().error()
              + (p.client().status() > 0 ? ", HTTP " + p.client().status() : "")
              + ") while the proxy met its objectives (outcome "
              + r.outcome()
              + "): it failed where the proxy does not see (the network, the client's own"
              + " timeout or checks)";
      return new Disagreement(
          trace,
          r.tenant(),
          new Side(false, Verdict.ERROR, Double.NaN, Double.NaN),
          new Side(true, null, Double.NaN, Double.NaN),
          Double.NaN,
          false,
          Cause.ERROR,
          why);
    }
    Objective ox = goodput.objective(x);
    double vc = figures[Phases.fromKey(x).orElseThrow().ordinal()] / 1e6;
    double lc = ox.limitMs();
    String y = serverKey(x);
    double vs = serverMs(r, y);
    Double ls = s.limitMs(y);
    Side server = new Side(true, y, vs, ls == null ? Double.NaN : ls);
    if (Double.isNaN(vc)) {
      return new Disagreement(
          trace,
          r.tenant(),
          new Side(false, x, Double.NaN, lc),
          server,
          Double.NaN,
          false,
          Cause.UNJUDGED,
          x
              + " had no figure at the client (unjudged, so not good) while the proxy met its"
              + " objectives");
    }
    double envelope = crosses(x, y) ? vc - vs : Double.NaN;
    boolean accounts = !Double.isNaN(envelope) && nanos(vs) <= ox.limitNanos();
    Cause cause =
        accounts ? Cause.ENVELOPE : ls == null || Double.isNaN(vs) ? Cause.ONE_SIDE : Cause.LIMITS;
    StringBuilder t = new StringBuilder();
    t.append(x).append(" missed by ").append(ms(vc - lc));
    if (Double.isNaN(vs)) {
      t.append(" while the proxy has no figure for it");
    } else if (ls != null) {
      t.append(" while ").append(y).append(" met with ").append(ms(ls - vs)).append(" to spare");
    } else {
      t.append(" while the proxy set no objective on ").append(y);
      t.append(" (it was ").append(ms(vs)).append(')');
    }
    t.append(": ");
    switch (cause) {
      case ENVELOPE -> t.append(envelopeName(x)).append(", ").append(ms(envelope));
      case LIMITS ->
          t.append("the limits differ: ")
              .append(y)
              .append(", ")
              .append(ms(vs))
              .append(", is over the client's ")
              .append(ms(lc))
              .append(" but within the proxy's ")
              .append(ms(ls));
      default ->
          t.append(
              Double.isNaN(vs)
                  ? "an objective only the client can judge"
                  : "an objective only the client set (the proxy's: " + limits(s) + ")");
    }
    if (cause == Cause.ENVELOPE) {
      t.append(", took it over the client's limit");
    }
    return new Disagreement(
        trace,
        r.tenant(),
        new Side(false, x, vc, lc),
        server,
        envelope,
        accounts,
        cause,
        t.toString());
  }

  private static Disagreement proxyMissed(
      Goodput goodput, Pair p, ServerRecord r, ServerSlo s, double[] figures) {
    String y = s.objective();
    String trace = p.client().traceId();
    if (ServerSlo.ERROR.equals(y)) {
      return new Disagreement(
          trace,
          r.tenant(),
          new Side(true, null, Double.NaN, Double.NaN),
          new Side(false, ServerSlo.ERROR, Double.NaN, Double.NaN),
          Double.NaN,
          false,
          Cause.ERROR,
          "the client saw the request succeed while the proxy counted a failure (outcome "
              + r.outcome()
              + ", status "
              + r.status()
              + ")");
    }
    Double ls = s.limitMs(y);
    double vs = serverMs(r, y);
    // The client's objective on the same figure, else on its own side of it (server_ttft: TTFT).
    String x = goodput.objective(y) != null ? y : clientKey(y);
    Objective ox = goodput.objective(x);
    double vc =
        Phases.fromKey(x).map(ph -> figures[ph.ordinal()] / 1e6).orElse(Double.NaN).doubleValue();
    double envelope = crosses(x, y) ? vc - vs : Double.NaN;
    boolean accounts = !Double.isNaN(envelope) && ls != null && nanos(vc) <= nanos(ls);
    Cause cause =
        accounts ? Cause.ENVELOPE : ox == null || Double.isNaN(vc) ? Cause.ONE_SIDE : Cause.LIMITS;
    String header =
        s.overridden().contains(y) && HEADERS.containsKey(y)
            ? " (set by the request's " + HEADERS.get(y) + ")"
            : "";
    StringBuilder t = new StringBuilder();
    if (ox != null) {
      t.append(x).append(" met with ").append(ms(ox.limitMs() - vc)).append(" to spare");
    } else if (!Double.isNaN(vc)) {
      t.append("the client set no objective on ").append(x);
      t.append(" (it was ").append(ms(vc)).append(')');
    } else {
      t.append("the client has no figure for ").append(y);
    }
    t.append(" while ").append(y).append(" missed");
    if (!Double.isNaN(vs) && ls != null) {
      t.append(" by ").append(ms(vs - ls));
    }
    t.append(": ");
    switch (cause) {
      case ENVELOPE ->
          t.append(envelopeName(x))
              .append(", ")
              .append(ms(envelope))
              .append(", brought it under the proxy's limit at the client (a negative envelope is")
              .append(" a boundary, unit or join error)");
      case LIMITS ->
          t.append("the limits differ: the client's ")
              .append(ms(ox.limitMs()))
              .append(" against the proxy's ")
              .append(ms(ls))
              .append(header);
      default -> t.append("an objective only the proxy set").append(header);
    }
    return new Disagreement(
        trace,
        r.tenant(),
        new Side(true, x, vc, ox == null ? Double.NaN : ox.limitMs()),
        new Side(false, y, vs, ls == null ? Double.NaN : ls),
        envelope,
        accounts,
        cause,
        t.toString());
  }

  /** The proxy's key for the client's figure {@code clientKey}: its own clock's side of it. */
  static String serverKey(String clientKey) {
    return switch (clientKey) {
      case "client_ttft" -> "server_ttft";
      case "client_total" -> "server_root";
      default -> clientKey;
    };
  }

  /** The client's own side of the proxy's figure {@code serverKey}. */
  static String clientKey(String serverKey) {
    return switch (serverKey) {
      case "server_ttft" -> "client_ttft";
      case "server_root" -> "client_total";
      default -> serverKey;
    };
  }

  /** Whether the two keys are two clocks' figures of one thing (an envelope lies between them). */
  private static boolean crosses(String clientKey, String serverKey) {
    return (clientKey.equals("client_ttft") && serverKey.equals("server_ttft"))
        || (clientKey.equals("client_total") && serverKey.equals("server_root"))
        || (clientKey.equals("tpot") && serverKey.equals("tpot"));
  }

  private static String envelopeName(String clientKey) {
    return switch (clientKey) {
      case "client_ttft" -> "the network envelope (ttft_envelope = client_ttft − server_ttft)";
      case "client_total" -> "the network envelope (network_envelope = client_total − server_root)";
      default -> "the stream's envelope (the client's TPOT − the proxy's)";
    };
  }

  /**
   * The proxy's figure {@code key} of record {@code r} in ms, NaN when it has none; TPOT of at most
   * one output token is 0, as both sides judge it.
   */
  static double serverMs(ServerRecord r, String key) {
    Double v =
        switch (key) {
          case "server_ttft" -> r.serverTtftMs();
          case "server_root" -> r.rootMs();
          case "tpot" ->
              r.tpotMs() != null
                  ? r.tpotMs()
                  : r.outputTokens() != null && r.outputTokens() <= 1 ? 0.0 : null;
          case "gateway" -> r.gatewayMs();
          case "unattributed" -> r.unattributedMs();
          default -> r.phasesMs() == null ? null : r.phasesMs().get(key);
        };
    return v == null ? Double.NaN : v;
  }

  private static String limits(ServerSlo s) {
    return s.objectivesMs().isEmpty()
        ? "none"
        : s.objectivesMs().entrySet().stream()
            .map(e -> e.getKey() + " " + ms(e.getValue()))
            .collect(Collectors.joining(", "));
  }

  private static long nanos(double ms) {
    return SignedHistogram.nanos(ms);
  }

  /** {@code 38 ms}, {@code 9.5 ms}, {@code −15 ms}: Html.ms without trailing zeros. */
  static String ms(double v) {
    String s = Html.ms(v);
    if (s.contains(".")) {
      s = s.replaceAll("0+$", "");
      s = s.endsWith(".") ? s.substring(0, s.length() - 1) : s;
    }
    return s.replace('-', '\u2212') + " ms";
  }
}
