package io.phasemeter.load.workload.replay;

import java.time.DateTimeException;
import java.time.LocalDate;

/**
 * The Azure LLM inference trace's {@code TIMESTAMP} as nanoseconds since 1970: 2023's {@code
 * 2023-11-16 18:15:46.6805900}, a UTC date and time with up to 9 fractional digits, and 2024's
 * {@code 2024-05-10 00:00:00.009930+00:00}, the same with its offset from UTC (a {@code T} between
 * date and time and a {@code Z} after them are taken too; an offset {@code ±HH:MM} other than
 * {@code +00:00} is subtracted).
 */
final class AzureTime {
  private AzureTime() {}

  static final String EXAMPLE = "2023-11-16 18:15:46.6805900";

  static long parse(String s, long line, TraceReader r) {
    String t = s.endsWith("Z") ? s.substring(0, s.length() - 1) : s;
    long offsetMinutes = 0;
    int o = t.length() - 6;
    if (o >= 19 && (t.charAt(o) == '+' || t.charAt(o) == '-') && t.charAt(o + 3) == ':') {
      try {
        int hours = digits(t, o + 1, o + 3);
        int minutes = digits(t, o + 4, o + 6);
        if (hours > 23 || minutes > 59) {
          throw bad(line, r);
        }
        offsetMinutes = (t.charAt(o) == '-' ? -1 : 1) * (hours * 60L + minutes);
      } catch (NumberFormatException e) {
        throw bad(line, r);
      }
      t = t.substring(0, o);
    }
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
      long minutes = (days * 24 + hour) * 60 + minute - offsetMinutes;
      if (minutes < 0) {
        throw r.error(line, "TIMESTAMP must be in 1970 or later");
      }
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
            + " (up to 9 fractional digits, an offset such as +00:00 after them)");
  }
}
