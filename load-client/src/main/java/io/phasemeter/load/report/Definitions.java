package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import java.util.LinkedHashMap;
import java.util.Map;

/** The words a report uses, written into summary.json and report.html alike. */
final class Definitions {
  private Definitions() {}

  static final String NOTE =
      "Metric names match `vllm bench serve` where they overlap: TTFT (client_ttft), TPOT, ITL,"
          + " E2EL (= client_total), request_throughput and output_token_throughput. Two"
          + " differences: Phasemeter's TTFT ends at the first event that carries generated"
          + " content, not at the role-only chunk; and every client latency starts at the"
          + " intended (scheduled) start of the request, so a request that left late carries its"
          + " schedule lag in every latency (open model), and the lag is reported on its own as"
          + " schedule_lag. Latency quantiles are over successful requests; envelopes and server"
          + " phases over successful requests that joined a proxy record (join coverage);"
          + " quantiles of an envelope are taken over the per-request differences, never as"
          + " p95(client) - p95(server). A negative envelope is a boundary, unit or join error:"
          + " it is counted and shown, never clipped to zero. Quantiles are within 1 %.";

  static final Map<String, String> TERMS = terms();

  private static Map<String, String> terms() {
    Map<String, String> m = new LinkedHashMap<>();
    for (Phases p : Phases.inReportOrder()) {
      m.put(p.key(), p.meaning());
      if (p == Phases.DECODE) {
        m.put(
            "engine_coverage",
            "joined successful records that got the engine's span / those that waited for one");
      }
    }
    m.put("request_throughput", "successful requests / run duration (vLLM's request throughput)");
    m.put(
        "output_token_throughput", "usage.completion_tokens of successful requests / run duration");
    m.put(
        "request_goodput",
        "good requests / run duration: succeeded and met every objective (--slo or slo_ms);"
            + " vLLM's goodput");
    m.put(
        "attainment",
        "good requests / requests sent (failures included); a request not joined is not good"
            + " when an objective needs the proxy's record (goodput.judged: the requests with a"
            + " figure for every objective, or failed)");
    m.put(
        "goodput.server",
        "the proxy's own verdicts (the record's slo: its budget's slo_ms and the request's x-slo-*"
            + " headers, judged on its clock) over the joined requests it judged, beside the"
            + " client's; a disagreement's envelope is the client's figure minus the proxy's of"
            + " the same objective, and accounts for the different verdict when the other side's"
            + " figure holds under the limit that was missed");
    m.put("achieved_rate", "requests finished per second over the run, as the load client saw it");
    m.put("join_coverage", "successful requests that joined a proxy record / successful requests");
    return m;
  }
}
