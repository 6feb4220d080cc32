package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.ns;
import static io.phasemeter.load.report.Fixtures.traceId;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.core.slo.Verdict;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.workload.Api;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Goodput's verdict on hand-made requests: the figures known exactly, no run. */
class GoodputTest {

  private static Goodput slo(String text) {
    return new Goodput(Objectives.parse("--slo", text), Goodput.FLAG);
  }

  private static Goodput file(String text) {
    return new Goodput(Objectives.parse("slo_ms", text), "budgets: chat");
  }

  /** A request that succeeded: total and TTFT in ms, its TPOT (-1: none) and usage tokens. */
  private static ClientResult ok(
      double totalMs, double ttftMs, long tpotNanos, long usageTokens, int maxTokens) {
    return new ClientResult(
        1,
        traceId(1),
        "1k",
        0,
        0,
        ns(0.1),
        ns(0.5),
        ns(ttftMs * 0.9),
        ns(ttftMs),
        ns(totalMs),
        tpotNanos,
        0,
        200,
        ErrorClass.NONE,
        null,
        16,
        maxTokens,
        16,
        usageTokens,
        null);
  }

  private static List<String> keys(List<Objective> objectives) {
    return objectives.stream().map(Objective::key).toList();
  }

  @Test
  void withoutATpotAndMoreThanOneTokenTpotIsUnjudgedNotMet() {
    // A response not streamed as SSE, or every token in one chunk: no TPOT, 100 tokens by usage.
    Verdict v = slo("tpot=50ms").judge(new Pair(ok(100, 100, -1, 100, 100), null));
    assertThat(v.good()).isFalse();
    assertThat(v.firstMissed()).isEqualTo("tpot");
    assertThat(keys(v.unjudged())).containsExactly("tpot");
    assertThat(v.missed()).isEmpty();
    // No usage: max_tokens above 1 says nothing about how many came.
    assertThat(slo("tpot=50ms").judge(new Pair(ok(100, 100, -1, -1, 100), null)).good()).isFalse();
  }

  @Test
  void atMostOneTokenMeetsTpot() {
    assertThat(slo("tpot=1").judge(new Pair(ok(100, 100, -1, 1, 100), null)).good()).isTrue();
    assertThat(slo("tpot=1").judge(new Pair(ok(100, 100, -1, 0, 100), null)).good()).isTrue();
    // No usage, but max_tokens 1: at most one token.
    assertThat(slo("tpot=1").judge(new Pair(ok(100, 100, -1, -1, 1), null)).good()).isTrue();
    // A TPOT is judged as measured.
    assertThat(slo("tpot=1").judge(new Pair(ok(100, 10, ns(2), 50, 50), null)).good()).isFalse();
    assertThat(slo("tpot=2").judge(new Pair(ok(100, 10, ns(2), 50, 50), null)).good()).isTrue();
  }

  @Test
  void anUnjoinedRequestIsUnjudgedOnTheProxysFiguresAndMissesInTheOrderGiven() {
    Pair shortOne = new Pair(ok(10, 5, ns(1), 2, 2), null);
    Pair longOne = new Pair(ok(1_200, 5, ns(10), 120, 120), null);
    Goodput e2elFirst = slo("e2el=600ms,queue=1s");
    Verdict s = e2elFirst.judge(shortOne);
    assertThat(s.good()).isFalse();
    assertThat(s.firstMissed()).isEqualTo("queue");
    assertThat(keys(s.unjudged())).containsExactly("queue");
    assertThat(s.missed()).isEmpty();
    // A long request not joined misses client_total first: e2el comes before queue.
    Verdict l = e2elFirst.judge(longOne);
    assertThat(l.firstMissed()).isEqualTo("client_total");
    assertThat(keys(l.missed())).containsExactly("client_total");
    assertThat(keys(l.unjudged())).containsExactly("queue");
    // The other order: queue first, unjudged.
    Verdict q = slo("queue=1s,e2el=600ms").judge(longOne);
    assertThat(q.firstMissed()).isEqualTo("queue");
    assertThat(keys(q.missed())).containsExactly("client_total");
    assertThat(keys(q.unjudged())).containsExactly("queue");
    // Joined, the proxy's queue is judged: 10 % of the root here.
    Pair joined = Fixtures.joined(1, 0, 500, 2);
    assertThat(e2elFirst.judge(joined).good()).isTrue();
    assertThat(slo("e2el=600ms,queue=10ms").judge(joined).firstMissed()).isEqualTo("queue");
  }

  @Test
  void aFailureIsNeverGoodAndNeedsNoFigure() {
    Pair failed =
        new Pair(Fixtures.client(1, 0, 0, 5, 1, ErrorClass.HTTP_5XX), Fixtures.server(1, 4, 1, 2));
    Verdict v = slo("e2el=10s").judge(failed);
    assertThat(v.good()).isFalse();
    assertThat(v.firstMissed()).isEqualTo(Verdict.ERROR);
  }

  @Test
  void judgedCountsRequestsWithEveryFigureAndFailures() {
    Goodput g = slo("e2el=600ms,queue=1s");
    GoodputCounts c =
        GoodputCounts.of(
            g,
            List.of(
                Fixtures.joined(1, 0, 100, 1), // good
                new Pair(ok(10, 5, ns(1), 2, 2), null), // unjudged on queue
                new Pair(Fixtures.client(3, 0, 0, 5, 1, ErrorClass.TIMEOUT), null)));
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    // One more sent that never finished: failed, and judged (a failure needs no figure).
    c.write(o, 4, 2, 1.0, true);
    assertThat(o.path("good").asLong()).isEqualTo(1);
    assertThat(o.path("failed").asLong()).isEqualTo(2);
    assertThat(o.path("judged").asLong()).isEqualTo(3);
    assertThat(o.path("unjudged").path("queue").asLong()).isEqualTo(1);
    assertThat(c.unjudgedText())
        .isEqualTo("; 1 succeeded but unjudged (a figure absent: not good)");
  }

  @Test
  void anObjectiveNoRequestCouldBeJudgedOnIsWarnedOfOnce() {
    GoodputCounts c =
        GoodputCounts.of(
            slo("e2el=10s,engine_queue=1s"),
            List.of(Fixtures.joined(1, 0, 100, 1), Fixtures.joined(2, 0, 100, 1)));
    assertThat(c.unjudgedText())
        .isEqualTo(
            "; 2 succeeded but unjudged (a figure absent: not good); warning: no request could"
                + " be judged on engine_queue (the engine's phases need the proxy's engine spans:"
                + " telemetry.engine_spans.enabled, and a pool that is not external)");
  }

  @Test
  void theCommandLinesObjectivesAreCheckedTheFilesDroppedWhenTheyCannotBeJudged() {
    Map<String, String> skipped = new LinkedHashMap<>();
    // --slo: refused.
    assertThatThrownBy(
            () ->
                slo("ttft=500,queue=250").forRun(Api.EMBEDDINGS, false, false, false, skipped::put))
        .hasMessageStartingWith("--slo: client_ttft: not applicable to --api embeddings");
    assertThatThrownBy(
            () -> slo("e2el=1s,queue=250").forRun(Api.CHAT, true, true, true, skipped::put))
        .hasMessageStartingWith(
            "--slo: queue: a figure of the proxy's record, joined per request: with"
                + " --join-sampled-only only the sampled requests are joined");
    assertThat(skipped).isEmpty();
    // A budget's slo_ms: dropped, with why.
    Goodput f = file("client_ttft=500,queue=250");
    Goodput kept = f.forRun(Api.CHAT, true, false, false, skipped::put);
    assertThat(kept.objectives().keys()).containsExactly("client_ttft");
    assertThat(kept.source()).isEqualTo("budgets: chat");
    assertThat(skipped.keySet()).containsExactly("queue");
    skipped.clear();
    assertThat(f.forRun(Api.EMBEDDINGS, false, false, false, skipped::put)).isNull();
    assertThat(skipped.keySet()).containsExactly("client_ttft", "queue");
    assertThat(skipped.get("client_ttft")).startsWith("not applicable to --api embeddings");
    skipped.clear();
    assertThat(f.forRun(Api.CHAT, true, true, false, skipped::put)).isSameAs(f);
    assertThat(skipped).isEmpty();
  }
}
