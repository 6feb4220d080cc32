package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.withinPercentage;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.schedule.Sessions;
import io.phasemeter.load.schedule.StepInfo;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TurnStatsTest {

  private static ClientResult result(int turn, boolean ok, long ttftMs, long usagePrompt) {
    return result(turn, ok, ttftMs, usagePrompt, 0);
  }

  /** With {@code extraNanos} on the TTFT and the total. */
  private static ClientResult result(
      int turn, boolean ok, long ttftMs, long usagePrompt, long extraNanos) {
    return new ClientResult(
        1,
        "0".repeat(32),
        "b",
        0,
        0,
        0,
        0,
        ttftMs * 1_000_000 + extraNanos,
        ttftMs * 1_000_000 + extraNanos,
        ttftMs * 1_000_000 + extraNanos + 5,
        -1,
        0,
        ok ? 200 : 500,
        ok ? ErrorClass.NONE : ErrorClass.HTTP_5XX,
        ok ? null : "HTTP 500",
        -1,
        8,
        usagePrompt,
        ok ? 8 : -1,
        null,
        false,
        turn,
        turn == 0 ? null : "r-s1");
  }

  private static Pair pair(int turn, boolean ok, long ttftMs, long usagePrompt) {
    return new Pair(result(turn, ok, ttftMs, usagePrompt), null);
  }

  @Test
  void eachTurnHasItsCountsTtftAndPromptLengthFromItsSuccessfulRequests() {
    TurnStats t = new TurnStats();
    for (int ms = 1; ms <= 100; ms++) {
      t.add(pair(1, true, ms, 100));
    }
    t.add(pair(2, true, 40, 300));
    t.add(pair(2, true, 60, 500));
    t.add(pair(2, false, 5_000, -1)); // a failure counts as sent, nothing else
    t.add(pair(0, true, 1, 1)); // outside any session
    List<TurnStats.Row> rows = t.rows();
    assertThat(rows).hasSize(2);
    TurnStats.Row one = rows.get(0);
    assertThat(one.turn()).isEqualTo(1);
    assertThat(one.finished()).isEqualTo(100);
    assertThat(one.ok()).isEqualTo(100);
    // PhaseStats' histograms: within 1 part in 128 of the value at the rank.
    assertThat(one.ttftP50Ms()).isCloseTo(50, withinPercentage(1));
    assertThat(one.ttftP95Ms()).isCloseTo(95, withinPercentage(1));
    assertThat(one.ttftP99Ms()).isCloseTo(99, withinPercentage(1));
    assertThat(one.ttftMeanMs()).isEqualTo(50.5);
    assertThat(one.promptTokensMean()).isEqualTo(100);
    TurnStats.Row two = rows.get(1);
    assertThat(two.finished()).isEqualTo(3);
    assertThat(two.ok()).isEqualTo(2);
    assertThat(two.ttftCount()).isEqualTo(2);
    assertThat(two.ttftMeanMs()).isEqualTo(50);
    assertThat(two.promptTokensMean()).isEqualTo(400);
  }

  @TempDir Path dir;

  private JsonNode write(List<ClientResult> results, Sessions.Counts sessions) throws Exception {
    List<Pair> pairs = results.stream().map(r -> new Pair(r, null)).toList();
    long ok = results.stream().filter(ClientResult::ok).count();
    ReportWriter.write(
        dir,
        new ReportInput(
            pairs,
            List.of(new StepInfo(0, -1, 2, 0, 1_000_000_000L, results.size(), 0)),
            0,
            1_000_000_000L,
            Map.of("model", "m"),
            results.size(),
            ok,
            results.size() - ok,
            0,
            0,
            results.size(),
            List.of(),
            null,
            null,
            null,
            null,
            null,
            sessions));
    return new ObjectMapper().readTree(dir.resolve("summary.json").toFile());
  }

  @Test
  void summaryAndReportGiveTheTurnsAndTheSessions() throws Exception {
    JsonNode s =
        write(
            List.of(result(1, true, 10, 100), result(1, true, 20, 100), result(2, false, 0, -1)),
            new Sessions.Counts(2, 1, 1, 0, 0, 0, 1, 3, 0));
    JsonNode turns = s.get("turns");
    assertThat(turns.size()).isEqualTo(2);
    assertThat(turns.get(0).get("turn").asInt()).isEqualTo(1);
    assertThat(turns.get(0).has("and_later")).isFalse();
    assertThat(turns.get(0).get("client_ttft_ms").get("mean").asDouble()).isEqualTo(15);
    assertThat(turns.get(0).get("prompt_tokens_mean").asDouble()).isEqualTo(100);
    assertThat(turns.get(1).get("finished").asLong()).isEqualTo(1);
    assertThat(turns.get(1).get("ok").asLong()).isZero();
    assertThat(turns.get(1).get("client_ttft_ms").get("p50").isNull()).isTrue();
    assertThat(turns.get(1).get("prompt_tokens_mean").isNull()).isTrue();
    JsonNode sessions = s.get("sessions");
    assertThat(sessions.get("started").asLong()).isEqualTo(2);
    assertThat(sessions.get("cut").asLong()).isEqualTo(1);
    assertThat(sessions.get("turns_not_sent").asLong()).isEqualTo(1);
    assertThat(sessions.get("stopped_at_deadline").asLong()).isZero();
    assertThat(sessions.get("answers_truncated").asLong()).isEqualTo(3);
    assertThat(sessions.get("client_errors").asLong()).isZero();
    assertThat(turns.get(0).has("sent")).isFalse();
    assertThat(turns.get(0).get("finished").asLong()).isEqualTo(2);
    assertThat(Files.readString(dir.resolve("report.html")))
        .contains("<h2>Turns</h2>")
        .contains("Sessions: 2 started, 1 completed, 1 cut by a failed turn");
  }

  @Test
  void aOneTurnRunsTurnOneQuantilesAreTheRunsClientTtft() throws Exception {
    List<ClientResult> results = new java.util.ArrayList<>();
    for (int i = 1; i <= 37; i++) {
      // Spread over three decades, off any bucket's edge.
      results.add(result(1, true, (long) (i * i * 0.73) + 1, 100, 123_457L * i));
    }
    JsonNode s = write(results, new Sessions.Counts(37, 37, 0, 0, 0, 0, 0, 0, 0));
    JsonNode turn = s.get("turns").get(0).get("client_ttft_ms");
    JsonNode run = s.get("phases").get("client_ttft");
    assertThat(turn.get("count").asLong()).isEqualTo(run.get("count").asLong()).isEqualTo(37);
    assertThat(turn.get("p50").asDouble()).isEqualTo(run.get("p50_ms").asDouble());
    assertThat(turn.get("p95").asDouble()).isEqualTo(run.get("p95_ms").asDouble());
    assertThat(turn.get("p99").asDouble()).isEqualTo(run.get("p99_ms").asDouble());
  }

  @Test
  void withoutSessionsBothAreNullAndTheReportHasNoTurns() throws Exception {
    JsonNode s = write(List.of(result(0, true, 10, 100)), null);
    assertThat(s.has("turns")).isTrue();
    assertThat(s.get("turns").isNull()).isTrue();
    assertThat(s.get("sessions").isNull()).isTrue();
    assertThat(Files.readString(dir.resolve("report.html"))).doesNotContain("<h2>Turns</h2>");
  }

  @Test
  void noRequestOfASessionNoRowsAndNoLines() {
    TurnStats t = new TurnStats();
    t.add(pair(0, true, 3, 3));
    assertThat(t.isEmpty()).isTrue();
    StringWriter out = new StringWriter();
    t.print(new PrintWriter(out));
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void sixtyFourTurnsHaveARowEachAndLaterTurnsShareOne() {
    TurnStats atLimit = new TurnStats();
    for (int turn = 1; turn <= TurnStats.TURN_ROWS; turn++) {
      atLimit.add(pair(turn, true, turn, turn));
    }
    assertThat(atLimit.rows()).hasSize(64).noneMatch(TurnStats.Row::andLater);
    assertThat(atLimit.rows().get(63).label()).isEqualTo("64");

    TurnStats past = new TurnStats();
    for (int turn = 1; turn <= 1_000; turn++) {
      past.add(pair(turn, true, turn, turn));
    }
    List<TurnStats.Row> rows = past.rows();
    assertThat(rows).hasSize(65);
    TurnStats.Row later = rows.get(64);
    assertThat(later.andLater()).isTrue();
    assertThat(later.turn()).isEqualTo(65);
    assertThat(later.label()).isEqualTo("> 64");
    assertThat(later.finished()).isEqualTo(1_000 - 64);
    assertThat(later.promptTokensMean()).isEqualTo((65 + 1_000) / 2.0);

    StringWriter out = new StringWriter();
    past.print(new PrintWriter(out));
    List<String> lines = out.toString().lines().toList();
    assertThat(lines).hasSize(2 + 65);
    assertThat(lines.get(2)).startsWith("  turn 1 ");
    assertThat(lines.get(65)).startsWith("  turn 64 ");
    assertThat(lines.get(66)).startsWith("  turn > 64 ").contains(" 936 ");
  }
}
