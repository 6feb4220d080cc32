package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.join.ReplicaCounts;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * summary.json (docs/design.md §7): the machine-readable verdict of a run. NaN is written as null.
 */
final class SummaryJson {
  private static final ObjectMapper MAPPER =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private SummaryJson() {}

  static void write(Path file, ReportModel m) throws IOException {
    MAPPER.writeValue(file.toFile(), build(m));
  }

  static ObjectNode build(ReportModel m) {
    ReportInput in = m.in;
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    root.put("v", 1);
    if (in.api() != null) {
      root.put("api", in.api().key());
    }
    ObjectNode requests = root.putObject("requests");
    requests.put("sent", in.sent());
    requests.put("ok", in.ok());
    requests.put("errors", in.errors());
    requests.put("dropped", in.dropped());
    requests.put("invalid", in.invalid());
    // Failures over requests sent: what --max-error-rate and the budgets' max_error_rate judge.
    requests.put(
        "error_rate", io.phasemeter.load.budget.ClientBudgets.errorRate(in.sent(), in.ok()));
    // Why they failed: the most frequent (class, reason) pairs, the rest as "other".
    m.failures.write(root.putObject("failures"));
    Connections c = in.connections();
    if (c.known()) {
      requests.put("stale_connection_retries", c.staleRetries());
      ObjectNode conns = root.putObject("connections");
      conns.put("reuse", c.reuse() ? "on" : "off");
      conns.put("opened", c.opened());
      conns.put("closed_by_server_after_response", c.closedByServer());
      conns.put("stale_connection_retries", c.staleRetries());
    }
    clientFloor(root, in.conditions());
    num(root, "join_coverage", m.joinCoverage());
    num(root, "engine_coverage", m.stats.engineCoverage());
    ObjectNode join = root.putObject("join");
    join.put("ok", m.stats.okCount());
    join.put("joined_ok", m.stats.joinedOkCount());
    join.put("finished", m.stats.startedCount());
    join.put("joined", m.stats.joinedCount());
    if (in.feed() != null) {
      join.put("feed_reconnects", in.feed().reconnects());
      join.put("records_missed", in.feed().recordsMissed());
      join.put("fetched", in.feed().fetched());
      replicas(join.putArray("replicas"), in.feed().replicas());
    }
    num(root, "achieved_rate", in.achievedRate());
    num(root, "request_throughput", m.requestThroughput);
    if (in.generates()) {
      num(root, "output_token_throughput", m.outputTokenThroughput);
      root.put("total_output_tokens", m.outputTokens);
    } else {
      // Nothing is generated: no output tokens, rather than zero of them.
      root.putNull("output_token_throughput");
      root.putNull("total_output_tokens");
    }
    num(root, "duration_s", in.durationSeconds());
    if (m.goodput == null) {
      root.putNull("goodput");
      if (in.conditions().get("slo_skipped") != null) {
        root.put(
            "goodput_note",
            "not judged: no objective of "
                + in.conditions().get("slo_source")
                + " can be judged in this run (conditions.slo_skipped says why)");
      }
    } else {
      // Same time base as request_throughput; attainment over requests sent.
      m.goodput.write(
          root.putObject("goodput"), in.sent(), in.ok(), in.durationSeconds(), in.generates());
    }

    // The token lengths asked for and received, over the successful requests.
    m.lengths.write(root.putObject("lengths"));

    ObjectNode phases = root.putObject("phases");
    for (String name : PhaseStats.NAMES) {
      if (!in.applicable(name)) {
        phases.putNull(name);
        continue;
      }
      PhaseStats.Summary s = m.stats.summary(name);
      ObjectNode p = phases.putObject(name);
      p.put("count", s.count());
      num(p, "p50_ms", s.p50());
      num(p, "p95_ms", s.p95());
      num(p, "p99_ms", s.p99());
      num(p, "max_ms", s.max());
      p.put("negative", m.stats.negativeCount(name));
    }
    if (!in.notApplicable().isEmpty()) {
      ObjectNode na = root.putObject("not_applicable");
      ArrayNode names = na.putArray("phases");
      in.notApplicable().forEach(names::add);
      na.put("note", in.api().notApplicableReason() + "; these phases are null, never zero");
    }
    ObjectNode negative = root.putObject("negative_envelopes");
    negative.put("network_envelope", m.stats.negativeCount("network_envelope"));
    if (in.applicable("ttft_envelope")) {
      negative.put("ttft_envelope", m.stats.negativeCount("ttft_envelope"));
    } else {
      negative.putNull("ttft_envelope");
    }
    negative.put(
        "note",
        "a negative envelope is a boundary, unit or join error; kept in every quantile, not"
            + " clipped");

    ArrayNode budgets = root.putArray("budgets");
    for (BudgetResult b : in.budgets()) {
      ObjectNode o = budgets.addObject();
      o.put("name", b.name());
      o.put("phase", b.phase());
      num(o, "limit_ms", b.limitMs());
      num(o, "observed_ms", b.observedMs());
      if (!b.applicable()) {
        // Neither held nor breached: the run's API has no such phase.
        o.putNull("breached");
        o.put("not_applicable", b.notApplicable());
        continue;
      }
      o.put("breached", b.breached());
      if (b.counts() != null) {
        // Exact, as the proxy's /admin/stats: the share of values above the limit.
        num(o, "over_limit_share", b.counts().overLimitShare());
        o.put("at_or_below", b.counts().atOrBelow());
        o.put("count", b.counts().total());
      }
    }

    ObjectNode conditions = root.putObject("conditions");
    for (Map.Entry<String, Object> e : in.conditions().entrySet()) {
      JsonNode value;
      try {
        value = MAPPER.valueToTree(e.getValue());
      } catch (IllegalArgumentException ex) {
        value = JsonNodeFactory.instance.textNode(String.valueOf(e.getValue()));
      }
      conditions.set(e.getKey(), value);
    }

    ArrayNode steps = root.putArray("steps");
    for (ReportModel.Step s : m.steps) {
      ObjectNode o = steps.addObject();
      o.put("index", s.info().index());
      num(o, "offered_rate", s.info().offeredRate() < 0 ? Double.NaN : s.info().offeredRate());
      o.put("concurrency", s.info().concurrency());
      num(o, "achieved_rate", s.achievedRate());
      num(o, "ok_rate", s.okRate());
      num(o, "duration_s", s.durationSeconds());
      o.put("sent", s.info().sent());
      o.put("finished", s.finished());
      o.put("ok", s.ok());
      o.put("dropped", s.info().dropped());
      num(o, "join_coverage", s.stats().joinCoverage());
      ObjectNode ph = o.putObject("phases");
      for (String name : PhaseStats.NAMES) {
        PhaseStats.Summary sum = s.stats().summary(name);
        if (sum.count() == 0 || !in.applicable(name)) {
          continue; // itl is only known for the whole run
        }
        ObjectNode p = ph.putObject(name);
        p.put("count", sum.count());
        num(p, "p50_ms", sum.p50());
        num(p, "p95_ms", sum.p95());
      }
    }

    turns(root, m);

    ArrayNode slowest = root.putArray("slowest");
    for (SlowRequest r : m.slowest) {
      ObjectNode o = slowest.addObject();
      o.put("seq", r.seq());
      o.put("trace_id", r.traceId());
      o.put("step", r.step());
      o.put("joined", r.joined());
      num(o, "client_total_ms", r.clientTotalMs());
      num(o, "server_root_ms", r.serverRootMs());
      for (SlowRequest.Part part : r.parts()) {
        num(o, part.name() + "_ms", part.ms());
      }
      num(o, "residual_ms", r.residualMs());
    }

    ObjectNode definitions = root.putObject("definitions");
    definitions.put("note", Definitions.NOTE);
    Definitions.TERMS.forEach(definitions::put);
    return (ObjectNode) nullNonFinite(root);
  }

  /**
   * {@code turns}: one object per turn index of the requests of sessions, the turns after {@value
   * TurnStats#TURN_ROWS} in one ({@code and_later}), null when no request belonged to a session;
   * {@code sessions}: what a {@code --sessions} run's sessions did, null for any other run.
   */
  private static void turns(ObjectNode root, ReportModel m) {
    if (m.turns.isEmpty()) {
      root.putNull("turns");
    } else {
      ArrayNode turns = root.putArray("turns");
      for (TurnStats.Row r : m.turns.rows()) {
        ObjectNode o = turns.addObject();
        o.put("turn", r.turn());
        if (r.andLater()) {
          o.put("and_later", true);
        }
        o.put("finished", r.finished());
        o.put("ok", r.ok());
        ObjectNode ttft = o.putObject("client_ttft_ms");
        ttft.put("count", r.ttftCount());
        num(ttft, "p50", r.ttftP50Ms());
        num(ttft, "p95", r.ttftP95Ms());
        num(ttft, "p99", r.ttftP99Ms());
        num(ttft, "mean", r.ttftMeanMs());
        num(o, "prompt_tokens_mean", r.promptTokensMean());
      }
    }
    io.phasemeter.load.schedule.Sessions.Counts c = m.in.sessions();
    if (c == null) {
      root.putNull("sessions");
      return;
    }
    ObjectNode s = root.putObject("sessions");
    s.put("started", c.started());
    s.put("completed", c.completed());
    s.put("cut", c.cut());
    s.put("at_max_tokens", c.atMaxTokens());
    s.put("ended_by_duration", c.endedByDuration());
    s.put("stopped_at_deadline", c.stoppedAtDeadline());
    s.put("turns_not_sent", c.turnsNotSent());
    s.put("answers_truncated", c.answersTruncated());
    s.put("client_errors", c.clientErrors());
  }

  /**
   * {@code join.replicas}: each proxy replica's part; {@code joined} includes {@code fetched}, and
   * their sum over replicas is {@code join.joined}.
   */
  static void replicas(ArrayNode to, java.util.List<ReplicaCounts> replicas) {
    for (ReplicaCounts r : replicas) {
      ObjectNode o = to.addObject();
      o.put("replica", r.replica());
      o.put("joined", r.joined());
      o.put("fetched", r.fetched());
      num(o, "share", r.share());
      o.put("feed_reconnects", r.feedReconnects());
      o.put("records_missed", r.recordsMissed());
      o.put("state", r.state());
    }
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }

  /**
   * {@code client_floor}: the client's own floor measured before the run (its conditions' {@code
   * client_floor_*}), with the warm-up that preceded it; null when it was not measured.
   */
  private static void clientFloor(ObjectNode root, Map<String, Object> c) {
    if (!(c.get("client_floor_requests") instanceof Number n)) {
      root.putNull("client_floor");
      return;
    }
    ObjectNode f = root.putObject("client_floor");
    for (String k : new String[] {"ttft_ms", "connect_ms", "chunk_ms", "took_ms"}) {
      Object v = c.get("client_floor_" + k);
      num(f, k, v instanceof Number d ? d.doubleValue() : Double.NaN);
    }
    f.put("requests", n.longValue());
    f.put("endpoint", "in-process, loopback");
    Object warm = c.get("warmup_requests");
    f.put("warmup_requests", warm instanceof Number w ? w.longValue() : 0);
    Object target = c.get("warmup_target");
    f.put("warmup_target", target == null ? null : target.toString());
    // The floor's own warm-up to the client's endpoint, when nothing else warmed the client.
    Object floorWarm = c.get("client_floor_warmup_requests");
    f.put("floor_warmup_requests", floorWarm instanceof Number w ? w.longValue() : 0);
  }

  /** NaN and infinities anywhere (conditions included) become null: JSON has no NaN. */
  private static JsonNode nullNonFinite(JsonNode node) {
    if (node.isFloatingPointNumber() && !Double.isFinite(node.doubleValue())) {
      return JsonNodeFactory.instance.nullNode();
    }
    if (node.isObject()) {
      ObjectNode o = (ObjectNode) node;
      for (Map.Entry<String, JsonNode> e : o.properties()) {
        e.setValue(nullNonFinite(e.getValue()));
      }
    } else if (node.isArray()) {
      ArrayNode a = (ArrayNode) node;
      for (int i = 0; i < a.size(); i++) {
        a.set(i, nullNonFinite(a.get(i)));
      }
    }
    return node;
  }
}
