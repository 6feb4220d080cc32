package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Every budget limit is a bucket boundary of the histogram it judges, as /metrics prints it. */
class ProxyMetricsBudgetBucketsTest {
  private static final String YAML =
      """
      budgets:
        - name: chat
          quantile: 0.95
          window: 10m
          limits_ms: {queue: 250, gateway: 60, receive: 0.3, generation: 123.456, ttft: 1200,
                      total: 6000, tpot: 33.3, itl: 80.5, client_ttft: 77}
          max_error_rate: 0.01
          min_join_coverage: 0.9
        - name: batch
          quantile: 0.99
          window: 1h
          limits_ms: {queue: 320, generation: 123.456}
          max_error_rate: 0.01
          min_join_coverage: 0.9
      """;

  @Test
  void eachLimitIsAnLeOfItsOwnSeriesPrintedAsTheRulesPrintIt() {
    Budgets budgets = Budgets.parse(YAML, "test.yaml");
    try (ProxyMetrics metrics = ProxyMetrics.create(budgets.bucketLayout())) {
      RequestContext ctx = Traffic.request(200_000_000L, metrics);
      metrics.onInterTokenGap(ctx, 5_000_000L);

      Map<String, Long> queue =
          Traffic.buckets(metrics, "llm_phase_duration_seconds", "llm_phase=\"queue\"");
      Map<String, Long> receive =
          Traffic.buckets(metrics, "llm_phase_duration_seconds", "llm_phase=\"receive\"");
      Map<String, Long> write =
          Traffic.buckets(metrics, "llm_phase_duration_seconds", "llm_phase=\"write\"");
      // 250 ms is le="0.25" exactly; 320 ms is a GenAI boundary already and adds nothing.
      assertThat(queue).containsKeys("0.25", "0.32", "0.16");
      assertThat(queue.get("0.25")).isEqualTo(1);
      assertThat(queue.get("0.16")).isZero();
      assertThat(queue.keySet()).hasSize(write.size() + 1);
      // Per phase: the queue's limit is no boundary of receive, whose own limit is.
      assertThat(receive).doesNotContainKey("0.25").containsKey("3.0E-4");
      assertThat(receive.keySet()).hasSize(write.size() + 1);
      assertThat(Traffic.buckets(metrics, "llm_phase_duration_seconds", "llm_phase=\"gateway\""))
          .containsKey("0.06");
      assertThat(Traffic.buckets(metrics, "llm_phase_duration_seconds", "llm_phase=\"generation\""))
          .containsKey("0.123456")
          .hasSize(write.size() + 1);
      assertThat(Traffic.buckets(metrics, "gen_ai_server_time_to_first_token_seconds", ""))
          .containsKey("1.2");
      assertThat(
              Traffic.buckets(
                  metrics, "gen_ai_server_request_duration_seconds", "outcome=\"success\""))
          .containsKey("6.0");
      assertThat(Traffic.buckets(metrics, "gen_ai_server_time_per_output_token_seconds", ""))
          .containsKey("0.0333");
      assertThat(Traffic.buckets(metrics, "llm_inter_token_latency_seconds", ""))
          .containsKey("0.0805");

      // The rules name the same le text for every server-side limit.
      for (Budget b : budgets.budgets()) {
        for (BudgetPhase p : b.phases()) {
          if (!p.serverSide()) {
            continue;
          }
          String matcher = p.matcher().isEmpty() ? "" : p.matcher();
          assertThat(Traffic.buckets(metrics, p.metric(), matcher))
              .as("%s %s", b.name(), p.key())
              .containsKey(b.le(p));
          // The printed text itself, or (below 1 ms) a match of it and of Prometheus 3's text.
          String rule = AlertRules.shareAbove(b, p, b.window());
          if (b.le(p).contains("E")) {
            assertThat(rule).contains("le=~`" + b.le(p).replace(".", "\\.") + "|");
          } else {
            assertThat(rule).contains("le=\"" + b.le(p) + "\"");
          }
        }
      }
    }
  }

  @Test
  void withoutBudgetsTheBoundariesAreTheGenAiOnes() {
    try (ProxyMetrics plain = ProxyMetrics.create();
        ProxyMetrics budgeted =
            ProxyMetrics.create(Budgets.parse(YAML, "test.yaml").bucketLayout())) {
      Traffic.request(200_000_000L, plain);
      Traffic.request(200_000_000L, budgeted);
      Map<String, Long> before =
          Traffic.buckets(plain, "llm_phase_duration_seconds", "llm_phase=\"queue\"");
      assertThat(before).doesNotContainKey("0.25").containsKeys("0.16", "0.32");
      Map<String, Long> after =
          Traffic.buckets(budgeted, "llm_phase_duration_seconds", "llm_phase=\"queue\"");
      assertThat(after.keySet()).containsAll(before.keySet());
    }
  }
}
