package io.phasemeter.load.join;

import io.phasemeter.load.http.ClientResult;

/**
 * A client observation joined with the proxy's record of the same request (same trace id), or alone
 * when no record arrived. The envelopes subtract durations measured on two clocks; never absolute
 * timestamps.
 */
public record Pair(ClientResult client, ServerRecord server) {

  /** Whether the proxy's record was found. */
  public boolean joined() {
    return server != null;
  }

  /** client_total − server_root in ms, or NaN when not joined or not complete. */
  public double networkEnvelopeMs() {
    if (server == null || client.totalNanos() < 0) {
      return Double.NaN;
    }
    return client.totalNanos() / 1e6 - server.rootMs();
  }

  /** client_ttft − server_ttft in ms, or NaN. */
  public double ttftEnvelopeMs() {
    if (server == null || client.ttftNanos() < 0 || server.serverTtftMs() == null) {
      return Double.NaN;
    }
    return client.ttftNanos() / 1e6 - server.serverTtftMs();
  }
}
