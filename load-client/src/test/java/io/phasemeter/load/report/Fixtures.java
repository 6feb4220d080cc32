package io.phasemeter.load.report;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import java.util.HashMap;
import java.util.Map;

/** Builds client results, proxy records and pairs from milliseconds, for report tests. */
final class Fixtures {
  private Fixtures() {}

  static long ns(double ms) {
    return Math.round(ms * 1e6);
  }

  static String traceId(long seq) {
    return String.format("%032x", seq + 1);
  }

  /** A successful streamed request: intended at {@code startMs}, lasting {@code totalMs}. */
  static ClientResult client(long seq, double startMs, double totalMs) {
    return client(seq, 0, startMs, totalMs, totalMs / 4, ErrorClass.NONE);
  }

  static ClientResult client(
      long seq, int step, double startMs, double totalMs, double ttftMs, ErrorClass error) {
    return new ClientResult(
        seq,
        traceId(seq),
        "1k",
        step,
        ns(startMs),
        ns(startMs + 0.2),
        ns(0.5),
        ns(ttftMs * 0.9),
        ns(ttftMs),
        ns(totalMs),
        ns(10),
        50,
        error == ErrorClass.NONE ? 200 : error == ErrorClass.HTTP_5XX ? 503 : 0,
        error,
        error == ErrorClass.INVALID ? "usage.completion_tokens 12 != 100" : null,
        1024,
        100,
        1024,
        error == ErrorClass.NONE ? 100 : -1,
        null);
  }

  /**
   * A proxy record whose phases add up to {@code rootMs}: gateway 1 ms (auth .2, prepare .5, route
   * .3), receive .5, queue {@code queueMs}, write .5, unattributed .5, generation the rest.
   */
  static ServerRecord server(long seq, double rootMs, double queueMs, double ttftMs) {
    Map<String, Double> phases = new HashMap<>();
    phases.put("auth", 0.2);
    phases.put("prepare", 0.5);
    phases.put("route", 0.3);
    phases.put("receive", 0.5);
    phases.put("queue", queueMs);
    phases.put("generation", rootMs - 1 - 0.5 - queueMs - 0.5 - 0.5);
    phases.put("write", 0.5);
    return new ServerRecord(
        traceId(seq),
        "sim-llama",
        "default",
        true,
        200,
        "success",
        rootMs,
        ttftMs,
        phases,
        0.5,
        9.5,
        1024L,
        100L,
        seq % 2 == 0);
  }

  /** A successful joined pair: the proxy saw {@code rootMs}, the client {@code rootMs + envMs}. */
  static Pair joined(long seq, double startMs, double rootMs, double envMs) {
    double total = rootMs + envMs;
    return new Pair(
        client(seq, 0, startMs, total, total / 4, ErrorClass.NONE),
        server(seq, rootMs, rootMs / 10, total / 4 - envMs));
  }
}
