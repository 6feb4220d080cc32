package io.phasemeter.core;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The one duration notation of Phasemeter, in proxy.yaml, budgets.yaml, campaign plans and on the
 * command line: one or more {@code <number><unit>} parts, unit {@code ms}, {@code s}, {@code m} or
 * {@code h} ({@code 250ms}, {@code 30s}, {@code 1m30s}, {@code 1.5s}); a bare number means seconds.
 * Units are case-insensitive and blanks around the parts are ignored.
 */
public final class Durations {
  private static final Pattern WHOLE =
      Pattern.compile(
          "^\\s*(?:\\d+(?:\\.\\d+)?\\s*|(?:\\d+(?:\\.\\d+)?\\s*(?:ms|s|m|h)\\s*)+)$",
          Pattern.CASE_INSENSITIVE);
  private static final Pattern PART =
      Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h)?", Pattern.CASE_INSENSITIVE);

  private static final Pattern BARE_NUMBER = Pattern.compile("^\\s*\\d+(?:\\.\\d+)?\\s*$");

  private Durations() {}

  /**
   * Parses {@code text}.
   *
   * @throws IllegalArgumentException when the text is not a duration
   */
  public static Duration parse(String text) {
    if (text == null || !WHOLE.matcher(text).matches()) {
      throw new IllegalArgumentException(
          "'" + text + "' is not a duration (use e.g. 250ms, 30s, 10m, 1m30s, 1h)");
    }
    Matcher m = PART.matcher(text);
    double nanos = 0;
    while (m.find()) {
      double value = Double.parseDouble(m.group(1));
      String unit = m.group(2) == null ? "s" : m.group(2).toLowerCase(Locale.ROOT);
      nanos +=
          switch (unit) {
            case "ms" -> value * 1e6;
            case "s" -> value * 1e9;
            case "m" -> value * 60e9;
            default -> value * 3600e9;
          };
    }
    return Duration.ofNanos(Math.round(nanos));
  }

  /**
   * Parses a command-line or plan value that must be above zero and carry its unit: there a bare
   * {@code 10} could mean anything, so it is refused.
   *
   * @param name the flag or key being parsed, named in the error
   * @throws IllegalArgumentException naming {@code name} when the text is not a positive duration
   */
  public static Duration parsePositive(String name, String text) {
    Duration d = Duration.ZERO;
    if (text != null && !BARE_NUMBER.matcher(text).matches()) {
      try {
        d = parse(text);
      } catch (IllegalArgumentException e) {
        // reported below, naming the flag
      }
    }
    if (d.isZero()) {
      throw new IllegalArgumentException(
          name
              + " must be a positive duration such as 500ms, 10s, 2m or 1m30s, got '"
              + text
              + "'");
    }
    return d;
  }

  /** Formats a duration in the largest whole unit ({@code 90s}, {@code 10m}, {@code 1500ms}). */
  public static String format(Duration d) {
    long ms = d.toMillis();
    if (ms % 3_600_000 == 0 && ms > 0) {
      return ms / 3_600_000 + "h";
    }
    if (ms % 60_000 == 0 && ms > 0) {
      return ms / 60_000 + "m";
    }
    if (ms % 1000 == 0) {
      return ms / 1000 + "s";
    }
    return ms + "ms";
  }
}
