package io.phasemeter.load.workload.replay;

import java.time.DateTimeException;
import java.time.LocalDate;

/**
 * The Azure LLM inference trace's {@code TIMESTAMP}, {@code 2023-11-16 18:15:46.6805900}: a UTC
 * date and time with up to 9 fractional digits (a {@code T} between them and a {@code Z} after them
 * are taken too), as nanoseconds since 1970.
 */
final class AzureTime {
  private AzureTime() {}

  static final String EXAMPLE = "2023-11-16 18:15:46.6805900";

  static long parse(String s, long line, TraceReader r) {
    String t = s.endsWith("Z") ? s.substring(0, s.length() - 1) : s;
    // yyyy-MM-dd HH:mm:ss[.f…]
    if (t.length() < 19
        || t.length() == 20
        || t.length() > 29
        || t.charAt(4) != '-'
        || t.charAt(7) != '-'
        || (t.charAt(10) != ' ' && t.charAt(10) != 'T')
        || t.charAt(13) != ':'
        || t.charAt(16) != ':'
        || (t.length() > 19 && t.charAt(19) != '.')) {
      throw bad(line, r);
    }
    try {
      int year = digits(t, 0, 4);
      int month = digits(t, 5, 7);
      int day = digits(t, 8, 10);
      int hour = digits(t, 11, 13);
      int minute = digits(t, 14, 16);
      int second = digits(t, 17, 19);
      long nanos = 0;
      if (t.length() > 19) {
        String frac = t.substring(20);
        nanos = digits(frac, 0, frac.length());
        for (int i = frac.length(); i < 9; i++) {
          nanos *= 10;
        }
      }
      if (hour > 23 || minute > 59 || second > 59) {
        throw bad(line, r);
      }
      long days = LocalDate.of(year, month, day).toEpochDay();
      if (days < 0) {
        throw r.error(line, "TIMESTAMP must be in 1970 or later");
      }
      long minutes = (days * 24 + hour) * 60 + minute;
      return Math.addExact(
          Math.multiplyExact(minutes, 60_000_000_000L), second * 1_000_000_000L + nanos);
    } catch (ArithmeticException e) {
      throw r.error(line, "TIMESTAMP must be before the year 2262 (nanoseconds since 1970)");
    } catch (NumberFormatException | DateTimeException e) {
      throw bad(line, r);
    }
  }

  private static int digits(String s, int from, int to) {
    if (from >= to) {
      throw new NumberFormatException();
    }
    int v = 0;
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        throw new NumberFormatException();
      }
      v = v * 10 + (c - '0');
    }
    return v;
  }

  private static IllegalArgumentException bad(long line, TraceReader r) {
    return r.error(
        line,
        "TIMESTAMP must be a UTC date and time such as "
            + EXAMPLE
            + " (up to 9 fractional digits)");
  }
}
