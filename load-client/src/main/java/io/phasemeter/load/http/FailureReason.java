package io.phasemeter.load.http;

import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * Why a request failed, as one short line that every output can hold as it is: the live FAIL line,
 * a pairs.csv field, summary.json, the report. An engine's message comes in as the engine wrote it;
 * what goes out is at most {@value #MAX_CHARS} characters (then an ellipsis), on one line, without
 * a control or format character (an ANSI escape, a line break, a bidi override, a NUL), and without
 * anything shaped like an API key.
 */
public final class FailureReason {
  /** The longest reason kept, in characters (code points), before the ellipsis. */
  public static final int MAX_CHARS = 200;

  /**
   * The longest text read from an engine's message before cleaning: enough for {@value #MAX_CHARS}
   * characters once runs of blanks are folded, without copying a message of megabytes.
   */
  static final int MAX_READ_CHARS = 4 * MAX_CHARS;

  private static final String ELLIPSIS = "\u2026";

  // OpenAI-style secret keys (sk-…, sk-proj-…) and bearer tokens quoted in a message.
  private static final Pattern KEY =
      Pattern.compile("(?i)\\b(sk-|bearer\\s+)[A-Za-z0-9._~+/=-]{8,}");

  private FailureReason() {}

  /**
   * {@code text} made fit for one line of any output: control and format characters (and lone
   * surrogates) become blanks, runs of blanks one space, the ends trimmed, key-shaped tokens
   * replaced by {@code [key]}, and the whole cut at {@value #MAX_CHARS} characters with an
   * ellipsis.
   *
   * @return null for null; the cleaned text otherwise (empty when nothing printable was left)
   */
  public static String clean(String text) {
    if (text == null) {
      return null;
    }
    StringBuilder b = new StringBuilder(Math.min(text.length(), MAX_READ_CHARS));
    boolean blank = false;
    int n = text.length();
    for (int i = 0; i < n; ) {
      int cp = text.codePointAt(i);
      i += Character.charCount(cp);
      if (Character.isWhitespace(cp) || !printable(cp)) {
        blank = b.length() > 0;
        continue;
      }
      if (blank) {
        b.append(' ');
        blank = false;
      }
      b.appendCodePoint(cp);
      if (b.length() > MAX_READ_CHARS) {
        break;
      }
    }
    String s = KEY.matcher(b).replaceAll("$1[key]");
    if (s.codePointCount(0, s.length()) <= MAX_CHARS) {
      return s;
    }
    return s.substring(0, s.offsetByCodePoints(0, MAX_CHARS)).stripTrailing() + ELLIPSIS;
  }

  /**
   * {@code prefix + ": " + message}, or {@code prefix} alone when the message is null or holds
   * nothing printable; cleaned when the result is (in {@link Exchange}'s end).
   */
  static String withMessage(String prefix, String message) {
    String m = clean(message);
    return m == null || m.isEmpty() ? prefix : prefix + ": " + message;
  }

  /**
   * {@code text} with every occurrence of {@code secret} (at least 8 characters) replaced by {@code
   * [key]}: a message that quotes the key the request carried.
   */
  static String redact(String text, String secret) {
    if (text == null || secret == null || secret.length() < 8) {
      return text;
    }
    return text.replace(secret, "[key]");
  }

  /** Why a connection could not be made: a short fixed phrase, never the exception's message. */
  static String connect(Throwable cause) {
    for (Throwable t = cause; t != null; t = t.getCause()) {
      if (t instanceof UnknownHostException) {
        return "unknown host";
      }
      if (t instanceof NoRouteToHostException) {
        return "no route to host";
      }
      if (t instanceof javax.net.ssl.SSLException) {
        return "TLS handshake failed";
      }
      if (t instanceof io.netty.channel.ConnectTimeoutException) {
        return "connect timed out";
      }
      if (t instanceof ConnectException) {
        String m = t.getMessage();
        return m != null && m.toLowerCase(Locale.ROOT).contains("refused")
            ? "connection refused"
            : "could not connect (" + t.getClass().getSimpleName() + ")";
      }
    }
    return "could not connect (" + rootClass(cause) + ")";
  }

  /** The simple class name of the innermost cause. */
  static String rootClass(Throwable cause) {
    Throwable t = cause;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return t.getClass().getSimpleName();
  }

  /**
   * An HTTP error's reason: {@code HTTP <status>: <message>}, the message from an OpenAI-style body
   * ({@code {"error": {"message": …}}}, and the other shapes {@link ResponseJson#message} reads),
   * else from a {@code text/plain} body; {@code HTTP <status>} alone when the body says nothing
   * readable (empty, HTML).
   */
  static String http(int status, String contentType, byte[] body) {
    String prefix = "HTTP " + status;
    if (body == null || body.length == 0) {
      return prefix;
    }
    String message = errorMessage(body);
    if (message == null
        && contentType != null
        && contentType.toLowerCase(Locale.ROOT).startsWith("text/plain")) {
      message = new String(body, 0, Math.min(body.length, MAX_READ_CHARS), StandardCharsets.UTF_8);
    }
    return withMessage(prefix, message);
  }

  /** The message of a JSON error body, or null. */
  static String errorMessage(byte[] body) {
    ResponseJson json = body == null ? null : ResponseJson.parse(body);
    return json == null ? null : json.message;
  }

  private static boolean printable(int cp) {
    int type = Character.getType(cp);
    return type != Character.CONTROL
        && type != Character.FORMAT
        && type != Character.SURROGATE
        && type != Character.UNASSIGNED
        && type != Character.PRIVATE_USE
        && type != Character.LINE_SEPARATOR
        && type != Character.PARAGRAPH_SEPARATOR;
  }
}
