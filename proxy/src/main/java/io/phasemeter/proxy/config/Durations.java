package io.phasemeter.proxy.config;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses the short duration notation used in proxy.yaml: {@code 250ms}, {@code 30s}, {@code 10m}.
 */
public final class Durations {
  private static final Pattern FORMAT =
      Pattern.compile("^\\s*(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h)?\\s*$", Pattern.CASE_INSENSITIVE);

  private Durations() {}

  /**
   * Parses {@code text}; a bare number means seconds.
   *
   * @throws IllegalArgumentException when the text is not a duration
   */
  public static Duration parse(String text) {
    Matcher m = FORMAT.matcher(text == null ? "" : text);
    if (!m.matches()) {
      throw new IllegalArgumentException(
          "'" + text + "' is not a duration (use e.g. 250ms, 30s, 10m, 1h)");
    }
    double value = Double.parseDouble(m.group(1));
    String unit = m.group(2) == null ? "s" : m.group(2).toLowerCase(Locale.ROOT);
    double nanosPerUnit =
        switch (unit) {
          case "ms" -> 1e6;
          case "s" -> 1e9;
          case "m" -> 60e9;
          case "h" -> 3600e9;
          default -> throw new IllegalArgumentException("unknown unit " + unit);
        };
    return Duration.ofNanos(Math.round(value * nanosPerUnit));
  }

  /** Formats a duration back into the short notation. */
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
