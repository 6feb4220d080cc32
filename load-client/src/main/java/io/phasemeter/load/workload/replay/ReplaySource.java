package io.phasemeter.load.workload.replay;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.buffer.Buffer;
import java.util.HashMap;
import java.util.Map;

/**
 * The requests of a replayed trace: request {@code seq} (from 1) is row {@code seq - 1}, on {@code
 * /v1/completions} with its exact lengths (a token-id prompt of {@code input_length}, {@code
 * max_tokens = min_tokens = output_length}, {@code ignore_eos}); a row of a session carries {@link
 * Workload#SESSION_HEADER} and its turn. A warm-up request ({@code seq < 0}) has a row's lengths
 * but token ids of its own and no session, so that it leaves nothing in a prefix cache that the
 * run's requests could hit; the run's salt applies to both. Thread-safe.
 */
final class ReplaySource implements Workload.Source {
  /** Bucket tags: the input length rounded up to a power of two, at least 512. */
  private static final String[] BUCKETS = new String[32];

  static {
    for (int b = 0; b < BUCKETS.length; b++) {
      long n = 1L << b;
      BUCKETS[b] = "trace-" + (n % 1024 == 0 ? (n / 1024) + "k" : Long.toString(n));
    }
  }

  /** Mixed into the seed of the warm-up's prompts (and of {@link SharedPrefix}'s warm-up). */
  static final long WARM_UP = 0x57_41_52_4d_00_00_00_05L;

  private final Trace trace;
  private final TracePrompts prompts;
  private final String model;
  private final boolean stream;
  private final long seed;

  ReplaySource(
      Trace trace,
      Replay.Prefixes prefixes,
      String model,
      boolean stream,
      long seed,
      PromptSalt salt) {
    this.trace = trace;
    this.prompts = new TracePrompts(trace, seed, prefixes, salt);
    this.model = model;
    this.stream = stream;
    this.seed = seed;
  }

  /**
   * The bucket tag of an input length: {@code trace-512}, {@code trace-1k} … {@code trace-1024k}.
   */
  static String bucket(int inputTokens) {
    int b = Math.max(9, 32 - Integer.numberOfLeadingZeros(Math.max(1, inputTokens) - 1));
    return BUCKETS[Math.min(b, BUCKETS.length - 1)];
  }

  @Override
  public RequestSpec request(long seq, Map<String, String> headers) {
    int rows = trace.rows();
    boolean warmUp = seq < 1;
    int row = (int) Math.floorMod(warmUp ? -seq - 1 : seq - 1, (long) rows);
    int in = trace.input(row);
    int out = trace.output(row);
    StringBuilder sb = new StringBuilder(in * 6 + 256);
    sb.append("{\"model\":");
    Workload.appendString(sb, model);
    sb.append(",\"prompt\":[");
    int[] n = {0};
    TracePrompts.Sink json =
        id -> {
          if (n[0]++ > 0) {
            sb.append(',');
          }
          sb.append(id);
        };
    if (warmUp) {
      prompts.unrelated(row, seed ^ WARM_UP, json);
    } else {
      prompts.prompt(row, json);
    }
    sb.append(']');
    Workload.appendExactOutput(sb, out, stream);
    sb.append('}');
    String session = warmUp ? null : trace.sessionId(row);
    Map<String, String> h = headers;
    if (session != null) {
      h = new HashMap<>(headers);
      h.put(Workload.SESSION_HEADER, session);
    }
    return new RequestSpec(
        Api.COMPLETIONS,
        Api.COMPLETIONS.path(),
        Buffer.buffer(sb.toString()),
        bucket(in),
        in,
        out,
        stream,
        h,
        session == null ? 0 : trace.turn(row));
  }
}
