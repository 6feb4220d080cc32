package io.phasemeter.proxy.gateway;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A key's rate-limit state as OpenAI reports it in response headers ({@code
 * x-ratelimit-limit-requests}, {@code x-ratelimit-remaining-requests}, {@code
 * x-ratelimit-reset-requests} and the same three for tokens). A reset is the time until the bucket
 * is full again, written as Go prints a duration ({@code 20ms}, {@code 1s}, {@code 6m0s}), the form
 * OpenAI's documentation shows.
 *
 * @param requests the requests-per-minute window ({@link Window#UNLIMITED} when not limited)
 * @param tokens the tokens-per-minute window ({@link Window#UNLIMITED} when not limited)
 */
public record RateLimitHeaders(Window requests, Window tokens) {

  /**
   * One limit's state.
   *
   * @param limit the per-minute limit; 0 means unlimited
   * @param remaining whole units available now
   * @param reset time until the bucket is full again
   */
  public record Window(long limit, long remaining, Duration reset) {
    /** The window of a dimension that is not limited; it renders no headers. */
    public static final Window UNLIMITED = new Window(0, 0, Duration.ZERO);

    public Window {
      Objects.requireNonNull(reset, "reset");
    }

    /** Whether this dimension is limited at all. */
    public boolean limited() {
      return limit > 0;
    }
  }

  public RateLimitHeaders {
    Objects.requireNonNull(requests, "requests");
    Objects.requireNonNull(tokens, "tokens");
  }

  /**
   * The headers to send, in OpenAI's order; the requests trio is left out when requests are
   * unlimited and the tokens trio when tokens are.
   */
  public Map<String, String> headers() {
    Map<String, String> h = new LinkedHashMap<>();
    if (requests.limited()) {
      h.put("x-ratelimit-limit-requests", Long.toString(requests.limit()));
    }
    if (tokens.limited()) {
      h.put("x-ratelimit-limit-tokens", Long.toString(tokens.limit()));
    }
    if (requests.limited()) {
      h.put("x-ratelimit-remaining-requests", Long.toString(requests.remaining()));
    }
    if (tokens.limited()) {
      h.put("x-ratelimit-remaining-tokens", Long.toString(tokens.remaining()));
    }
    if (requests.limited()) {
      h.put("x-ratelimit-reset-requests", goDuration(requests.reset()));
    }
    if (tokens.limited()) {
      h.put("x-ratelimit-reset-tokens", goDuration(tokens.reset()));
    }
    return Collections.unmodifiableMap(h);
  }

  /**
   * Formats {@code d} as Go's {@code time.Duration.String()} does after rounding it up to whole
   * milliseconds: {@code 0s}, {@code 20ms}, {@code 1s}, {@code 1.5s}, {@code 6m0s}, {@code
   * 1m30.5s}, {@code 1h0m0s}. Rounding up means a client that waits the reset finds the bucket
   * full.
   */
  static String goDuration(Duration d) {
    long nanos = Math.max(0, d.toNanos());
    long ms = (nanos + 999_999) / 1_000_000;
    if (ms == 0) {
      return "0s";
    }
    if (ms < 1000) {
      return ms + "ms";
    }
    long hours = ms / 3_600_000;
    long minutes = ms / 60_000 % 60;
    long seconds = ms / 1000 % 60;
    long millis = ms % 1000;
    StringBuilder sb = new StringBuilder();
    if (hours > 0) {
      sb.append(hours).append('h');
    }
    if (hours > 0 || minutes > 0) {
      sb.append(minutes).append('m');
    }
    sb.append(seconds);
    if (millis > 0) {
      String frac = String.format("%03d", millis);
      sb.append('.').append(frac.replaceAll("0+$", ""));
    }
    return sb.append('s').toString();
  }
}
