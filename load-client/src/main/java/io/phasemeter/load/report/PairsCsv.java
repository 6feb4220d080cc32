package io.phasemeter.load.report;

import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerRecord;
import io.phasemeter.load.join.ServerSlo;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * pairs.csv: one row per request, ids, status, class and durations in milliseconds; no bodies. RFC
 * 4180: fields holding a comma, a quote or a line break are quoted, quotes doubled; an unknown
 * duration is an empty field.
 */
final class PairsCsv {
  static final List<String> HEADER =
      List.of(
          "seq",
          "trace_id",
          "step",
          "bucket",
          "status",
          "class",
          "invalid_reason",
          "joined",
          "client_total_ms",
          "client_ttft_ms",
          "transport_setup_ms",
          "schedule_lag_ms",
          "tpot_ms",
          "server_root_ms",
          "server_ttft_ms",
          "gateway_ms",
          "receive_ms",
          "queue_ms",
          "generation_ms",
          "write_ms",
          "unattributed_ms",
          "network_envelope_ms",
          "ttft_envelope_ms",
          "sampled",
          "retried",
          "good",
          "slo_missed",
          "tenant",
          "server_slo",
          "server_slo_missed",
          "intended_ms",
          "session",
          "turn",
          "dns_ms",
          "connect_ms",
          "tls_ms");

  /** {@code runStartNanos} of a table whose {@code intended_ms} is left empty (no clock known). */
  static final long NO_CLOCK = Long.MIN_VALUE;

  private PairsCsv() {}

  static void write(Path file, List<Pair> pairs) throws IOException {
    write(file, pairs, List.of(), null, NO_CLOCK);
  }

  /**
   * Writes the rows; the columns of {@code notApplicable} phases (those the run's API does not
   * have, e.g. {@code client_ttft} of embeddings) are left empty whatever a record said. {@code
   * good} and {@code slo_missed} (the first objective missed, {@code error} for a failure) are
   * empty without {@code goodput}; {@code tenant}, {@code server_slo} ({@code met} or {@code
   * missed}) and {@code server_slo_missed} (the proxy's first missed objective, {@code error} for a
   * failure it counted) come from the joined record and are empty without one (or when it carries
   * none: a proxy before them, a request the proxy did not judge). {@code intended_ms} is the
   * request's intended start in milliseconds after {@code runStartNanos}, the run's clock (a
   * replayed row's: its time in the trace divided by the speed). {@code session} and {@code turn}
   * are the request's session id and turn, empty outside any session. {@code dns_ms}, {@code
   * connect_ms} and {@code tls_ms} (last) split {@code transport_setup_ms} for a request that
   * opened its connection: empty on a reused connection, {@code dns_ms} empty for an IP literal,
   * {@code tls_ms} empty over plain http.
   */
  static void write(
      Path file, List<Pair> pairs, List<String> notApplicable, Goodput goodput, long runStartNanos)
      throws IOException {
    try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
      w.write(String.join(",", HEADER));
      w.write("\r\n");
      StringBuilder row = new StringBuilder(256);
      for (Pair p : pairs) {
        row.setLength(0);
        appendRow(row, p, notApplicable);
        row.append(',');
        if (goodput == null) {
          row.append(',');
        } else {
          Verdict v = goodput.judge(p);
          row.append(v.good()).append(',');
          row.append(v.good() ? "" : v.firstMissed());
        }
        ServerRecord s = p.server();
        ServerSlo slo = s == null ? null : s.slo();
        row.append(',').append(s == null ? "" : quote(s.tenant()));
        row.append(',').append(slo == null ? "" : slo.result());
        row.append(',').append(slo == null || slo.met() ? "" : quote(slo.objective()));
        long intended = p.client().intendedNanos();
        row.append(',')
            .append(
                runStartNanos == NO_CLOCK || intended < 0
                    ? ""
                    : ms((intended - runStartNanos) / 1e6));
        // The request's session and turn; empty outside any session.
        ClientResult c = p.client();
        row.append(',').append(c.turn() == 0 ? "" : quote(c.session()));
        row.append(',').append(c.turn() == 0 ? "" : Integer.toString(c.turn()));
        // transport_setup's parts, for a request that opened its connection; empty otherwise.
        row.append(',').append(nanos(c.dnsNanos()));
        row.append(',').append(nanos(c.connectNanos()));
        row.append(',').append(nanos(c.tlsNanos()));
        w.append(row).append("\r\n");
      }
    }
  }

  static void appendRow(StringBuilder b, Pair p) {
    appendRow(b, p, List.of());
  }

  private static void appendRow(StringBuilder b, Pair p, List<String> notApplicable) {
    ClientResult c = p.client();
    ServerRecord s = p.server();
    boolean ttft = !notApplicable.contains("client_ttft");
    boolean serverTtft = !notApplicable.contains("server_ttft");
    boolean ttftEnvelope = !notApplicable.contains("ttft_envelope");
    boolean tpot = !notApplicable.contains("tpot");
    b.append(c.seq()).append(',');
    b.append(quote(c.traceId())).append(',');
    b.append(c.step()).append(',');
    b.append(quote(c.bucket())).append(',');
    b.append(c.status()).append(',');
    b.append(c.error()).append(',');
    b.append(quote(c.invalidReason())).append(',');
    b.append(p.joined()).append(',');
    b.append(nanos(c.totalNanos())).append(',');
    b.append(ttft ? nanos(c.ttftNanos()) : "").append(',');
    b.append(nanos(c.transportSetupNanos())).append(',');
    b.append(c.intendedNanos() < 0 || c.actualNanos() < 0 ? "" : ms(c.scheduleLagNanos() / 1e6));
    b.append(',');
    b.append(tpot ? nanos(c.tpotNanos()) : "").append(',');
    b.append(s == null ? "" : ms(s.rootMs())).append(',');
    b.append(s == null || !serverTtft ? "" : ms(SlowRequest.orNaN(s.serverTtftMs()))).append(',');
    b.append(s == null ? "" : ms(SlowRequest.orNaN(s.gatewayMs()))).append(',');
    for (String phase : List.of("receive", "queue", "generation", "write")) {
      b.append(ms(SlowRequest.phase(s, phase))).append(',');
    }
    b.append(s == null ? "" : ms(SlowRequest.orNaN(s.unattributedMs()))).append(',');
    b.append(ms(p.networkEnvelopeMs())).append(',');
    b.append(ttftEnvelope ? ms(p.ttftEnvelopeMs()) : "").append(',');
    b.append(s == null ? "" : String.valueOf(s.sampled())).append(',');
    b.append(c.retried());
  }

  private static String nanos(long nanos) {
    return nanos < 0 ? "" : ms(nanos / 1e6);
  }

  private static String ms(double ms) {
    return Double.isFinite(ms) ? String.format(Locale.ROOT, "%.3f", ms) : "";
  }

  static String quote(String field) {
    if (field == null) {
      return "";
    }
    if (field.indexOf(',') < 0
        && field.indexOf('"') < 0
        && field.indexOf('\n') < 0
        && field.indexOf('\r') < 0) {
      return field;
    }
    return '"' + field.replace("\"", "\"\"") + '"';
  }
}
