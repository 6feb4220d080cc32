package io.phasemeter.load.workload.dataset;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The requests of a dataset run: request {@code k} (≥ 1) sends entry {@code perm[(k − 1) mod n]} of
 * a permutation of the {@code n} usable entries shuffled with the run's seed, so each entry goes
 * once before any goes twice, and a run is the same from its seed; a warm-up request ({@code k <
 * 0}) sends entry {@code perm[k mod n]}.
 *
 * <p>The prompt is the entry's text, as {@code prompt} on {@code /v1/completions} or as one user
 * message on {@code /v1/chat/completions}, with {@code max_tokens = min_tokens =} the entry's
 * output length and {@code ignore_eos}: the output is exact and checked against {@code
 * usage.completion_tokens} ({@link RequestSpec#exactOutput()}), the prompt is not ({@code
 * promptTokens} −1: a text's tokens are the server's tokenizer's to count).
 *
 * <p>Immutable and thread-safe.
 */
public final class DatasetSource implements Workload.Source {
  private final DatasetEntries entries;
  private final Api api;
  private final boolean stream;
  private final int[] order;
  private final byte[] head;
  private final String bucket;

  private DatasetSource(String model, Api api, boolean stream, long seed, DatasetEntries entries) {
    this.entries = entries;
    this.api = api;
    this.stream = stream;
    this.order = permutation(entries.size(), seed);
    this.bucket = entries.kind().key();
    StringBuilder sb = new StringBuilder("{\"model\":");
    Workload.appendString(sb, model);
    sb.append(api == Api.CHAT ? ",\"messages\":[{\"role\":\"user\",\"content\":" : ",\"prompt\":");
    this.head = sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The workload of {@code entries} on {@code api}.
   *
   * @throws IllegalArgumentException when {@code api} is neither completions nor chat
   */
  public static Workload workload(
      String model, Api api, boolean stream, long seed, DatasetEntries entries) {
    requireApi(api);
    return Workload.from(
        model, api, stream, seed, new DatasetSource(model, api, stream, seed, entries));
  }

  /**
   * Refuses an API a dataset's prompts cannot go to: only completions and chat take a text prompt
   * with {@code min_tokens} and {@code ignore_eos}.
   */
  public static void requireApi(Api api) {
    if (api != Api.COMPLETIONS && api != Api.CHAT) {
      throw new IllegalArgumentException(
          "--dataset sends its prompts on --api completions (the default) or --api chat, not --api "
              + api.key());
    }
  }

  /** The entry request {@code seq} sends. */
  int entryOf(long seq) {
    int n = order.length;
    return order[(int) (seq >= 1 ? (seq - 1) % n : Math.floorMod(seq, (long) n))];
  }

  @Override
  public RequestSpec request(long seq, Map<String, String> headers) {
    int i = entryOf(seq);
    byte[] prompt = entries.promptJson(i);
    int out = entries.outputTokens(i);
    StringBuilder tail = new StringBuilder(128);
    if (api == Api.CHAT) {
      tail.append("}]");
    }
    Workload.appendExactOutput(tail, out, stream);
    tail.append('}');
    Buffer body =
        Buffer.buffer(head.length + prompt.length + tail.length())
            .appendBytes(head)
            .appendBytes(prompt)
            .appendString(tail.toString());
    return new RequestSpec(api, api.path(), body, bucket, -1, out, stream, headers, 0, true);
  }

  /** 0 … n − 1 shuffled (Fisher–Yates) with a generator seeded from {@code seed}. */
  static int[] permutation(int n, long seed) {
    int[] p = new int[n];
    for (int i = 0; i < n; i++) {
      p[i] = i;
    }
    SplittableRandom rng = new SplittableRandom(Workload.mix64(seed ^ 0x6461746173657473L));
    for (int i = n - 1; i > 0; i--) {
      int j = rng.nextInt(i + 1);
      int t = p[i];
      p[i] = p[j];
      p[j] = t;
    }
    return p;
  }
}
