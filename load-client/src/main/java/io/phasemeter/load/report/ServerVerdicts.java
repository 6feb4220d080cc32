package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerSlo;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The client's verdicts beside the proxy's own (the record's {@code slo}), over the joined requests
 * the proxy judged: how many it met, how many verdicts agree, the two kinds of disagreement, why
 * each happened ({@link Disagreement.Cause}), and the first {@value #KEPT} explained. Thread-safe.
 */
final class ServerVerdicts {
  /** Disagreements kept with their explanation; the rest are only counted. */
  static final int KEPT = 20;

  private final Goodput goodput;
  private long judged;
  private long met;
  private long bothGood;
  private long bothMissed;
  private long clientGoodServerMissed;
  private long clientMissedServerMet;
  private final long[] causes = new long[Disagreement.Cause.values().length];
  private final List<Disagreement> first = new ArrayList<>();

  ServerVerdicts(Goodput goodput) {
    this.goodput = goodput;
  }

  /** Counts one finished request the client judged {@code v}; nothing unless the proxy did too. */
  synchronized void add(Pair p, Verdict v) {
    ServerSlo s = p.joined() ? p.server().slo() : null;
    if (s == null) {
      return;
    }
    judged++;
    if (s.met()) {
      met++;
    }
    if (v.good() == s.met()) {
      if (v.good()) {
        bothGood++;
      } else {
        bothMissed++;
      }
      return;
    }
    if (v.good()) {
      clientGoodServerMissed++;
    } else {
      clientMissedServerMet++;
    }
    Disagreement d = Disagreement.of(goodput, p, v);
    causes[d.cause().ordinal()]++;
    if (first.size() < KEPT) {
      first.add(d);
    }
  }

  /** Requests the proxy judged (joined records carrying {@code slo}). */
  synchronized long judged() {
    return judged;
  }

  /** Of those, the ones it found met. */
  synchronized long met() {
    return met;
  }

  /** Good at the client and met at the proxy. */
  synchronized long bothGood() {
    return bothGood;
  }

  /** Missed on both sides. */
  synchronized long bothMissed() {
    return bothMissed;
  }

  synchronized long clientGoodServerMissed() {
    return clientGoodServerMissed;
  }

  synchronized long clientMissedServerMet() {
    return clientMissedServerMet;
  }

  /** The first {@value #KEPT} disagreements, in the order the requests finished. */
  synchronized List<Disagreement> disagreements() {
    return List.copyOf(first);
  }

  /** Disagreements of each cause, by {@link Disagreement.Cause#ordinal()}. */
  synchronized long[] causes() {
    return causes.clone();
  }

  /** {@code 97.0% met (97 of 100 judged), 3 verdicts differ}; null when the proxy judged none. */
  synchronized String line() {
    if (judged == 0) {
      return null;
    }
    long differ = clientGoodServerMissed + clientMissedServerMet;
    return String.format(
        Locale.ROOT,
        "%.1f%% met (%d of %d judged), %d verdict%s differ%s",
        100.0 * met / judged,
        met,
        judged,
        differ,
        differ == 1 ? "" : "s",
        differ == 0 ? "" : causesText());
  }

  /** {@code (envelope 2, limits 1)}. */
  private String causesText() {
    StringBuilder b = new StringBuilder();
    for (Disagreement.Cause c : Disagreement.Cause.values()) {
      if (causes[c.ordinal()] > 0) {
        b.append(b.length() == 0 ? " (" : ", ").append(c.key()).append(' ');
        b.append(causes[c.ordinal()]);
      }
    }
    return b.append(')').toString();
  }

  /** summary.json's {@code goodput.server}. */
  synchronized void write(ObjectNode o) {
    o.put("judged", judged);
    o.put("met", met);
    num(o, "attainment", judged == 0 ? Double.NaN : (double) met / judged);
    o.put("agree", bothGood + bothMissed);
    o.put("client_good_server_missed", clientGoodServerMissed);
    o.put("client_missed_server_met", clientMissedServerMet);
    ObjectNode c = o.putObject("causes");
    for (Disagreement.Cause cause : Disagreement.Cause.values()) {
      c.put(cause.key(), causes[cause.ordinal()]);
    }
    ArrayNode list = o.putArray("disagreements");
    for (Disagreement d : first) {
      ObjectNode x = list.addObject();
      x.put("trace_id", d.traceId());
      x.put("tenant", d.tenant());
      side(x.putObject("client"), d.client(), d.client().ok() ? "good" : "missed");
      side(x.putObject("server"), d.server(), d.server().ok() ? "met" : "missed");
      num(x, "envelope_ms", micros(d.envelopeMs()));
      x.put("envelope_accounts", d.envelopeAccounts());
      x.put("cause", d.cause().key());
      x.put("explanation", d.explanation());
    }
  }

  private static void side(ObjectNode o, Disagreement.Side s, String verdict) {
    o.put("verdict", verdict);
    o.put("objective", s.objective());
    num(o, "value_ms", micros(s.valueMs()));
    num(o, "limit_ms", s.limitMs());
  }

  /** Milliseconds to the microsecond, as pairs.csv keeps them (no float noise of a difference). */
  private static double micros(double ms) {
    return Double.isFinite(ms) ? Math.round(ms * 1000) / 1000.0 : ms;
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }
}
