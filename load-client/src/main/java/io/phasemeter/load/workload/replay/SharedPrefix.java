package io.phasemeter.load.workload.replay;

import static io.phasemeter.load.workload.Workload.mix64;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.buffer.Buffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Shared prefixes of the synthetic workload ({@code --prefix-tokens N --prefixes K}): K prefixes of
 * N token ids, each from the seed and its index; every request draws one with its own seeded draw,
 * its first N ids are that prefix and the rest its own, as without prefixes. The synthetic case of
 * what a prefix cache serves: K system prompts shared by all requests. The run's {@link PromptSalt}
 * is mixed into the prefixes' ids and the requests' own, not into the picks of shape and prefix.
 * Warm-up requests ({@code seq < 0}) start with K prefixes of their own, so that they leave none of
 * the run's in a prefix cache.
 *
 * @param tokens N, the prefix's length in tokens (at least 1, below every input length)
 * @param count K, how many distinct prefixes (at least 1)
 */
public record SharedPrefix(int tokens, int count) {
  /** Mixed into a prefix's seed, so that its ids are no request's own. */
  private static final long PREFIX = 0x53_48_50_52_00_00_00_06L;

  /** Mixed into a warm-up request's prefix's seed, so that it is none of the run's prefixes. */
  private static final long WARM_UP = 0x57_41_52_4d_00_00_00_07L;

  public SharedPrefix {
    if (tokens < 1) {
      throw new IllegalArgumentException("--prefix-tokens must be at least 1, got " + tokens);
    }
    if (count < 1) {
      throw new IllegalArgumentException("--prefixes must be at least 1, got " + count);
    }
  }

  /** The shared prefixes of {@code --prefix-tokens} and {@code --prefixes}, or null for none. */
  public static SharedPrefix fromFlags(Integer tokens, Integer count) {
    if (tokens == null && count == null) {
      return null;
    }
    if (tokens == null || count == null) {
      throw new IllegalArgumentException(
          "--prefix-tokens N and --prefixes K go together (K shared prefixes of N tokens)");
    }
    return new SharedPrefix(tokens, count);
  }

  /**
   * Exact-length requests of {@code mix} whose prompts (completions) or inputs (embeddings) start
   * with one of the prefixes.
   *
   * @param salt the run's prompt salt ({@link PromptSalt#NONE}: the ids of the seed alone)
   * @throws IllegalArgumentException when an input length of the mix is not above {@link #tokens}
   *     (naming the shape), or for an API without token ids
   */
  public Workload workload(
      String model, Api api, Mix mix, boolean stream, long seed, PromptSalt salt) {
    if (api != Api.COMPLETIONS && api != Api.EMBEDDINGS) {
      throw new IllegalArgumentException(
          "--prefix-tokens needs token-id prompts: --api completions or embeddings (chat and"
              + " responses send free text, whose tokens are the server's)");
    }
    boolean embeddings = api == Api.EMBEDDINGS;
    for (Mix.Entry e : mix.entries()) {
      if (e.inputTokens() <= tokens) {
        throw new IllegalArgumentException(
            "--prefix-tokens "
                + tokens
                + " must be below every input length: "
                + (embeddings ? "input " + tokensTag(e.inputTokens()) : "shape " + e.bucket())
                + " has "
                + e.inputTokens()
                + " tokens in");
      }
    }
    boolean streamed = stream && !embeddings;
    return Workload.from(
        model,
        api,
        streamed,
        seed,
        (seq, headers) -> request(api, model, mix, streamed, seed, salt, seq, headers));
  }

  /** The conditions of summary.json: {@code prefix_tokens}, {@code prefixes}. */
  public Map<String, Object> conditions() {
    Map<String, Object> c = new LinkedHashMap<>();
    c.put("prefix_tokens", tokens);
    c.put("prefixes", count);
    return c;
  }

  /** In words, after the lengths. */
  public String text() {
    return count
        + (count == 1 ? " shared prefix" : " shared prefixes")
        + " of "
        + tokens
        + " tokens";
  }

  /**
   * The ids of prefix {@code k}, into {@code sb} (a JSON array's elements); a warm-up's prefix
   * {@code k} is another.
   */
  private void appendPrefix(StringBuilder sb, int k, long seed, PromptSalt salt, boolean warmUp) {
    long key = mix64(seed ^ mix64(PREFIX + k));
    SplittableRandom rng = new SplittableRandom(salt.key(warmUp ? mix64(key ^ WARM_UP) : key));
    for (int i = 0; i < tokens; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(rng.nextInt(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID + 1));
    }
  }

  private RequestSpec request(
      Api api,
      String model,
      Mix mix,
      boolean stream,
      long seed,
      PromptSalt salt,
      long seq,
      Map<String, String> headers) {
    SplittableRandom rng = new SplittableRandom(mix64(seed ^ mix64(seq)));
    Mix.Entry shape = mix.pick(rng.nextDouble());
    int k = rng.nextInt(count);
    int in = shape.inputTokens();
    int out = api == Api.EMBEDDINGS ? 0 : shape.outputTokens();
    StringBuilder sb = new StringBuilder(in * 6 + 256);
    sb.append("{\"model\":");
    Workload.appendString(sb, model);
    sb.append(api == Api.EMBEDDINGS ? ",\"input\":[" : ",\"prompt\":[");
    appendPrefix(sb, k, seed, salt, seq < 0);
    SplittableRandom ids = salt.ids(rng);
    for (int i = tokens; i < in; i++) {
      sb.append(',').append(ids.nextInt(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID + 1));
    }
    sb.append(']');
    if (api == Api.COMPLETIONS) {
      Workload.appendExactOutput(sb, out, stream);
    }
    sb.append('}');
    String bucket = api == Api.EMBEDDINGS ? tokensTag(in) : shape.bucket();
    return new RequestSpec(
        api, api.path(), Buffer.buffer(sb.toString()), bucket, in, out, stream, headers);
  }

  /** The embeddings' bucket tag, as {@link Workload} writes it: {@code 4k}, {@code 1000}. */
  private static String tokensTag(int n) {
    return n % 1024 == 0 ? (n / 1024) + "k" : Integer.toString(n);
  }
}
