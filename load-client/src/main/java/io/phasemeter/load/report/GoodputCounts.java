package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.join.Pair;
import java.util.List;

/**
 * Goodput's counts over a set of finished requests: how many were good, and for the others the
 * objectives they missed, the first they missed, and those left unjudged. Thread-safe (the live
 * report adds from the event loops and reads from its own thread).
 */
public final class GoodputCounts {
  private final Goodput goodput;
  private final List<Objective> objectives;
  private long finished;
  private long good;
  private long failed;
  private long goodOutputTokens;

  /** Requests that succeeded and had a figure for every objective: judged on each. */
  private long judgedOk;

  private final long[] missed;
  private final long[] firstMissed;
  private final long[] unjudged;

  /** The proxy's verdicts beside these, over the joined requests it judged. */
  private final ServerVerdicts server;

  /** Per tenant, as the joined records name them. */
  private final TenantGoodput tenants = new TenantGoodput();

  public GoodputCounts(Goodput goodput) {
    this.goodput = goodput;
    this.server = new ServerVerdicts(goodput);
    this.objectives = goodput.objectives().list();
    this.missed = new long[objectives.size()];
    this.firstMissed = new long[objectives.size()];
    this.unjudged = new long[objectives.size()];
  }

  /** The counts of every pair of {@code pairs}. */
  public static GoodputCounts of(Goodput goodput, Iterable<Pair> pairs) {
    GoodputCounts c = new GoodputCounts(goodput);
    for (Pair p : pairs) {
      c.add(p, goodput.judge(p));
    }
    return c;
  }

  /** Judges and counts one finished request. */
  public void add(Pair pair) {
    add(pair, goodput.judge(pair));
  }

  /** Counts one finished request judged {@code v}. */
  public synchronized void add(Pair pair, Verdict v) {
    server.add(pair, v);
    tenants.add(pair, v);
    finished++;
    if (!Verdict.ERROR.equals(v.firstMissed()) && v.unjudged().isEmpty()) {
      judgedOk++;
    }
    if (v.good()) {
      good++;
      long tokens = pair.client().usageCompletionTokens();
      if (tokens > 0) {
        goodOutputTokens += tokens;
      }
      return;
    }
    if (Verdict.ERROR.equals(v.firstMissed())) {
      failed++;
      return;
    }
    for (int i = 0; i < objectives.size(); i++) {
      Objective o = objectives.get(i);
      if (v.missed().contains(o)) {
        missed[i]++;
      }
      if (v.unjudged().contains(o)) {
        unjudged[i]++;
      }
      if (o.key().equals(v.firstMissed())) {
        firstMissed[i]++;
      }
    }
  }

  /** Requests counted. */
  public synchronized long finished() {
    return finished;
  }

  /** Of those, the good ones. */
  public synchronized long good() {
    return good;
  }

  /** The objectives and where they came from. */
  public Goodput goodput() {
    return goodput;
  }

  /**
   * summary.json's {@code goodput} object.
   *
   * @param sent requests sent: the denominator of attainment (dropped iterations were never sent)
   * @param ok requests that succeeded; {@code sent - ok} failed (never finished included)
   * @param seconds the time base of request_throughput (the run's duration)
   * @param generates whether the API generates tokens (else output_token_goodput is null)
   */
  public synchronized void write(
      ObjectNode o, long sent, long ok, double seconds, boolean generates) {
    ObjectNode limits = o.putObject("objectives_ms");
    goodput.objectives().limitsMs().forEach(limits::put);
    o.put("source", goodput.source());
    o.put("sent", sent);
    o.put("good", good);
    long notOk = Math.max(0, sent - ok);
    o.put("failed", notOk);
    // Requests judged on every objective (a figure for each), or that failed (a failure needs no
    // figure to be not good): sent - judged requests were not good for want of a figure.
    o.put("judged", judgedOk + notOk);
    num(o, "attainment", sent == 0 ? Double.NaN : (double) good / sent);
    num(o, "request_goodput", good / seconds);
    if (generates) {
      num(o, "output_token_goodput", goodOutputTokens / seconds);
    } else {
      o.putNull("output_token_goodput");
    }
    ObjectNode m = o.putObject("missed");
    ObjectNode first = o.putObject("first_missed");
    ObjectNode u = o.putObject("unjudged");
    for (int i = 0; i < objectives.size(); i++) {
      Objective obj = objectives.get(i);
      m.put(obj.key(), missed[i]);
      first.put(obj.key(), firstMissed[i]);
      if (Goodput.needsTheJoin(obj.phase()) || unjudged[i] > 0) {
        u.put(obj.key(), unjudged[i]);
      }
    }
    first.put(Verdict.ERROR, notOk);
    // The proxy's own verdicts, when any joined record carried one (a proxy with objectives).
    if (server.judged() > 0) {
      server.write(o.putObject("server"));
    }
    if (tenants.any()) {
      tenants.write(o, sent);
    }
  }

  /** The proxy's verdicts beside the client's. */
  ServerVerdicts server() {
    return server;
  }

  /** The client's goodput per tenant. */
  TenantGoodput tenants() {
    return tenants;
  }

  /**
   * {@code ; proxy: 97.0% met (97 of 100 judged), 3 verdicts differ (envelope 3)}; empty when no
   * joined record carried the proxy's verdict.
   */
  public String serverText() {
    String line = server.line();
    return line == null ? "" : "; proxy: " + line;
  }

  /** The live table's line: attainment over the requests finished so far. */
  public synchronized String liveLine(double goodPerSecond) {
    StringBuilder sb = new StringBuilder();
    sb.append(
        String.format(
            java.util.Locale.ROOT,
            "  goodput (%s): attainment %s (%d good of %d finished)",
            goodput.source(),
            finished == 0
                ? "-"
                : String.format(java.util.Locale.ROOT, "%.1f%%", 100.0 * good / finished),
            good,
            finished));
    if (Double.isFinite(goodPerSecond)) {
      sb.append(String.format(java.util.Locale.ROOT, ", %.2f good req/s", goodPerSecond));
    }
    sb.append(firstMissedText());
    sb.append(serverText());
    return sb.toString();
  }

  /** {@code ; first missed: client_ttft 5, error 2} for the non-zero counts; empty when none. */
  synchronized String firstMissedText() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < objectives.size(); i++) {
      if (firstMissed[i] > 0) {
        sb.append(sb.length() == 0 ? "" : ", ")
            .append(objectives.get(i).key())
            .append(' ')
            .append(firstMissed[i]);
        if (unjudged[i] > 0) {
          sb.append(" (").append(unjudged[i]).append(" unjudged)");
        }
      }
    }
    if (failed > 0) {
      sb.append(sb.length() == 0 ? "" : ", ").append("error ").append(failed);
    }
    return sb.length() == 0 ? "" : "; first missed: " + sb;
  }

  /**
   * The final line's tail: {@code ; N unjudged (...)} when requests that succeeded lacked a figure,
   * and a warning for each objective no request that succeeded could be judged on (an engine phase
   * without the proxy's engine spans, a server figure of a run whose records never joined); empty
   * when neither.
   */
  public synchronized String unjudgedText() {
    StringBuilder sb = new StringBuilder();
    long unjudgedRequests = finished - failed - judgedOk;
    if (unjudgedRequests > 0) {
      sb.append("; ")
          .append(unjudgedRequests)
          .append(" succeeded but unjudged (a figure absent: not good)");
    }
    long succeeded = finished - failed;
    for (int i = 0; i < objectives.size(); i++) {
      if (succeeded > 0 && unjudged[i] == succeeded) {
        Objective o = objectives.get(i);
        sb.append("; warning: no request could be judged on ").append(o.key());
        sb.append(
            o.phase().source() == io.phasemeter.core.Phases.Source.ENGINE
                ? " (the engine's phases need the proxy's engine spans:"
                    + " telemetry.engine_spans.enabled, and a pool that is not external)"
                : " (none of the proxy's records joined)");
      }
    }
    return sb.toString();
  }

  /** Per objective, in order: requests that missed it. */
  public synchronized long[] missed() {
    return missed.clone();
  }

  /** Per objective, in order: requests whose figure was absent. */
  public synchronized long[] unjudged() {
    return unjudged.clone();
  }

  /** Per objective, in order: requests whose first missed objective it was. */
  public synchronized long[] firstMissed() {
    return firstMissed.clone();
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }
}
