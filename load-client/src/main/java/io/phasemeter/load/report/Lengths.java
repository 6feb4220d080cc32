package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import java.util.Arrays;
import java.util.List;

/**
 * The token lengths a run actually asked for and got, over its successful requests (summary.json
 * {@code lengths}, the report's Lengths table): asked is what each request said, the exact prompt
 * length of a token-id prompt ({@code ClientResult.promptTokens}; a text prompt has none) and
 * {@code max_tokens}; received is what the server's usage reported. Every run has them, not only a
 * dataset's: a profile's lengths are fixed, a mix's or a dataset's are a distribution.
 *
 * @param promptAsked exact prompt lengths sent; null when no successful request had one
 * @param promptReceived {@code usage.prompt_tokens}; null when none was reported
 * @param completionAsked {@code max_tokens}; null when nothing succeeded, or for an API that
 *     generates nothing
 * @param completionReceived {@code usage.completion_tokens}; null likewise, or when none reported
 */
record Lengths(
    LengthStats promptAsked,
    LengthStats promptReceived,
    LengthStats completionAsked,
    LengthStats completionReceived) {

  /** The lengths of the successful ones of {@code pairs}; {@code generates}: the API's. */
  static Lengths of(List<Pair> pairs, boolean generates) {
    int n = pairs.size();
    long[] promptAsked = new long[n];
    long[] promptReceived = new long[n];
    long[] completionAsked = new long[n];
    long[] completionReceived = new long[n];
    int pa = 0;
    int pr = 0;
    int ca = 0;
    int cr = 0;
    for (Pair p : pairs) {
      ClientResult c = p.client();
      if (!c.ok()) {
        continue;
      }
      if (c.promptTokens() >= 0) {
        promptAsked[pa++] = c.promptTokens();
      }
      if (c.usagePromptTokens() >= 0) {
        promptReceived[pr++] = c.usagePromptTokens();
      }
      if (generates) {
        completionAsked[ca++] = c.maxTokens();
        if (c.usageCompletionTokens() >= 0) {
          completionReceived[cr++] = c.usageCompletionTokens();
        }
      }
    }
    return new Lengths(
        LengthStats.of(Arrays.copyOf(promptAsked, pa)),
        LengthStats.of(Arrays.copyOf(promptReceived, pr)),
        LengthStats.of(Arrays.copyOf(completionAsked, ca)),
        LengthStats.of(Arrays.copyOf(completionReceived, cr)));
  }

  /**
   * {@code {"prompt_tokens": {"asked", "received"}, "completion_tokens": {"asked", "received"}}},
   * each a {@link LengthStats} object or null.
   */
  void write(ObjectNode o) {
    ObjectNode prompt = o.putObject("prompt_tokens");
    put(prompt, "asked", promptAsked);
    put(prompt, "received", promptReceived);
    ObjectNode completion = o.putObject("completion_tokens");
    put(completion, "asked", completionAsked);
    put(completion, "received", completionReceived);
  }

  private static void put(ObjectNode o, String name, LengthStats s) {
    if (s == null) {
      o.putNull(name);
    } else {
      s.write(o.putObject(name));
    }
  }
}
