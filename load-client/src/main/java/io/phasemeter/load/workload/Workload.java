package io.phasemeter.load.workload;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.vertx.core.buffer.Buffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;

/**
 * Produces the requests of a run. Request {@code seq} depends only on the seed and {@code seq}, not
 * on the order in which requests are built, so a run is reproducible from its seed even when
 * several threads build requests.
 *
 * <p>A {@link PromptSalt} ({@link #withSalt}) is mixed into the token ids and the free text, not
 * into the lengths or the shapes; without one (the default here) the requests are those of the seed
 * alone.
 *
 * <p>One mode per {@link Api}:
 *
 * <ul>
 *   <li>{@link #completions exact lengths}: {@code /v1/completions} with a prompt of pseudo-random
 *       token ids (so a prefix cache cannot shortcut prefill) and {@code max_tokens = min_tokens},
 *       {@code ignore_eos: true}, so the server must report exactly the asked-for usage.
 *   <li>{@link #chat free text}: {@code /v1/chat/completions} with one short user message; lengths
 *       are up to the model, and usage is not checked ({@code promptTokens = -1}).
 *   <li>{@link #responses free text}: {@code /v1/responses} with the chat prompt as {@code input}
 *       and {@code max_output_tokens}; as for chat, neither length is exact nor checked (the API
 *       has no {@code min_tokens} or {@code ignore_eos}).
 *   <li>{@link #embeddings exact input}: {@code /v1/embeddings} with token ids as {@code input}, so
 *       the server must report exactly the tokens sent as {@code usage.prompt_tokens}; never
 *       streamed, and nothing is generated.
 * </ul>
 *
 * Immutable and thread-safe.
 */
public final class Workload {
  /** Lowest token id used in prompts; low ids are often special tokens. */
  public static final int MIN_TOKEN_ID = 1000;

  /** Highest token id used in prompts; below the vocabulary size of common models (32k and up). */
  public static final int MAX_TOKEN_ID = 30000;

  /**
   * The request header naming a request's session (multi-turn conversations, sessions of a replayed
   * trace); its turn is {@link RequestSpec#turn()}.
   */
  public static final String SESSION_HEADER = "x-session-id";

  /**
   * Builds request {@code seq} of a workload whose requests come from elsewhere than this class's
   * own generators (a replayed trace, a dataset): {@link Workload#from}. Must depend only on the
   * seed it was made with and on {@code seq}, which is below zero for warm-up requests (any request
   * of the workload will do for those), and be thread-safe.
   */
  @FunctionalInterface
  public interface Source {
    /** Request {@code seq}, with {@code headers} (the workload's: an API key) added to its own. */
    RequestSpec request(long seq, Map<String, String> headers);
  }

  private static final String[] TOPICS = {
    "a lighthouse", "the tides", "a mountain pass", "an old library", "a night train",
    "a market at dawn", "a river delta", "a glacier", "a desert town", "a harbour in winter"
  };

  private final String model;
  private final Api api;
  private final Mix mix;
  private final boolean stream;
  private final long seed;
  private final int maxTokens;
  private final Map<String, String> headers;

  /** Mixed into the token ids and the free text ({@link PromptSalt}); never into a source's. */
  private final PromptSalt salt;

  /** Where the requests come from when not this class's generators; null for those. */
  private final Source source;

  private Workload(String model, Api api, Mix mix, boolean stream, long seed, int maxTokens) {
    this(model, api, mix, stream, seed, maxTokens, Map.of(), PromptSalt.NONE, null);
  }

  private Workload(
      String model,
      Api api,
      Mix mix,
      boolean stream,
      long seed,
      int maxTokens,
      Map<String, String> headers,
      PromptSalt salt,
      Source source) {
    if (model == null || model.isBlank()) {
      throw new IllegalArgumentException("--model must not be empty");
    }
    this.model = model;
    this.api = api;
    this.mix = mix;
    this.stream = stream;
    this.seed = seed;
    this.maxTokens = maxTokens;
    this.headers = Map.copyOf(headers);
    this.salt = Objects.requireNonNull(salt, "salt");
    this.source = source;
  }

  /**
   * Requests built by {@code source} (a replayed trace, a dataset), speaking {@code api}; {@link
   * #withHeaders} and {@link #forOwnEndpoint} apply to them as to the others.
   */
  public static Workload from(String model, Api api, boolean stream, long seed, Source source) {
    return new Workload(
        model,
        api,
        null,
        stream,
        seed,
        0,
        Map.of(),
        PromptSalt.NONE,
        Objects.requireNonNull(source, "source"));
  }

  /**
   * These requests with {@code extra} headers on every one (replacing any of the same name), e.g.
   * {@link ApiKey#headers()}.
   */
  public Workload withHeaders(Map<String, String> extra) {
    Map<String, String> all = new HashMap<>(headers);
    all.putAll(extra);
    return new Workload(model, api, mix, stream, seed, maxTokens, all, salt, source);
  }

  /**
   * These requests for the client's own endpoint: an {@code Authorization} header keeps its length
   * (the same bytes to write and parse) but not the key, which has no business there.
   */
  public Workload forOwnEndpoint() {
    Map<String, String> all = new HashMap<>();
    for (Map.Entry<String, String> h : headers.entrySet()) {
      String v = h.getValue();
      if (h.getKey().equalsIgnoreCase("authorization") && v != null) {
        int keep = v.regionMatches(true, 0, "Bearer ", 0, 7) ? 7 : 0;
        v = v.substring(0, keep) + "x".repeat(v.length() - keep);
      }
      all.put(h.getKey(), v);
    }
    return new Workload(model, api, mix, stream, seed, maxTokens, all, salt, source);
  }

  /**
   * These requests with {@code salt} mixed into their token ids (completions, embeddings) and free
   * text (chat, responses); the lengths and shapes stay those of the seed. For this class's own
   * generators: a {@link Source} is built with its run's salt.
   *
   * @throws IllegalStateException for requests from a {@link Source}
   */
  public Workload withSalt(PromptSalt salt) {
    if (source != null) {
      throw new IllegalStateException("a source's requests take the salt from their source");
    }
    return new Workload(model, api, mix, stream, seed, maxTokens, headers, salt, source);
  }

  /** Exact-length requests of one profile. */
  public static Workload completions(String model, Profile profile, boolean stream, long seed) {
    return completions(model, Mix.of(Objects.requireNonNull(profile, "profile")), stream, seed);
  }

  /** Exact-length requests drawn from a weighted mix of shapes. */
  public static Workload completions(String model, Mix mix, boolean stream, long seed) {
    return new Workload(
        model, Api.COMPLETIONS, Objects.requireNonNull(mix, "mix"), stream, seed, 0);
  }

  /** Free-text chat requests asking for up to {@code maxTokens}; bucket tag {@code chat}. */
  public static Workload chat(String model, int maxTokens, boolean stream, long seed) {
    return new Workload(model, Api.CHAT, null, stream, seed, atLeastOne(maxTokens));
  }

  /**
   * Free-text Responses API requests ({@code input}: the chat prompt) asking for up to {@code
   * maxOutputTokens}; bucket tag {@code responses}.
   */
  public static Workload responses(String model, int maxOutputTokens, boolean stream, long seed) {
    return new Workload(model, Api.RESPONSES, null, stream, seed, atLeastOne(maxOutputTokens));
  }

  /**
   * Embeddings of token-id inputs whose lengths are drawn from {@code mix}; the output half of each
   * shape is not used. Bucket tag: the input length ({@code 4k}, {@code 1000}).
   */
  public static Workload embeddings(String model, Mix mix, long seed) {
    return new Workload(model, Api.EMBEDDINGS, Objects.requireNonNull(mix, "mix"), false, seed, 0);
  }

  /** Embeddings of token-id inputs of exactly {@code inputTokens}. */
  public static Workload embeddings(String model, int inputTokens, long seed) {
    if (inputTokens < 1) {
      throw new IllegalArgumentException("--input-tokens must be at least 1, got " + inputTokens);
    }
    return embeddings(
        model, new Mix(List.of(new Mix.Entry(inputTokens, 0, 1.0, Mix.tokens(inputTokens)))), seed);
  }

  private static int atLeastOne(int maxTokens) {
    if (maxTokens < 1) {
      throw new IllegalArgumentException("--output-tokens must be at least 1, got " + maxTokens);
    }
    return maxTokens;
  }

  /** The API these requests speak. */
  public Api api() {
    return api;
  }

  /** Request number {@code seq}. */
  public RequestSpec request(long seq) {
    if (source != null) {
      return source.request(seq, headers);
    }
    SplittableRandom rng = new SplittableRandom(mix64(seed ^ mix64(seq)));
    return switch (api) {
      case CHAT -> chatRequest(seq, rng);
      case RESPONSES -> responsesRequest(seq, rng);
      case EMBEDDINGS -> embeddingsRequest(rng);
      case COMPLETIONS -> completionRequest(rng);
    };
  }

  private RequestSpec completionRequest(SplittableRandom rng) {
    Mix.Entry shape = mix.pick(rng.nextDouble());
    int in = shape.inputTokens();
    int out = shape.outputTokens();
    StringBuilder sb = new StringBuilder(in * 6 + 256);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"prompt\":");
    appendTokenIds(sb, in, salt.ids(rng));
    appendExactOutput(sb, out, stream);
    sb.append('}');
    return new RequestSpec(
        api, api.path(), Buffer.buffer(sb.toString()), shape.bucket(), in, out, stream, headers);
  }

  private RequestSpec chatRequest(long seq, SplittableRandom rng) {
    String content = prompt(seq, rng, salt);
    StringBuilder sb = new StringBuilder(256);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"messages\":[{\"role\":\"user\",\"content\":");
    appendString(sb, content);
    sb.append("}],\"max_tokens\":").append(maxTokens).append(",\"stream\":").append(stream);
    appendStreamOptions(sb);
    sb.append('}');
    return new RequestSpec(
        api, api.path(), Buffer.buffer(sb.toString()), "chat", -1, maxTokens, stream, headers);
  }

  private RequestSpec responsesRequest(long seq, SplittableRandom rng) {
    StringBuilder sb = new StringBuilder(256);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"input\":");
    appendString(sb, prompt(seq, rng, salt));
    // Usage comes in response.completed: the Responses API has no stream_options.
    sb.append(",\"max_output_tokens\":").append(maxTokens).append(",\"stream\":").append(stream);
    sb.append('}');
    return new RequestSpec(
        api, api.path(), Buffer.buffer(sb.toString()), "responses", -1, maxTokens, stream, headers);
  }

  private RequestSpec embeddingsRequest(SplittableRandom rng) {
    int in = mix.pick(rng.nextDouble()).inputTokens();
    StringBuilder sb = new StringBuilder(in * 6 + 64);
    sb.append("{\"model\":");
    appendString(sb, model);
    sb.append(",\"input\":");
    appendTokenIds(sb, in, salt.ids(rng));
    sb.append('}');
    return new RequestSpec(
        api, api.path(), Buffer.buffer(sb.toString()), Mix.tokens(in), in, 0, false, headers);
  }

  /**
   * The free-text prompt of request {@code seq}: the request number keeps prompts distinct, so a
   * prefix cache serves only the shared start, and the salt's mark after it ({@link
   * PromptSalt#text()}) keeps two runs' apart. A session's turn ({@link Conversation}) takes a
   * number made of its session's and its own, so that no two sessions send the same prompt.
   */
  static String prompt(long seq, SplittableRandom rng, PromptSalt salt) {
    String topic = TOPICS[rng.nextInt(TOPICS.length)];
    return "Request " + seq + salt.text() + ": write a short paragraph about " + topic + ".";
  }

  /** {@code n} pseudo-random token ids as a JSON array; each id is at most 5 digits and a comma. */
  public static void appendTokenIds(StringBuilder sb, int n, SplittableRandom rng) {
    sb.append('[');
    for (int i = 0; i < n; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(rng.nextInt(MIN_TOKEN_ID, MAX_TOKEN_ID + 1));
    }
    sb.append(']');
  }

  private void appendStreamOptions(StringBuilder sb) {
    if (stream) {
      sb.append(",\"stream_options\":{\"include_usage\":true}");
    }
  }

  /**
   * The fields that make a request's output exactly {@code out} tokens, as vLLM takes them ({@code
   * max_tokens = min_tokens}, {@code ignore_eos}), then {@code stream} and, when streamed, usage in
   * the last chunk: every exact-length generator (this class's, a replay's, shared prefixes',
   * sessions', a dataset's) writes its tail here.
   */
  public static void appendExactOutput(StringBuilder sb, int out, boolean stream) {
    sb.append(",\"max_tokens\":")
        .append(out)
        .append(",\"min_tokens\":")
        .append(out)
        .append(",\"ignore_eos\":true,\"stream\":")
        .append(stream);
    if (stream) {
      sb.append(",\"stream_options\":{\"include_usage\":true}");
    }
  }

  /** {@code s} as a JSON string, quoted and escaped. */
  public static void appendString(StringBuilder sb, String s) {
    sb.append('"');
    JsonStringEncoder.getInstance().quoteAsString(s, sb);
    sb.append('"');
  }

  /** SplitMix64's finaliser. */
  public static long mix64(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
