package io.phasemeter.proxy.upstream;

import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;

/**
 * A pull tokenizer over one JSON document held as UTF-8 bytes in a {@link Buffer}, for {@link
 * StreamChunk}: the few calls of Jackson's {@code JsonParser} it needs, without allocating. A
 * Jackson parser per payload allocated 808 bytes for every content chunk of every stream (JMH
 * {@code RelayBenchmark.inspect}); this is Phasemeter's hot path, so it gets its own tokenizer.
 *
 * <p>As strict as a default Jackson {@code JsonFactory}, which it replaces there: RFC 8259 syntax
 * only (no comments, trailing commas, single quotes, leading zeros, NaN or unescaped control
 * characters), and Jackson's default {@code StreamReadConstraints} (nesting depth, number length,
 * field name length; string length where a value is read). Bytes of 0x80 and above are taken as
 * they are inside strings, as decoding to a String first made them (malformed UTF-8 became U+FFFD),
 * and are an error anywhere else. Every error, wherever it is, is the one {@link #MALFORMED}.
 *
 * <p>Not thread-safe; reused, one document after another ({@link #reset}). It scans a copy of the
 * document in an array it keeps (up to {@value #KEPT_BYTES} bytes): one copy is faster than reading
 * a Buffer byte by byte, and allocates nothing.
 */
final class JsonCursor {
  static final int END = 0;
  static final int START_OBJECT = 1;
  static final int END_OBJECT = 2;
  static final int START_ARRAY = 3;
  static final int END_ARRAY = 4;
  static final int FIELD_NAME = 5;
  static final int STRING = 6;
  static final int INT = 7;
  static final int FLOAT = 8;
  static final int TRUE = 9;
  static final int FALSE = 10;
  static final int NULL = 11;

  // Jackson's StreamReadConstraints defaults (2.15 on).
  static final int MAX_DEPTH = 1000;
  static final int MAX_NUMBER_LENGTH = 1000;
  static final int MAX_NAME_LENGTH = 50_000;
  static final int MAX_STRING_LENGTH = 20_000_000;

  /** The document is not valid JSON, or breaks a limit. One shared instance, no stack trace. */
  static final class MalformedJson extends Exception {
    private MalformedJson() {
      super("malformed JSON", null, false, false);
    }
  }

  static final MalformedJson MALFORMED = new MalformedJson();

  // The largest scratch array kept between documents; a larger document gets an array of its own.
  static final int KEPT_BYTES = 64 * 1024;

  private byte[] scratch = new byte[1024];
  // The document, from 0 to end: scratch, or a larger array for this document only.
  private byte[] in;
  private int pos;
  private int end;
  // Open containers; bit d of objects is set when the container at depth d is an object.
  private int depth;
  private final long[] objects = new long[MAX_DEPTH / 64 + 1];
  // The open container's last member or element is complete: a comma or its end comes next.
  private boolean afterValue;
  // A FIELD_NAME was returned: a colon and its value come next.
  private boolean nameRead;
  private int token;
  // The current string or name (between the quotes) or number: [start, stop) of the input.
  private int start;
  private int stop;
  private boolean escaped;
  // The current name decoded, when it has escapes and was compared.
  private String decodedName;

  /** Points the cursor at a copy of the document in [from, to) of {@code document}. */
  void reset(Buffer document, int from, int to) {
    int n = to - from;
    if (n > scratch.length && n <= KEPT_BYTES) {
      scratch = new byte[Math.max(n, Math.min(2 * scratch.length, KEPT_BYTES))];
    }
    in = n <= scratch.length ? scratch : new byte[n];
    document.getBytes(from, to, in, 0);
    pos = 0;
    end = n;
    depth = 0;
    afterValue = false;
    nameRead = false;
    token = END;
    decodedName = null;
  }

  /** Lets go of the input. */
  void release() {
    in = null;
    decodedName = null;
  }

  /**
   * The next token: {@link #END} once the input is used up outside any container. Like Jackson, it
   * returns the start of another value after the root one; the caller decides what that means.
   */
  int next() throws MalformedJson {
    if (nameRead) {
      nameRead = false;
      skipWhitespace();
      if (pos == end || in[pos] != ':') {
        throw MALFORMED;
      }
      pos++;
      skipWhitespace();
      return token = value();
    }
    skipWhitespace();
    if (pos == end) {
      if (depth > 0) {
        throw MALFORMED;
      }
      return token = END;
    }
    if (depth == 0) {
      return token = value();
    }
    boolean object = (objects[depth >> 6] & (1L << depth)) != 0;
    byte c = in[pos];
    if (c == (object ? '}' : ']')) {
      pos++;
      depth--;
      afterValue = true;
      return token = object ? END_OBJECT : END_ARRAY;
    }
    if (afterValue) {
      if (c != ',') {
        throw MALFORMED;
      }
      pos++;
      skipWhitespace();
    }
    afterValue = true;
    if (!object) {
      return token = value();
    }
    if (pos == end || in[pos] != '"') {
      throw MALFORMED;
    }
    pos++;
    string();
    decodedName = null;
    if (stop - start > MAX_NAME_LENGTH && text().length() > MAX_NAME_LENGTH) {
      throw MALFORMED;
    }
    nameRead = true;
    return token = FIELD_NAME;
  }

  /**
   * After {@link #START_OBJECT} or {@link #START_ARRAY}, moves past the matching end; after any
   * other token, does nothing (Jackson's {@code skipChildren}).
   */
  void skipChildren() throws MalformedJson {
    if (token != START_OBJECT && token != START_ARRAY) {
      return;
    }
    int outside = depth - 1;
    while (depth > outside) {
      next();
    }
  }

  /** Whether the current {@link #FIELD_NAME}, decoded, is {@code ascii}. */
  boolean nameIs(String ascii) {
    if (escaped) {
      if (decodedName == null) {
        decodedName = text();
      }
      return decodedName.equals(ascii);
    }
    return textIs(ascii);
  }

  /**
   * Whether the current {@link #STRING} or {@link #FIELD_NAME}, written without escapes, is {@code
   * ascii}; a string with escapes never is (use {@link #text()}).
   */
  boolean textIs(String ascii) {
    int n = ascii.length();
    if (escaped || stop - start != n) {
      return false;
    }
    for (int k = 0; k < n; k++) {
      if (in[start + k] != ascii.charAt(k)) {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether the current {@link #STRING}, written without escapes, ends with {@code ascii}; one with
   * escapes never does.
   */
  boolean textEndsWith(String ascii) {
    int n = ascii.length();
    if (escaped || stop - start < n) {
      return false;
    }
    for (int k = 0; k < n; k++) {
      if (in[stop - n + k] != ascii.charAt(k)) {
        return false;
      }
    }
    return true;
  }

  /** Whether the current {@link #STRING} is {@code ""}. */
  boolean textEmpty() {
    // Every escape stands for at least one character.
    return stop == start;
  }

  /**
   * The current {@link #STRING} or {@link #FIELD_NAME}, decoded: allocates; for the rare values
   * that are read.
   */
  String text() {
    String raw = new String(in, start, stop - start, StandardCharsets.UTF_8);
    return escaped ? unescape(raw) : raw;
  }

  /**
   * The current {@link #STRING}, decoded, as Jackson's {@code getText()} gives it: a string over
   * Jackson's length limit is an error when read.
   */
  String readText() throws MalformedJson {
    String text = text();
    if (text.length() > MAX_STRING_LENGTH) {
      throw MALFORMED;
    }
    return text;
  }

  /**
   * A token count: the value {@code value} (the token just read) as a long when it is an {@link
   * #INT}, else -1 with the value skipped (usage fields in streams and bodies).
   */
  long count(int value) throws MalformedJson {
    if (value == INT) {
      return longValue();
    }
    skipChildren();
    return -1;
  }

  /** The current {@link #INT} as a long; one out of its range is an error, as in Jackson. */
  long longValue() throws MalformedJson {
    int p = start;
    boolean negative = in[p] == '-';
    if (negative) {
      p++;
    }
    // Accumulated negative, so that Long.MIN_VALUE fits.
    long value = 0;
    for (; p < stop; p++) {
      int digit = in[p] - '0';
      if (value < (Long.MIN_VALUE + digit) / 10) {
        throw MALFORMED;
      }
      value = value * 10 - digit;
    }
    if (negative) {
      return value;
    }
    if (value == Long.MIN_VALUE) {
      throw MALFORMED;
    }
    return -value;
  }

  private int value() throws MalformedJson {
    if (pos == end) {
      throw MALFORMED;
    }
    byte c = in[pos++];
    switch (c) {
      case '{':
        return open(true);
      case '[':
        return open(false);
      case '"':
        string();
        return STRING;
      case 't':
        literal("rue");
        return TRUE;
      case 'f':
        literal("alse");
        return FALSE;
      case 'n':
        literal("ull");
        return NULL;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number(pos - 1);
        }
        throw MALFORMED;
    }
  }

  private int open(boolean object) throws MalformedJson {
    if (++depth > MAX_DEPTH) {
      throw MALFORMED;
    }
    if (object) {
      objects[depth >> 6] |= 1L << depth;
    } else {
      objects[depth >> 6] &= ~(1L << depth);
    }
    afterValue = false;
    return object ? START_OBJECT : START_ARRAY;
  }

  /** After the opening quote: to just after the closing one; [start, stop) is the content. */
  private void string() throws MalformedJson {
    int p = pos;
    start = p;
    escaped = false;
    while (true) {
      if (p == end) {
        throw MALFORMED;
      }
      byte b = in[p++];
      if (b == '"') {
        break;
      }
      if (b == '\\') {
        escaped = true;
        if (p == end) {
          throw MALFORMED;
        }
        switch (in[p++]) {
          case '"', '\\', '/', 'b', 'f', 'n', 'r', 't' -> {}
          case 'u' -> {
            for (int k = 0; k < 4; k++) {
              if (p == end || hex(in[p++]) < 0) {
                throw MALFORMED;
              }
            }
          }
          default -> throw MALFORMED;
        }
      } else if (b >= 0 && b < 0x20) {
        // An unescaped control character; bytes of 0x80 and up are negative here.
        throw MALFORMED;
      }
    }
    stop = p - 1;
    pos = p;
  }

  /** From the first character: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  private int number(int from) throws MalformedJson {
    int p = from;
    if (in[p] == '-') {
      p++;
    }
    int intStart = p;
    if (p < end && in[p] == '0') {
      p++;
      if (p < end && isDigit(in[p])) {
        throw MALFORMED;
      }
    } else {
      p = digits(p);
    }
    int length = p - intStart;
    if (length == 0) {
      throw MALFORMED;
    }
    boolean fraction = false;
    if (p < end && in[p] == '.') {
      fraction = true;
      int digitsStart = ++p;
      p = digits(p);
      if (p == digitsStart) {
        throw MALFORMED;
      }
      length += p - digitsStart;
    }
    if (p < end && (in[p] | 0x20) == 'e') {
      fraction = true;
      p++;
      if (p < end && (in[p] == '+' || in[p] == '-')) {
        p++;
      }
      int digitsStart = p;
      p = digits(p);
      if (p == digitsStart) {
        throw MALFORMED;
      }
      length += p - digitsStart;
    }
    if (length > MAX_NUMBER_LENGTH) {
      throw MALFORMED;
    }
    start = from;
    stop = p;
    pos = p;
    return fraction ? FLOAT : INT;
  }

  private int digits(int p) {
    while (p < end && isDigit(in[p])) {
      p++;
    }
    return p;
  }

  private void literal(String rest) throws MalformedJson {
    int n = rest.length();
    if (end - pos < n) {
      throw MALFORMED;
    }
    for (int k = 0; k < n; k++) {
      if (in[pos + k] != rest.charAt(k)) {
        throw MALFORMED;
      }
    }
    pos += n;
  }

  private void skipWhitespace() {
    while (pos < end) {
      byte b = in[pos];
      if (b != ' ' && b != '\n' && b != '\r' && b != '\t') {
        return;
      }
      pos++;
    }
  }

  private static boolean isDigit(byte b) {
    return b >= '0' && b <= '9';
  }

  private static int hex(int c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  }

  /** Decodes the escapes of a string the tokenizer already checked. */
  private static String unescape(String s) {
    StringBuilder out = new StringBuilder(s.length());
    for (int k = 0; k < s.length(); k++) {
      char c = s.charAt(k);
      if (c != '\\') {
        out.append(c);
        continue;
      }
      char e = s.charAt(++k);
      switch (e) {
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          int code = 0;
          for (int h = 0; h < 4; h++) {
            code = code << 4 | hex(s.charAt(++k));
          }
          out.append((char) code);
        }
        default -> out.append(e);
      }
    }
    return out.toString();
  }
}
