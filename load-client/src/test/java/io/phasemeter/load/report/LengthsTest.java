package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.ns;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.schedule.StepInfo;
import io.phasemeter.load.workload.Api;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * summary.json's {@code lengths} and the report's Lengths table against injected truth: the lengths
 * asked for and received over the successful requests only, exact nearest-rank quantiles.
 */
class LengthsTest {

  private static ClientResult result(
      long seq,
      ErrorClass error,
      int promptTokens,
      int maxTokens,
      long usagePrompt,
      long usageCompletion) {
    return new ClientResult(
        seq,
        Fixtures.traceId(seq),
        "b",
        0,
        ns(seq),
        ns(seq),
        ns(0.1),
        ns(1),
        ns(2),
        ns(10),
        ns(1),
        3,
        error == ErrorClass.NONE ? 200 : 503,
        error,
        error == ErrorClass.NONE ? null : "HTTP 503",
        promptTokens,
        maxTokens,
        usagePrompt,
        usageCompletion,
        null);
  }

  /**
   * 100 successful requests: text prompts (no exact length) of k + 1000 tokens reported, asking k
   * tokens and getting them; 7 failures with other lengths that must not count.
   */
  private static List<Pair> pairs() {
    List<Pair> pairs = new ArrayList<>();
    for (int k = 1; k <= 100; k++) {
      pairs.add(new Pair(result(k, ErrorClass.NONE, -1, k, k + 1000, k), null));
    }
    for (int k = 101; k <= 107; k++) {
      pairs.add(new Pair(result(k, ErrorClass.HTTP_5XX, 5000, 9999, -1, -1), null));
    }
    return pairs;
  }

  @Test
  void statisticsAreExactNearestRankOverTheSuccessfulRequests() {
    Lengths l = Lengths.of(pairs(), true);
    assertThat(l.promptAsked()).isNull();
    assertThat(l.promptReceived()).isEqualTo(new LengthStats(100, 1050.5, 1050, 1090, 1099, 1100));
    assertThat(l.completionAsked()).isEqualTo(new LengthStats(100, 50.5, 50, 90, 99, 100));
    assertThat(l.completionReceived()).isEqualTo(l.completionAsked());
  }

  @Test
  void exactPromptsAreAskedAndAnApiThatGeneratesNothingHasNoCompletion() {
    List<Pair> pairs = new ArrayList<>();
    int[] prompts = {7, 3, 3, 9, 1};
    for (int i = 0; i < prompts.length; i++) {
      pairs.add(new Pair(result(i + 1, ErrorClass.NONE, prompts[i], 0, prompts[i], -1), null));
    }
    Lengths l = Lengths.of(pairs, false);
    assertThat(l.promptAsked()).isEqualTo(new LengthStats(5, 4.6, 3, 9, 9, 9));
    assertThat(l.promptReceived()).isEqualTo(l.promptAsked());
    assertThat(l.completionAsked()).isNull();
    assertThat(l.completionReceived()).isNull();
  }

  @Test
  void oneValueIsEveryQuantileAndNoneIsNull() {
    assertThat(LengthStats.of(new long[] {42})).isEqualTo(new LengthStats(1, 42, 42, 42, 42, 42));
    assertThat(LengthStats.of(new long[0])).isNull();
    assertThat(LengthStats.of(new int[] {4, 1, 2, 3}))
        .isEqualTo(new LengthStats(4, 2.5, 2, 4, 4, 4));
  }

  @Test
  void summaryJsonAndTheReportCarryThem() {
    List<Pair> pairs = pairs();
    long start = 1_000_000_000L;
    ReportInput in =
        new ReportInput(
            pairs,
            List.of(new StepInfo(0, 10, 0, start, start + ns(10_000), 107, 0)),
            start,
            start + ns(10_000),
            Map.of("model", "m"),
            107,
            100,
            7,
            0,
            0,
            10.7,
            List.of(),
            null,
            null,
            Api.COMPLETIONS);
    ReportModel m = new ReportModel(in);
    JsonNode lengths = SummaryJson.build(m).get("lengths");
    assertThat(lengths.get("prompt_tokens").get("asked").isNull()).isTrue();
    JsonNode received = lengths.get("prompt_tokens").get("received");
    assertThat(received.get("count").asLong()).isEqualTo(100);
    assertThat(received.get("mean").asDouble()).isEqualTo(1050.5);
    assertThat(received.get("p50").asLong()).isEqualTo(1050);
    assertThat(received.get("p90").asLong()).isEqualTo(1090);
    assertThat(received.get("p99").asLong()).isEqualTo(1099);
    assertThat(received.get("max").asLong()).isEqualTo(1100);
    JsonNode asked = lengths.get("completion_tokens").get("asked");
    assertThat(asked.get("p99").asLong()).isEqualTo(99);
    assertThat(lengths.get("completion_tokens").get("received")).isEqualTo(asked);

    String html = HtmlReport.render(m);
    assertThat(html).contains("<section id=\"lengths\"><h2>Lengths</h2>");
    assertThat(html)
        .contains(
            "<td class=\"l\">prompt, received</td><td>100</td><td>1050.5</td><td>1050</td>"
                + "<td>1090</td><td>1099</td><td>1100</td>");
    assertThat(html).contains("<td class=\"l\">prompt, asked</td><td>0</td><td>\u2013</td>");
  }
}
