package io.phasemeter.load.report;

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
    m.put("client_total", "E2EL: intended start to the last byte read (client clock)");
    m.put("client_ttft", "TTFT: intended start to the first content-bearing event parsed");
    m.put("transport_setup", "waiting for a connection plus connecting (and TLS)");
    m.put("network_envelope", "client_total - server_root, per request, after the join");
    m.put("ttft_envelope", "client_ttft - server_ttft, per request, after the join");
    m.put("server_root", "the proxy's root span: headers parsed to the last byte handed over");
    m.put("server_ttft", "proxy root start to the first content chunk written to the client");
    m.put("gateway", "auth + prepare + route, in the proxy");
    m.put("receive", "reading the request body in the proxy (client upload)");
    m.put("queue", "waiting for an inference slot in the proxy");
    m.put("generation", "the upstream request: started to last upstream byte");
    m.put(
        "engine_queue",
        "inside generation: waiting in the engine's own scheduler queue (vLLM's span)");
    m.put("prefill", "inside generation: the engine's prefill, scheduled to first token");
    m.put("decode", "inside generation: the engine's decode, first to last token");
    m.put(
        "engine_coverage",
        "joined successful records that got the engine's span / those that waited for one");
    m.put("write", "the response tail after the upstream's last byte");
    m.put("unattributed", "server_root minus the sum of its phases");
    m.put("tpot", "(t_last_token - t_first_token) / (n - 1), client side, vLLM's definition");
    m.put("itl", "each gap between content events, client side");
    m.put("schedule_lag", "actual start minus intended start, over every started request");
    m.put("request_throughput", "successful requests / run duration (vLLM's request throughput)");
    m.put(
        "output_token_throughput", "usage.completion_tokens of successful requests / run duration");
    m.put("achieved_rate", "requests finished per second over the run, as the load client saw it");
    m.put("join_coverage", "successful requests that joined a proxy record / successful requests");
    return m;
  }
}
