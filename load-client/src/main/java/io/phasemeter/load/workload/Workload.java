package io.phasemeter.load.workload;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.vertx.core.buffer.Buffer;
import java.util.Objects;
import java.util.SplittableRandom;

/**
 * Produces the requests of a run. Request {@code seq} depends only on the seed and {@code seq}, not
 * on the order in which requests are built, so a run is reproducible from its seed even when
 * several threads build requests.
 *
 * <p>Two modes:
 *
 * <ul>
 *   <li>{@link #completions exact lengths}: {@code /v1/completions} with a prompt of pseudo-random
 *       token ids (so a prefix cache cannot shortcut prefill) and {@code max_tokens = min_tokens},
 *       {@code ignore_eos: true}, so the server must report exactly the asked-for usage.
 *   <li>{@link #chat free text}: {@code /v1/chat/completions} with one short user message; lengths
 *       are up to the model, and usage is not checked ({@code promptTokens = -1}).
 * </ul>
 *
 * Immutable and thread-safe.
 */
public final class Workload {
  /** Lowest token id used in prompts; low ids are often special tokens. */
  public static final int MIN_TOKEN_ID = 1000;

  /** Highest token id used in prompts; below the vocabulary size of common models (32k and up). */
  public static final int MAX_TOKEN_ID = 30000;

  private static final String[] TOPICS = {
    "a lighthouse", "the tides", "a mountain pass", "an old library", "a night train",
    "a market at dawn", "a river delta", "a glacier", "a desert town", "a harbour in winter"
  };

  private final String model;
  private final Mix mix;
  private final boolean stream;
  private final long seed;
  private final boolean chat;
  private final int chatMaxTokens;

  private Workload(
      String model, Mix mix, boolean stream, long seed, boolean chat, int chatMaxTokens) {
    if (model == null || model.isBlank()) {
      throw new IllegalArgumentException("--model must not be empty");
    }
    this.model = model;
    this.mix = mix;
    this.stream = stream;
    this.seed = seed;
    this.chat = chat;
    this.chatMaxTokens = chatMaxTokens;
  }

  /** Exact-length requests of one profile. */
  public static Workload completions(String model, Profile profile, boolean stream, long seed) {
    return completions(model, Mix.of(Objects.requireNonNull(profile, "profile")), stream, seed);
  }

  /** Exact-length requests drawn from a weighted mix of shapes. */
  public static Workload completions(String model, Mix mix, boolean stream, long seed) {
    return new Workload(model, Objects.requireNonNull(mix, "mix"), stream, seed, false, 0);
  }

  /** Free-text chat requests asking for up to {@code maxTokens}; bucket tag {@code chat}. */
  public static Workload chat(String model, int maxTokens, boolean stream, long seed) {
    if (maxTokens < 1) {
      throw new IllegalArgumentException("--output-tokens must be at least 1, got " + maxTokens);
    }
    return new Workload(model, null, stream, seed, true, maxTokens);
  }

  /** Request number {@code seq}. */
  public RequestSpec request(long seq) {
    SplittableRandom rng = new SplittableRandom(mix64(seed ^ mix64(seq)));
    return chat ? chatRequest(seq, rng) : completionRequest(rng);
  }

  private RequestSpec completionRequest(SplittableRandom rng) {
    Mix.Entry shape = mix.pick(rng.nextDouble());
    int in = shape.inputTokens();
    int out = shape.outputTokens();
    // Each id is at most 5 digits and a comma.
    StringBuilder sb = new StringBuilder(in * 6 + 256);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"prompt\":[");
    for (int i = 0; i < in; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(rng.nextInt(MIN_TOKEN_ID, MAX_TOKEN_ID + 1));
    }
    sb.append("],\"max_tokens\":")
        .append(out)
        .append(",\"min_tokens\":")
        .append(out)
        .append(",\"ignore_eos\":true,\"stream\":")
        .append(stream);
    appendStreamOptions(sb);
    sb.append('}');
    return new RequestSpec(
        "/v1/completions", Buffer.buffer(sb.toString()), shape.bucket(), in, out, stream);
  }

  private RequestSpec chatRequest(long seq, SplittableRandom rng) {
    String topic = TOPICS[rng.nextInt(TOPICS.length)];
    // The request number keeps prompts distinct, so a prefix cache serves only the shared start.
    String content = "Request " + seq + ": write a short paragraph about " + topic + ".";
    StringBuilder sb = new StringBuilder(256);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"messages\":[{\"role\":\"user\",\"content\":");
    appendString(sb, content);
    sb.append("}],\"max_tokens\":").append(chatMaxTokens).append(",\"stream\":").append(stream);
    appendStreamOptions(sb);
    sb.append('}');
    return new RequestSpec(
        "/v1/chat/completions", Buffer.buffer(sb.toString()), "chat", -1, chatMaxTokens, stream);
  }

  private void appendStreamOptions(StringBuilder sb) {
    if (stream) {
      sb.append(",\"stream_options\":{\"include_usage\":true}");
    }
  }

  private static void appendString(StringBuilder sb, String s) {
    sb.append('"');
    JsonStringEncoder.getInstance().quoteAsString(s, sb);
    sb.append('"');
  }

  /** SplitMix64's finaliser. */
  static long mix64(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
