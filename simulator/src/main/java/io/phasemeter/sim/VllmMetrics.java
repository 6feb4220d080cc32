package io.phasemeter.sim;

import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;

/**
 * The subset of vLLM's Prometheus metrics that dashboards and the proxy's tests look at, with
 * vLLM's names and its {@code model_name} label. One registry per simulator: two simulators in one
 * JVM never share series.
 */
final class VllmMetrics {
  /** vLLM's buckets for whole-request latencies (end to end, queue time). */
  private static final double[] REQUEST_BUCKETS = {
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0
  };

  static final String CONTENT_TYPE = PrometheusTextFormatWriter.CONTENT_TYPE;

  private final PrometheusRegistry registry = new PrometheusRegistry();
  private final Gauge running;
  private final Gauge waiting;
  private final Gauge kvCacheUsage;
  private final List<String> models;
  private final Counter promptTokens;
  private final Counter generationTokens;
  private final Counter requestSuccess;
  private final Counter prefixCacheQueries;
  private final Counter prefixCacheHits;
  private final Histogram ttft;
  private final Histogram e2e;
  private final Histogram tpot;
  private final Histogram itl;
  private final Histogram queueTime;

  VllmMetrics(List<String> models) {
    this.models = List.copyOf(models);
    running =
        Gauge.builder()
            .name("vllm:num_requests_running")
            .help("Number of requests in model execution batches.")
            .labelNames("model_name")
            .register(registry);
    waiting =
        Gauge.builder()
            .name("vllm:num_requests_waiting")
            .help("Number of requests waiting to be processed.")
            .labelNames("model_name")
            .register(registry);
    kvCacheUsage =
        Gauge.builder()
            .name("vllm:kv_cache_usage_perc")
            .help("KV-cache usage. 1 means 100 percent usage.")
            .labelNames("model_name")
            .register(registry);
    promptTokens =
        Counter.builder()
            .name("vllm:prompt_tokens_total")
            .help("Number of prefill tokens processed.")
            .labelNames("model_name")
            .register(registry);
    generationTokens =
        Counter.builder()
            .name("vllm:generation_tokens_total")
            .help("Number of generation tokens processed.")
            .labelNames("model_name")
            .register(registry);
    requestSuccess =
        Counter.builder()
            .name("vllm:request_success_total")
            .help("Count of finished requests by finish reason.")
            .labelNames("model_name", "finished_reason")
            .register(registry);
    // vLLM V1's prefix cache counters, in tokens (vLLM adds an engine label; the simulator is one).
    prefixCacheQueries =
        Counter.builder()
            .name("vllm:prefix_cache_queries_total")
            .help("Prefix cache queries, in terms of number of queried tokens.")
            .labelNames("model_name")
            .register(registry);
    prefixCacheHits =
        Counter.builder()
            .name("vllm:prefix_cache_hits_total")
            .help("Prefix cache hits, in terms of number of cached tokens.")
            .labelNames("model_name")
            .register(registry);
    ttft =
        histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            0.001,
            0.005,
            0.01,
            0.02,
            0.04,
            0.06,
            0.08,
            0.1,
            0.25,
            0.5,
            0.75,
            1.0,
            2.5,
            5.0,
            7.5,
            10.0,
            20.0,
            40.0,
            80.0,
            160.0,
            640.0,
            2560.0);
    e2e =
        histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            REQUEST_BUCKETS);
    tpot =
        histogram(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token in seconds (per request, after the first token).",
            0.01,
            0.025,
            0.05,
            0.075,
            0.1,
            0.15,
            0.2,
            0.3,
            0.4,
            0.5,
            0.75,
            1.0,
            2.5,
            5.0,
            7.5,
            10.0,
            20.0,
            40.0,
            80.0);
    itl =
        histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            0.01,
            0.025,
            0.05,
            0.075,
            0.1,
            0.15,
            0.2,
            0.3,
            0.4,
            0.5,
            0.75,
            1.0,
            2.5,
            5.0,
            7.5,
            10.0,
            20.0,
            40.0,
            80.0);
    queueTime =
        histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in the waiting queue in seconds.",
            REQUEST_BUCKETS);
    for (String model : models) {
      // Series exist from the first scrape, as vLLM's do.
      running.labelValues(model).set(0);
      waiting.labelValues(model).set(0);
      kvCacheUsage.labelValues(model).set(0);
      promptTokens.labelValues(model);
      generationTokens.labelValues(model);
      prefixCacheQueries.labelValues(model);
      prefixCacheHits.labelValues(model);
      for (String reason : List.of("stop", "length", "abort")) {
        requestSuccess.labelValues(model, reason);
      }
      ttft.labelValues(model);
      e2e.labelValues(model);
      tpot.labelValues(model);
      itl.labelValues(model);
      queueTime.labelValues(model);
    }
  }

  private Histogram histogram(String name, String help, double... bounds) {
    return Histogram.builder()
        .name(name)
        .help(help)
        .labelNames("model_name")
        .classicOnly()
        .classicUpperBounds(bounds)
        .register(registry);
  }

  void running(String model, int delta) {
    running.labelValues(model).inc(delta);
  }

  void waiting(String model, int delta) {
    waiting.labelValues(model).inc(delta);
  }

  /**
   * The engine's KV-cache use (0..1). One cache serves every model name, as one vLLM engine's does,
   * so each model's series shows the same value.
   */
  void kvCacheUsage(double share) {
    for (String model : models) {
      kvCacheUsage.labelValues(model).set(share);
    }
  }

  void queueTime(String model, double seconds) {
    queueTime.labelValues(model).observe(seconds);
  }

  void firstToken(String model, int prompt, double ttftSeconds) {
    promptTokens.labelValues(model).inc(prompt);
    ttft.labelValues(model).observe(ttftSeconds);
  }

  /** A pooling request's prompt: counted, but it has no first token to time. */
  void pooled(String model, int prompt) {
    promptTokens.labelValues(model).inc(prompt);
  }

  /** A sequence was scheduled: its prompt looked up in the prefix cache, {@code hits} found. */
  void prefixCache(String model, int queried, int hits) {
    prefixCacheQueries.labelValues(model).inc(queried);
    prefixCacheHits.labelValues(model).inc(hits);
  }

  void interToken(String model, double seconds) {
    itl.labelValues(model).observe(seconds);
  }

  void generated(String model) {
    generationTokens.labelValues(model).inc();
  }

  void finished(String model, String reason) {
    requestSuccess.labelValues(model, reason).inc();
  }

  void completed(String model, double e2eSeconds, double tpotSeconds) {
    e2e.labelValues(model).observe(e2eSeconds);
    if (tpotSeconds >= 0) {
      tpot.labelValues(model).observe(tpotSeconds);
    }
  }

  String scrape() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      PrometheusTextFormatWriter.create()
          .write(out, registry.scrape(), EscapingScheme.UNDERSCORE_ESCAPING);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString(java.nio.charset.StandardCharsets.UTF_8);
  }
}
