package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

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
    return new ClientResult(
        1,
        "0".repeat(32),
        "b",
        0,
        0,
        0,
        0,
        ttftMs * 1_000_000,
        ttftMs * 1_000_000,
        ttftMs * 1_000_000 + 5,
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

  @Test
  void eachTurnHasItsCountsTtftAndPromptLengthFromItsSuccessfulRequests() {
    TurnStats t = new TurnStats();
    for (int ms = 1; ms <= 100; ms++) {
      t.add(result(1, true, ms, 100));
    }
    t.add(result(2, true, 40, 300));
    t.add(result(2, true, 60, 500));
    t.add(result(2, false, 5_000, -1)); // a failure counts as sent, nothing else
    t.add(result(0, true, 1, 1)); // outside any session
    List<TurnStats.Row> rows = t.rows();
    assertThat(rows).hasSize(2);
    TurnStats.Row one = rows.get(0);
    assertThat(one.turn()).isEqualTo(1);
    assertThat(one.sent()).isEqualTo(100);
    assertThat(one.ok()).isEqualTo(100);
    assertThat(one.ttftP50Ms()).isCloseTo(50, within(0.1));
    assertThat(one.ttftP95Ms()).isCloseTo(95, within(0.1));
    assertThat(one.ttftP99Ms()).isCloseTo(99, within(0.1));
    assertThat(one.ttftMeanMs()).isEqualTo(50.5);
    assertThat(one.promptTokensMean()).isEqualTo(100);
    TurnStats.Row two = rows.get(1);
    assertThat(two.sent()).isEqualTo(3);
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
    assertThat(turns.get(1).get("sent").asLong()).isEqualTo(1);
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
    assertThat(Files.readString(dir.resolve("report.html")))
        .contains("<h2>Turns</h2>")
        .contains("Sessions: 2 started, 1 completed, 1 cut by a failed turn");
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
    t.add(result(0, true, 3, 3));
    assertThat(t.isEmpty()).isTrue();
    StringWriter out = new StringWriter();
    t.print(new PrintWriter(out));
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void sixtyFourTurnsHaveARowEachAndLaterTurnsShareOne() {
    TurnStats atLimit = new TurnStats();
    for (int turn = 1; turn <= TurnStats.MAX_TURNS; turn++) {
      atLimit.add(result(turn, true, turn, turn));
    }
    assertThat(atLimit.rows()).hasSize(64).noneMatch(TurnStats.Row::andLater);
    assertThat(atLimit.rows().get(63).label()).isEqualTo("64");

    TurnStats past = new TurnStats();
    for (int turn = 1; turn <= 1_000; turn++) {
      past.add(result(turn, true, turn, turn));
    }
    List<TurnStats.Row> rows = past.rows();
    assertThat(rows).hasSize(65);
    TurnStats.Row later = rows.get(64);
    assertThat(later.andLater()).isTrue();
    assertThat(later.turn()).isEqualTo(65);
    assertThat(later.label()).isEqualTo("> 64");
    assertThat(later.sent()).isEqualTo(1_000 - 64);
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
