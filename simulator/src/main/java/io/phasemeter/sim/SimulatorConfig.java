package io.phasemeter.sim;

import java.util.List;

/**
 * Immutable configuration of one simulated vLLM server. Every component is validated in the compact
 * constructor; a bad value raises {@link IllegalArgumentException} whose message names the
 * command-line flag.
 *
 * @param host address to bind
 * @param port port to bind; 0 picks an ephemeral port (see {@link Simulator#port()})
 * @param models served model names; the first is used when a request names none
 * @param slots most sequences running at once (vLLM's {@code --max-num-seqs})
 * @param maxQueue most sequences waiting for a slot; one more is refused with 503
 * @param prefillTokensPerSecond prompt tokens processed per second before the first token
 * @param decodeStepMs cost of one decode step with a batch of one
 * @param decodeStepGrowth relative growth of a decode step per extra running sequence
 * @param stepClock how decode steps are timed: each sequence on its own clock, or one step clock
 *     for the whole running batch as vLLM's engine loop (see {@link StepClock})
 * @param defaultMaxTokens {@code max_tokens} when a request gives none (capped by the context)
 * @param maxModelLen context length: prompt plus completion tokens
 * @param seed seed of the output text, the EOS positions and the fault draws
 * @param errorRate share of requests answered with a 500 error
 * @param stallRate share of requests that stall after their first token
 * @param stallMs how long a stall drawn by {@code stallRate} lasts
 * @param disconnectRate share of requests whose connection is closed after the first token
 * @param otlpTracesEndpoint where to export one {@code llm_request} span per finished request, as
 *     vLLM does with {@code --otlp-traces-endpoint} (OTLP/HTTP protobuf); null for none
 * @param kvCacheTokens the KV cache's size in tokens, for {@code vllm:kv_cache_usage_perc}; 0 for
 *     {@link #KV_CACHE_TOKENS_PER_SLOT} per slot
 * @param prefixCacheBlocks the prefix cache's size in blocks of {@link #KV_BLOCK_TOKENS} tokens
 *     (vLLM's automatic prefix caching, see {@link PrefixCache}); 0 turns it off
 * @param promptTokensDetails whether usage carries {@code prompt_tokens_details.cached_tokens}, as
 *     vLLM's {@code --enable-prompt-tokens-details}
 */
public record SimulatorConfig(
    String host,
    int port,
    List<String> models,
    int slots,
    int maxQueue,
    double prefillTokensPerSecond,
    double decodeStepMs,
    double decodeStepGrowth,
    StepClock stepClock,
    int defaultMaxTokens,
    int maxModelLen,
    long seed,
    double errorRate,
    double stallRate,
    long stallMs,
    double disconnectRate,
    String otlpTracesEndpoint,
    int kvCacheTokens,
    int prefixCacheBlocks,
    boolean promptTokensDetails) {

  /** KV-cache tokens per slot when {@code --kv-cache-tokens} is 0 (the default). */
  public static final int KV_CACHE_TOKENS_PER_SLOT = 2048;

  /** Tokens per KV-cache block, vLLM's default {@code --block-size}. */
  public static final int KV_BLOCK_TOKENS = 16;

  /** {@code --prefix-cache-blocks} when not given: 16,384 blocks, 262,144 tokens. */
  public static final int DEFAULT_PREFIX_CACHE_BLOCKS = 16_384;

  /**
   * The largest {@code --prefix-cache-blocks}: 1,048,576 blocks (16,777,216 tokens), some 70 MB of
   * heap when full.
   */
  public static final int MAX_PREFIX_CACHE_BLOCKS = 1 << 20;

  public SimulatorConfig {
    if (host == null || host.isBlank()) {
      throw new IllegalArgumentException("--host must not be empty");
    }
    require(port >= 0 && port <= 65535, "--port must be between 0 and 65535, got " + port);
    if (models == null || models.isEmpty()) {
      throw new IllegalArgumentException("--model must be given at least once");
    }
    for (String m : models) {
      if (m == null || m.isBlank()) {
        throw new IllegalArgumentException("--model must not be empty");
      }
    }
    models = List.copyOf(models);
    require(models.stream().distinct().count() == models.size(), "--model names must be unique");
    require(slots >= 1, "--slots must be at least 1, got " + slots);
    require(maxQueue >= 0, "--max-queue must be at least 0, got " + maxQueue);
    require(
        prefillTokensPerSecond > 0 && Double.isFinite(prefillTokensPerSecond),
        "--prefill-tokens-per-s must be a positive number, got " + prefillTokensPerSecond);
    require(
        decodeStepMs >= 0 && Double.isFinite(decodeStepMs),
        "--decode-step-ms must be at least 0, got " + decodeStepMs);
    require(
        decodeStepGrowth >= 0 && Double.isFinite(decodeStepGrowth),
        "--decode-step-growth must be at least 0, got " + decodeStepGrowth);
    if (stepClock == null) {
      throw new IllegalArgumentException("--step-clock must be given");
    }
    require(
        stepClock == StepClock.PER_SEQUENCE || decodeStepMs > 0,
        "--step-clock shared needs --decode-step-ms above 0, got " + decodeStepMs);
    require(maxModelLen >= 2, "--max-model-len must be at least 2, got " + maxModelLen);
    require(
        defaultMaxTokens >= 1 && defaultMaxTokens < maxModelLen,
        "--default-max-tokens must be between 1 and max-model-len - 1, got " + defaultMaxTokens);
    requireRate(errorRate, "--error-rate");
    requireRate(stallRate, "--stall-rate");
    requireRate(disconnectRate, "--disconnect-rate");
    require(
        errorRate + stallRate + disconnectRate <= 1.0,
        "--error-rate + --stall-rate + --disconnect-rate must not exceed 1");
    require(stallMs >= 0, "--stall-ms must be at least 0, got " + stallMs);
    require(
        kvCacheTokens == 0 || kvCacheTokens >= KV_BLOCK_TOKENS,
        "--kv-cache-tokens must be 0 (slots x "
            + KV_CACHE_TOKENS_PER_SLOT
            + ") or at least "
            + KV_BLOCK_TOKENS
            + ", got "
            + kvCacheTokens);
    require(
        prefixCacheBlocks >= 0 && prefixCacheBlocks <= MAX_PREFIX_CACHE_BLOCKS,
        "--prefix-cache-blocks must be between 0 (off) and "
            + MAX_PREFIX_CACHE_BLOCKS
            + ", got "
            + prefixCacheBlocks);
    if (otlpTracesEndpoint != null && otlpTracesEndpoint.isBlank()) {
      otlpTracesEndpoint = null;
    }
    if (otlpTracesEndpoint != null) {
      otlpTracesEndpoint = otlpTracesEndpoint.trim();
      require(
          otlpTracesEndpoint.startsWith("http://") || otlpTracesEndpoint.startsWith("https://"),
          "--otlp-traces-endpoint must be an http:// or https:// URL, got " + otlpTracesEndpoint);
    }
  }

  /** The defaults of {@code phasemeter sim}: one model {@code sim-llama} on 127.0.0.1:8000. */
  public static SimulatorConfig defaults() {
    return new SimulatorConfig(
        "127.0.0.1",
        8000,
        List.of("sim-llama"),
        16,
        10_000,
        20_000,
        20,
        0.02,
        StepClock.PER_SEQUENCE,
        256,
        65_536,
        42,
        0,
        0,
        5_000,
        0,
        null,
        0,
        DEFAULT_PREFIX_CACHE_BLOCKS,
        false);
  }

  public SimulatorConfig withHost(String v) {
    return new SimulatorConfig(
        v,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withPort(int v) {
    return new SimulatorConfig(
        host,
        v,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withModels(List<String> v) {
    return new SimulatorConfig(
        host,
        port,
        v,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withSlots(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        v,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withMaxQueue(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        v,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withPrefillTokensPerSecond(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        v,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withDecodeStepMs(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        v,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withDecodeStepGrowth(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        v,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withStepClock(StepClock v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        v,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withDefaultMaxTokens(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        v,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withMaxModelLen(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        v,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withSeed(long v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        v,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withErrorRate(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        v,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withStallRate(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        v,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withStallMs(long v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        v,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withDisconnectRate(double v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        v,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withOtlpTracesEndpoint(String v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        v,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withKvCacheTokens(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        v,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  public SimulatorConfig withPrefixCacheBlocks(int v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        v,
        promptTokensDetails);
  }

  public SimulatorConfig withPromptTokensDetails(boolean v) {
    return new SimulatorConfig(
        host,
        port,
        models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        stepClock,
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        v);
  }

  /** KV-cache blocks of {@link #KV_BLOCK_TOKENS} tokens: {@code --kv-cache-tokens}, or per slot. */
  public int kvCacheBlocks() {
    long tokens = kvCacheTokens > 0 ? kvCacheTokens : (long) slots * KV_CACHE_TOKENS_PER_SLOT;
    return (int) Math.min(Integer.MAX_VALUE, tokens / KV_BLOCK_TOKENS);
  }

  /**
   * How the engine times decode steps ({@code --step-clock}).
   *
   * <ul>
   *   <li>{@link #PER_SEQUENCE}: each sequence on its own clock from its own first token, so
   *       sequences started apart stay apart.
   *   <li>{@link #SHARED}: one step clock for the whole running batch, like vLLM's engine loop: at
   *       each step boundary every running sequence past its prefill emits its next token, in the
   *       same event-loop turn; a sequence whose prefill ends mid-step joins at the next boundary.
   *       A request with {@code x-sim-decode-step-ms} keeps its own clock.
   * </ul>
   */
  public enum StepClock {
    PER_SEQUENCE("per-sequence"),
    SHARED("shared");

    private final String flag;

    StepClock(String flag) {
      this.flag = flag;
    }

    /** The value as {@code --step-clock} spells it. */
    public String flag() {
      return flag;
    }

    /** Parses a {@code --step-clock} value (case-insensitive). */
    public static StepClock parse(String value) {
      for (StepClock c : values()) {
        if (c.flag.equalsIgnoreCase(value == null ? "" : value.trim())) {
          return c;
        }
      }
      throw new IllegalArgumentException(
          "--step-clock must be per-sequence or shared, got " + value);
    }

    @Override
    public String toString() {
      return flag;
    }
  }

  private static void require(boolean ok, String message) {
    if (!ok) {
      throw new IllegalArgumentException(message);
    }
  }

  private static void requireRate(double rate, String flag) {
    require(rate >= 0 && rate <= 1, flag + " must be between 0 and 1, got " + rate);
  }
}
