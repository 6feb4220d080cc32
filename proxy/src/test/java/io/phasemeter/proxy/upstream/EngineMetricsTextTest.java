package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The three gauges read from vLLM's {@code /metrics} as vLLM writes it: the V1 engine (labels
 * {@code engine} and {@code model_name}, {@code vllm:kv_cache_usage_perc}), the V0 engine before it
 * ({@code model_name} only, {@code vllm:gpu_cache_usage_perc} beside {@code cpu_cache_usage_perc}),
 * a data-parallel server with two engines, and what is not vLLM's.
 */
class EngineMetricsTextTest {
  /** A V1-engine scrape, abridged: process and Python series, HELP/TYPE, histograms, info. */
  static final String V1 =
      """
      # HELP python_gc_objects_collected_total Objects collected during gc
      # TYPE python_gc_objects_collected_total counter
      python_gc_objects_collected_total{generation="0"} 12847.0
      # HELP process_resident_memory_bytes Resident memory size in bytes.
      # TYPE process_resident_memory_bytes gauge
      process_resident_memory_bytes 1.873330176e+09
      # HELP vllm:num_requests_running Number of requests in model execution batches.
      # TYPE vllm:num_requests_running gauge
      vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 5.0
      # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
      # TYPE vllm:num_requests_waiting gauge
      vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 3.0
      # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
      # TYPE vllm:kv_cache_usage_perc gauge
      vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.4213
      # HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
      # TYPE vllm:prefix_cache_queries_total counter
      vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 10432.0
      # HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
      # TYPE vllm:num_preemptions_total counter
      vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
      # HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
      # TYPE vllm:time_to_first_token_seconds histogram
      vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
      vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen2.5-7B-Instruct"} 212.0
      vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 212.0
      vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 9.73
      # HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
      # TYPE vllm:cache_config_info gauge
      vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27053"} 1.0
      """;

  /** A V0-engine scrape (vLLM 0.6): GPU and CPU cache gauges, swapped requests, no engine label. */
  static final String V0 =
      """
      # HELP vllm:num_requests_running Number of requests currently running on GPU.
      # TYPE vllm:num_requests_running gauge
      vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
      # HELP vllm:num_requests_swapped Number of requests swapped to CPU.
      # TYPE vllm:num_requests_swapped gauge
      vllm:num_requests_swapped{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
      # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
      # TYPE vllm:num_requests_waiting gauge
      vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
      # HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
      # TYPE vllm:gpu_cache_usage_perc gauge
      vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.87
      # HELP vllm:cpu_cache_usage_perc CPU KV-cache usage. 1 means 100 percent usage.
      # TYPE vllm:cpu_cache_usage_perc gauge
      vllm:cpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
      """;

  private static EngineMetricsText.Reading parse(String text) {
    return EngineMetricsText.parse(text.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void readsTheV1EnginesGaugesAndSkipsEverythingElse() {
    EngineMetricsText.Reading r = parse(V1);
    assertThat(r.waiting()).isEqualTo(3.0);
    assertThat(r.running()).isEqualTo(5.0);
    assertThat(r.kvCacheUsage()).isEqualTo(0.4213);
  }

  @Test
  void readsTheOlderGpuCacheGaugeAndNotTheCpuOne() {
    EngineMetricsText.Reading r = parse(V0);
    assertThat(r.waiting()).isZero();
    assertThat(r.running()).isEqualTo(12.0);
    assertThat(r.kvCacheUsage()).isEqualTo(0.87);
  }

  @Test
  void sumsRequestsOverEnginesAndTakesTheFullestCache() {
    String dp =
        """
        vllm:num_requests_running{engine="0",model_name="m"} 4.0
        vllm:num_requests_running{engine="1",model_name="m"} 6.0
        vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
        vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
        vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
        vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
        """;
    EngineMetricsText.Reading r = parse(dp);
    assertThat(r.running()).isEqualTo(10.0);
    assertThat(r.waiting()).isEqualTo(3.0);
    assertThat(r.kvCacheUsage()).isEqualTo(0.75);
  }

  @Test
  void theNewerKvGaugeWinsOverTheOlderWhenBothAreThere() {
    String both =
        "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
            + "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.2\n";
    assertThat(parse(both).kvCacheUsage()).isEqualTo(0.2);
  }

  @Test
  void labelValuesWithBracesAndQuotesCrlfTimestampsAndExponents() {
    String odd =
        "vllm:num_requests_running{model_name=\"a}b\\\"c\",engine=\"0\"} 2e0 1712345678000\r\n"
            + "vllm:num_requests_waiting{model_name=\"x\"}\t1.5E1\r\n"
            + "vllm:kv_cache_usage_perc{model_name=\"x\"} 1.0000001\r\n"
            + "# EOF\r\n";
    EngineMetricsText.Reading r = parse(odd);
    assertThat(r.running()).isEqualTo(2.0);
    assertThat(r.waiting()).isEqualTo(15.0);
    assertThat(r.kvCacheUsage()).as("a share past 1 is clamped").isEqualTo(1.0);
  }

  @Test
  void withoutAKvGaugeTheUsageIsUnknown() {
    EngineMetricsText.Reading r =
        parse("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n");
    assertThat(r.kvCacheUsage()).isNaN();
  }

  @Test
  void namesThatOnlyStartLikeTheGaugesAreOtherMetrics() {
    String other =
        """
        vllm:num_requests_waiting_by_priority{priority="0"} 9.0
        vllm:num_requests_running_total 9.0
        vllm:num_requests_running 1.0
        vllm:num_requests_waiting 0.0
        """;
    EngineMetricsText.Reading r = parse(other);
    assertThat(r.running()).isEqualTo(1.0);
    assertThat(r.waiting()).isZero();
  }

  @Test
  void anotherEnginesMetricsAreNotVllms() {
    String llamaCpp =
        """
        # HELP llamacpp:requests_processing Number of requests processing.
        # TYPE llamacpp:requests_processing gauge
        llamacpp:requests_processing 1
        llamacpp:requests_deferred 0
        """;
    assertThatThrownBy(() -> parse(llamaCpp))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a vLLM engine's metrics");
    assertThatThrownBy(() -> parse("vllm:num_requests_running 1\n"))
        .hasMessageContaining("vllm:num_requests_waiting");
    assertThatThrownBy(() -> parse("")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aValueThatIsNotACountIsRefused() {
    assertThatThrownBy(() -> parse("vllm:num_requests_running one\nvllm:num_requests_waiting 0\n"))
        .hasMessageContaining("not a number");
    assertThatThrownBy(() -> parse("vllm:num_requests_running -1\nvllm:num_requests_waiting 0\n"))
        .hasMessageContaining("not a count");
    assertThatThrownBy(() -> parse("vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n"))
        .hasMessageContaining("not a count");
    assertThatThrownBy(() -> parse("vllm:num_requests_running{model_name=\"m\" 1\n"))
        .hasMessageContaining("not closed");
  }

  @Test
  void theSimulatorsOwnScrapeReads() {
    // What phasemeter sim serves (prometheus-metrics text writer), idle: every gauge at zero.
    String sim =
        """
        # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
        # TYPE vllm:kv_cache_usage_perc gauge
        vllm:kv_cache_usage_perc{model_name="sim-llama"} 0.0
        # HELP vllm:num_requests_running Number of requests in model execution batches.
        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{model_name="sim-llama"} 0.0
        # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
        # TYPE vllm:num_requests_waiting gauge
        vllm:num_requests_waiting{model_name="sim-llama"} 0.0
        """;
    assertThat(parse(sim)).isEqualTo(new EngineMetricsText.Reading(0, 0, 0));
  }
}
