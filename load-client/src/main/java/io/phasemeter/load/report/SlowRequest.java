package io.phasemeter.load.report;

import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

/**
 * One slow request taken apart: its client total is the network envelope plus the proxy's root, and
 * the root is gateway + receive + queue + generation + write + unattributed. Server figures are NaN
 * when the request did not join a proxy record.
 */
public record SlowRequest(
    long seq,
    String traceId,
    int step,
    boolean joined,
    double clientTotalMs,
    double serverRootMs,
    double networkEnvelopeMs,
    double gatewayMs,
    double receiveMs,
    double queueMs,
    double generationMs,
    double writeMs,
    double unattributedMs) {

  /** The parts in the order of a request's life, name → milliseconds. */
  public List<Part> parts() {
    return List.of(
        new Part("network_envelope", networkEnvelopeMs),
        new Part("gateway", gatewayMs),
        new Part("receive", receiveMs),
        new Part("queue", queueMs),
        new Part("generation", generationMs),
        new Part("write", writeMs),
        new Part("unattributed", unattributedMs));
  }

  /** One named part of a request, in milliseconds (NaN when unknown). */
  public record Part(String name, double ms) {}

  /**
   * What the parts leave unexplained: client total minus their sum. About zero when the join, the
   * units and the boundaries are right; NaN when not joined or a part is missing.
   */
  public double residualMs() {
    double sum = 0;
    for (Part p : parts()) {
      sum += p.ms();
    }
    return clientTotalMs - sum;
  }

  /** The {@code n} successful requests with the largest client total, slowest first. */
  public static List<SlowRequest> slowest(List<Pair> pairs, int n) {
    Comparator<Pair> byTotal = Comparator.comparingLong(p -> p.client().totalNanos());
    PriorityQueue<Pair> top = new PriorityQueue<>(byTotal);
    for (Pair p : pairs) {
      if (!p.client().ok() || p.client().totalNanos() < 0) {
        continue;
      }
      top.add(p);
      if (top.size() > n) {
        top.poll();
      }
    }
    List<Pair> sorted = new ArrayList<>(top);
    sorted.sort(byTotal.reversed());
    return sorted.stream().map(SlowRequest::of).toList();
  }

  /** Takes one pair apart. */
  public static SlowRequest of(Pair p) {
    ServerRecord s = p.server();
    return new SlowRequest(
        p.client().seq(),
        p.client().traceId(),
        p.client().step(),
        p.joined(),
        p.client().totalNanos() < 0 ? Double.NaN : p.client().totalNanos() / 1e6,
        s == null ? Double.NaN : s.rootMs(),
        p.networkEnvelopeMs(),
        s == null ? Double.NaN : orNaN(s.gatewayMs()),
        phase(s, "receive"),
        phase(s, "queue"),
        phase(s, "generation"),
        phase(s, "write"),
        s == null ? Double.NaN : orNaN(s.unattributedMs()));
  }

  static double phase(ServerRecord s, String name) {
    return s == null || s.phasesMs() == null ? Double.NaN : orNaN(s.phasesMs().get(name));
  }

  static double orNaN(Double d) {
    return d == null ? Double.NaN : d;
  }
}
