package io.phasemeter.load.workload.replay;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import io.phasemeter.load.workload.Utf8;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

/**
 * Reads a trace file in one pass and checks every row it keeps before anything is sent: every
 * problem is one {@link IllegalArgumentException} whose message is {@code --replay FILE:LINE: what}
 * (the caller adds {@code phasemeter load: }). Bounded: lines of at most {@link
 * Limits#maxLineBytes} (a longer one is refused after reading that much of it), at most {@link
 * Limits#maxRows} rows kept, sessions and named prefixes and lengths as {@link Limits} says. Past
 * {@code --replay-limit} rows the file is not parsed: its lines are only read to the end, counted
 * (those that are not blank) and hashed by the caller; nothing of them is checked, not even their
 * time order.
 */
final class TraceReader {
  /**
   * The bounds of one trace (docs/design.md §7, "Replaying a trace").
   *
   * @param maxLineBytes the longest line, in bytes
   * @param maxRows the most rows kept to replay (after {@code --replay-limit})
   * @param maxSessions the most distinct session ids
   * @param maxPrefixes the most distinct named prefixes ({@code jsonl})
   * @param maxHashIds the most hash ids the replayed rows may name together
   * @param maxTokens the longest input or output of a row
   */
  record Limits(
      int maxLineBytes,
      long maxRows,
      int maxSessions,
      int maxPrefixes,
      long maxHashIds,
      int maxTokens) {
    static final Limits DEFAULT =
        new Limits(1 << 20, 10_000_000, 1_000_000, 1_000_000, 20_000_000, 1 << 20);
  }

  /** The longest session id or prefix id, in characters (printable ASCII). */
  static final int MAX_ID_CHARS = 128;

  private static final JsonFactory JSON =
      JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

  private final String name;
  private final Replay.Format given;
  private final long limit;
  private final Limits limits;

  /**
   * @param name the file as the user gave it, for the messages
   * @param format the file's format, or null: told from its first row ({@code timestamp}: mooncake,
   *     {@code offset_ms}: jsonl)
   * @param limit rows to keep (0: all)
   */
  TraceReader(String name, Replay.Format format, long limit, Limits limits) {
    this.name = name;
    this.given = format;
    this.limit = limit;
    this.limits = limits;
  }

  /** Reads and checks the whole stream. */
  Trace read(InputStream in) throws IOException {
    LineReader lines = new LineReader(in, limits.maxLineBytes());
    Replay.Format format = given;
    TraceBuilder rows = null;
    Row row = new Row();
    AzureHeader header = null;
    try {
      while (lines.next()) {
        if (lines.blank()) {
          continue;
        }
        long n = lines.number();
        if (!Utf8.valid(lines.bytes(), lines.length())) {
          throw error(n, "not UTF-8 text");
        }
        if (format == null) {
          format = detect(lines.bytes(), lines.length(), n);
        }
        if (rows == null) {
          rows = new TraceBuilder(name, format, limit, limits);
        }
        if (format == Replay.Format.AZURE && header == null) {
          header = AzureHeader.of(text(lines), n, this);
          continue;
        }
        row.clear();
        if (format == Replay.Format.AZURE) {
          header.parse(text(lines), n, row, this);
        } else {
          parseJson(format, lines.bytes(), lines.length(), n, row);
        }
        rows.add(row, n);
        if (rows.full()) {
          // --replay-limit reached: the rest is counted, not parsed.
          rows.notParsed(lines.countRest());
          break;
        }
      }
    } catch (LineReader.TooLong e) {
      throw error(
          e.line,
          String.format(
              Locale.ROOT,
              "the line is longer than %,d bytes (the limit): not a trace row",
              limits.maxLineBytes()));
    }
    if (rows == null || rows.kept() == 0 && rows.fileRows() == 0) {
      throw new IllegalArgumentException(
          "--replay "
              + name
              + ": the file has no rows"
              + (header != null ? " (a header only)" : ""));
    }
    if (rows.kept() == 0) {
      throw new IllegalArgumentException(
          "--replay "
              + name
              + ": no row to replay: every one of its "
              + rows.fileRows()
              + " rows has a length of 0");
    }
    return rows.build();
  }

  /** {@code --replay FILE:LINE: what}. */
  IllegalArgumentException error(long line, String what) {
    return new IllegalArgumentException("--replay " + name + ":" + line + ": " + what);
  }

  private static String text(LineReader lines) {
    return new String(lines.bytes(), 0, lines.length(), StandardCharsets.UTF_8);
  }

  /** The format of a JSON first row: {@code timestamp} for mooncake, {@code offset_ms} for ours. */
  private Replay.Format detect(byte[] bytes, int length, long line) throws IOException {
    try (JsonParser p = JSON.createParser(bytes, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw error(line, NOT_JSON_TO_TELL);
      }
      boolean timestamp = false;
      boolean offset = false;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        timestamp |= field.equals("timestamp");
        offset |= field.equals("offset_ms");
        p.nextToken();
        p.skipChildren();
      }
      if (timestamp == offset) {
        throw error(
            line,
            "cannot tell the format: the first row must have timestamp (mooncake) or offset_ms"
                + " (jsonl); give --replay-format");
      }
      return timestamp ? Replay.Format.MOONCAKE : Replay.Format.JSONL;
    } catch (JsonProcessingException e) {
      throw error(line, NOT_JSON_TO_TELL);
    }
  }

  private static final String NOT_JSON_TO_TELL =
      "not JSON: cannot tell the format (a .csv file is read as azure; or give --replay-format)";

  private static String notJson(JsonProcessingException e) {
    // Jackson's own message quotes the content; the column is enough to find it.
    String where =
        e.getLocation() == null ? "" : " (at column " + e.getLocation().getColumnNr() + ")";
    String m = e.getOriginalMessage();
    return (m != null && m.startsWith("Duplicate field") ? "a field appears twice" : "not JSON")
        + where;
  }

  /** One row's fields, whatever the format said them in. */
  static final class Row {
    long timeNanos = -1;
    long input = -1;
    long output = -1;
    final Columns.Longs hashIds = new Columns.Longs(64);
    String session;
    String prefix;
    long prefixLength = -1;

    /** AIPerf's {@code delay} in nanoseconds, or -1 without one. */
    long delayNanos = -1;

    void clear() {
      timeNanos = -1;
      delayNanos = -1;
      input = -1;
      output = -1;
      hashIds.clear();
      session = null;
      prefix = null;
      prefixLength = -1;
    }
  }

  private void parseJson(Replay.Format format, byte[] bytes, int length, long line, Row row)
      throws IOException {
    boolean mooncake = format == Replay.Format.MOONCAKE;
    String time = mooncake ? "timestamp" : "offset_ms";
    boolean textInput = false;
    try (JsonParser p = JSON.createParser(bytes, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw error(line, "not a JSON object (one object a line)");
      }
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken v = p.nextToken();
        if (field.equals(time)) {
          row.timeNanos = millisAsNanos(p, v, field, line);
        } else if (field.equals("input_length")) {
          row.input = whole(p, v, field, line);
        } else if (field.equals("output_length")) {
          row.output = whole(p, v, field, line);
        } else if (field.equals("hash_ids")) {
          hashIds(p, v, line, row);
        } else if (field.equals(mooncake ? "session_id" : "session")) {
          row.session = id(p, v, field, line);
        } else if (!mooncake && field.equals("prefix")) {
          row.prefix = id(p, v, field, line);
        } else if (!mooncake && field.equals("prefix_length")) {
          row.prefixLength = v == JsonToken.VALUE_NULL ? -1 : whole(p, v, field, line);
        } else if (mooncake && field.equals("delay")) {
          // AIPerf's: a later turn's wait after its previous turn's answer (TraceBuilder).
          row.delayNanos = v == JsonToken.VALUE_NULL ? -1 : millisAsNanos(p, v, field, line);
        } else {
          textInput |= field.equals("text_input") || field.equals("messages");
          p.skipChildren();
        }
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw error(line, "not one JSON object (one object a line)");
      }
    } catch (JsonProcessingException e) {
      throw error(line, notJson(e));
    }
    if (row.timeNanos < 0 && !mooncake) {
      // A Mooncake row may go without: a later turn of a session (TraceBuilder says).
      throw error(line, time + " is missing");
    }
    if (row.input < 0) {
      throw error(
          line,
          "input_length is missing"
              + (textInput
                  ? " (text_input and messages are not replayed: the replay sends token ids of"
                      + " input_length)"
                  : ""));
    }
    if (row.output < 0) {
      throw error(line, "output_length is missing");
    }
  }

  /** A number of milliseconds (≥ 0, a fraction allowed) as whole nanoseconds. */
  private long millisAsNanos(JsonParser p, JsonToken v, String field, long line)
      throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT && v != JsonToken.VALUE_NUMBER_FLOAT) {
      throw error(line, field + " must be a number of milliseconds, got " + kind(v));
    }
    if (v == JsonToken.VALUE_NUMBER_INT && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
      long ms = p.getLongValue();
      if (ms >= 0 && ms <= Long.MAX_VALUE / 1_000_000) {
        return ms * 1_000_000;
      }
    }
    BigDecimal ms = p.getDecimalValue();
    if (ms.signum() < 0) {
      throw error(line, field + " must be 0 or more, got " + ms.toPlainString());
    }
    try {
      return ms.movePointRight(6).setScale(0, RoundingMode.HALF_EVEN).longValueExact();
    } catch (ArithmeticException e) {
      throw error(line, field + " is too large (more than 292 years in nanoseconds)");
    }
  }

  /** A whole number of 0 or more (an integral fraction such as 655.0 too). */
  private long whole(JsonParser p, JsonToken v, String field, long line) throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT && v != JsonToken.VALUE_NUMBER_FLOAT) {
      throw error(line, field + " must be a whole number, got " + kind(v));
    }
    if (v == JsonToken.VALUE_NUMBER_INT && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
      long n = p.getLongValue();
      if (n >= 0) {
        return n;
      }
    }
    BigDecimal d = p.getDecimalValue();
    if (d.signum() < 0) {
      throw error(line, field + " must be at least 1, got " + d.toPlainString());
    }
    try {
      return d.longValueExact();
    } catch (ArithmeticException e) {
      throw error(
          line,
          field
              + (d.stripTrailingZeros().scale() > 0
                  ? " must be a whole number, got " + d.toPlainString()
                  : " is too large"));
    }
  }

  private void hashIds(JsonParser p, JsonToken v, long line, Row row) throws IOException {
    if (v == JsonToken.VALUE_NULL) {
      return;
    }
    if (v != JsonToken.START_ARRAY) {
      throw error(line, "hash_ids must be an array of whole numbers of 0 or more, got " + kind(v));
    }
    JsonToken t;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t != JsonToken.VALUE_NUMBER_INT
          || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
          || p.getLongValue() < 0) {
        throw error(
            line,
            "hash_ids must be an array of whole numbers of 0 or more (below 2^63), got "
                + (t == JsonToken.VALUE_NUMBER_INT ? "one out of that range" : kind(t))
                + " at position "
                + (row.hashIds.size() + 1));
      }
      row.hashIds.add(p.getLongValue());
    }
  }

  /** A session or prefix id: printable ASCII, 1 to {@link #MAX_ID_CHARS} characters. */
  private String id(JsonParser p, JsonToken v, String field, long line) throws IOException {
    if (v == JsonToken.VALUE_NULL) {
      return null;
    }
    if (v != JsonToken.VALUE_STRING) {
      throw error(line, field + " must be a string, got " + kind(v));
    }
    String s = p.getText();
    if (!printableId(s)) {
      // The id itself is not repeated: it is the user's, of any length.
      throw error(
          line,
          field
              + " must be 1 to "
              + MAX_ID_CHARS
              + " printable ASCII characters (it is sent as a header)");
    }
    return s;
  }

  static boolean printableId(String s) {
    if (s.isEmpty() || s.length() > MAX_ID_CHARS) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x20 || c > 0x7e) {
        return false;
      }
    }
    return true;
  }

  private static String kind(JsonToken t) {
    if (t == null) {
      return "nothing";
    }
    return switch (t) {
      case VALUE_STRING -> "a string";
      case VALUE_NULL -> "null";
      case VALUE_TRUE, VALUE_FALSE -> "a boolean";
      case START_ARRAY -> "an array";
      case START_OBJECT -> "an object";
      case VALUE_NUMBER_FLOAT -> "a fraction";
      default -> "a number";
    };
  }

  /** The Azure CSV's header: where its three columns are. */
  private record AzureHeader(int time, int context, int generated, int fields) {
    static final String TIME = "TIMESTAMP";
    static final String CONTEXT = "ContextTokens";
    static final String GENERATED = "GeneratedTokens";

    static AzureHeader of(String line, long n, TraceReader r) {
      List<String> h = Csv.split(line);
      int time = -1;
      int context = -1;
      int generated = -1;
      for (int i = 0; i < h.size(); i++) {
        String f = h.get(i).trim();
        if (f.equalsIgnoreCase(TIME)) {
          time = i;
        } else if (f.equalsIgnoreCase(CONTEXT)) {
          context = i;
        } else if (f.equalsIgnoreCase(GENERATED)) {
          generated = i;
        }
      }
      if (time < 0 || context < 0 || generated < 0) {
        throw r.error(
            n,
            "the header must name TIMESTAMP, ContextTokens and GeneratedTokens (Azure's LLM"
                + " inference trace; missing: "
                + String.join(
                    ", ",
                    java.util.stream.Stream.of(
                            time < 0 ? TIME : null,
                            context < 0 ? CONTEXT : null,
                            generated < 0 ? GENERATED : null)
                        .filter(java.util.Objects::nonNull)
                        .toList())
                + ")");
      }
      return new AzureHeader(time, context, generated, h.size());
    }

    void parse(String line, long n, Row row, TraceReader r) {
      List<String> f = Csv.split(line);
      int need = Math.max(time, Math.max(context, generated)) + 1;
      if (f.size() < need) {
        throw r.error(n, "has " + f.size() + " fields, the header " + fields);
      }
      row.timeNanos = AzureTime.parse(f.get(time).trim(), n, r);
      row.input = count(f.get(context).trim(), CONTEXT, n, r);
      row.output = count(f.get(generated).trim(), GENERATED, n, r);
    }

    private static long count(String s, String field, long n, TraceReader r) {
      if (s.isEmpty() || s.length() > 18 || !s.chars().allMatch(c -> c >= '0' && c <= '9')) {
        throw r.error(
            n,
            field
                + " must be a whole number of 0 or more"
                + (s.startsWith("-") ? ", got " + (s.length() > 20 ? "a negative one" : s) : ""));
      }
      return Long.parseLong(s);
    }
  }
}
