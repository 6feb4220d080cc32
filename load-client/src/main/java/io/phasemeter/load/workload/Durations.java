package io.phasemeter.load.workload;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Durations as the command line writes them: {@code 500ms}, {@code 10s}, {@code 2m}, {@code 1m30s}.
 */
public final class Durations {
  private static final Pattern PART = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h)");

  private Durations() {}

  /**
   * Parses a duration made of one or more {@code <number><unit>} parts, unit {@code ms}, {@code s},
   * {@code m} or {@code h}.
   *
   * @param flag the flag being parsed, named in the error
   * @throws IllegalArgumentException naming the flag when the text is not a positive duration
   */
  public static Duration parse(String flag, String text) {
    String t = text == null ? "" : text.trim();
    Matcher m = PART.matcher(t);
    double nanos = 0;
    int at = 0;
    while (at < t.length() && m.find(at) && m.start() == at) {
      double value = Double.parseDouble(m.group(1));
      nanos +=
          switch (m.group(2)) {
            case "ms" -> value * 1e6;
            case "s" -> value * 1e9;
            case "m" -> value * 60e9;
            default -> value * 3600e9;
          };
      at = m.end();
    }
    if (t.isEmpty() || at != t.length() || !(nanos > 0)) {
      throw new IllegalArgumentException(
          flag
              + " must be a positive duration such as 500ms, 10s, 2m or 1m30s, got '"
              + text
              + "'");
    }
    return Duration.ofNanos(Math.round(nanos));
  }
}
