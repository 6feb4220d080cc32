package io.phasemeter.load.http;

import io.netty.channel.ConnectTimeoutException;
import io.phasemeter.core.net.StaleConnections;
import io.vertx.core.buffer.Buffer;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import javax.net.ssl.SSLException;

/**
 * Why a request failed, as one short line that every output can hold as it is: the live FAIL line,
 * a pairs.csv field, summary.json, the report.
 *
 * <p>The client's own phrases (a timeout, a connect failure, a reset: where the request stood) are
 * fixed text, shared constants where nothing varies, and go out as they are. An engine's message
 * comes in as the engine wrote it and goes out through {@link #fromEngine}: at most {@value
 * #MAX_CHARS} characters (then an ellipsis), on one line, without a control or format character (a
 * line break, a bidi override, a NUL; an ANSI CSI sequence such as a colour goes whole), without
 * anything shaped like an API key, without a quoted span longer than {@value #MAX_QUOTED_CHARS}
 * characters (generated text, a rejected value), and without any run of {@value PromptEcho#MIN_RUN}
 * or more characters that the request's own body holds (its prompt).
 */
public final class FailureReason {
  /** The longest reason kept, in characters (code points), before the ellipsis. */
  public static final int MAX_CHARS = 200;

  /**
   * The longest text read from an engine's message before cleaning: enough for {@value #MAX_CHARS}
   * characters once runs of blanks are folded, without keeping a message of megabytes.
   */
  static final int MAX_READ_CHARS = 4 * MAX_CHARS;

  /** The longest quoted span ('…' or "…") kept in an engine's message, in characters. */
  static final int MAX_QUOTED_CHARS = 32;

  static final String TIMED_OUT_WAITING = "timed out waiting for a connection";
  static final String TIMED_OUT_BEFORE_HEADERS = "timed out before the response headers";
  static final String TIMED_OUT_MID_STREAM = "timed out mid-stream, after the first token";
  static final String TIMED_OUT_BEFORE_END = "timed out before the response ended";
  private static final String BEFORE_SENT = "before the request was sent";
  private static final String BEFORE_HEADERS = "before the response headers";
  private static final String MID_RESPONSE = "mid-response";
  private static final String CLOSED_BEFORE_SENT = "connection closed " + BEFORE_SENT;
  private static final String CLOSED_BEFORE_HEADERS = "connection closed " + BEFORE_HEADERS;
  private static final String CLOSED_MID_RESPONSE = "connection closed " + MID_RESPONSE;
  static final String UNKNOWN_HOST = "unknown host";
  static final String NO_ROUTE = "no route to host";
  static final String TLS_FAILED = "TLS handshake failed";
  static final String CONNECT_TIMED_OUT = "connect timed out";
  static final String REFUSED = "connection refused";

  private static final String ELLIPSIS = "\u2026";

  // OpenAI-style secret keys (sk-…, sk-proj-…) and bearer tokens quoted in a message.
  private static final Pattern KEY =
      Pattern.compile("(?i)\\b(sk-|bearer\\s+)[A-Za-z0-9._~+/=-]{8,}");

  // A quoted span: an opening quote not inside a word, then more than MAX_QUOTED_CHARS characters
  // up to the closing quote (an apostrophe inside a word, as in "don't", does not close a '…'
  // span), or to the end of what was read (a span cut by the engine or by MAX_READ_CHARS).
  private static final Pattern SINGLE_QUOTED =
      Pattern.compile(
          "(?<![\\p{L}\\p{N}])'(?:[^']|'(?=[\\p{L}\\p{N}])){"
              + (MAX_QUOTED_CHARS + 1)
              + ",}+(?:'|$)");
  private static final Pattern DOUBLE_QUOTED =
      Pattern.compile("(?<![\\p{L}\\p{N}])\"[^\"]{" + (MAX_QUOTED_CHARS + 1) + ",}+(?:\"|$)");

  private FailureReason() {}

  /**
   * An engine's message as a reason: {@code text} with {@code key} (the request's own, may be null)
   * replaced by {@code [key]}, {@link #clean cleaned}, and every run of {@value PromptEcho#MIN_RUN}
   * or more characters that {@code body} (the request's) also holds replaced by {@code [prompt]}.
   * For a failure only: the body is scanned once.
   *
   * @return null for null
   */
  static String fromEngine(String text, String key, Buffer body) {
    return PromptEcho.scrub(clean(redact(text, key)), body);
  }

  /**
   * {@code text} made fit for one line of any output: ANSI CSI sequences ({@code ESC [ … final
   * byte}, a colour, say) removed whole, other control and format characters (and lone surrogates)
   * become blanks, runs of blanks one space, the ends trimmed, quoted spans longer than {@value
   * #MAX_QUOTED_CHARS} characters replaced by {@code '…'}, key-shaped tokens by {@code sk-[key]} or
   * {@code Bearer [key]}, and the whole cut at {@value #MAX_CHARS} characters with an ellipsis.
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
      if (cp == 0x1B && i < n && text.charAt(i) == '[' || cp == 0x9B) {
        i = skipCsi(text, cp == 0x1B ? i + 1 : i);
        continue;
      }
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
    s = SINGLE_QUOTED.matcher(s).replaceAll("'\u2026'");
    s = DOUBLE_QUOTED.matcher(s).replaceAll("\"\u2026\"");
    if (s.codePointCount(0, s.length()) <= MAX_CHARS) {
      return s;
    }
    return s.substring(0, s.offsetByCodePoints(0, MAX_CHARS)).stripTrailing() + ELLIPSIS;
  }

  /**
   * The index after the CSI sequence whose parameters start at {@code i}: parameter bytes {@code
   * 0x30–0x3F}, intermediate bytes {@code 0x20–0x2F}, then one final byte {@code 0x40–0x7E}.
   */
  private static int skipCsi(String text, int i) {
    int n = text.length();
    while (i < n && text.charAt(i) >= 0x20 && text.charAt(i) <= 0x3F) {
      i++;
    }
    if (i < n && text.charAt(i) >= 0x40 && text.charAt(i) <= 0x7E) {
      i++;
    }
    return i;
  }

  /**
   * {@code prefix + ": " + message}, or {@code prefix} alone when the message is null or holds
   * nothing printable; cleaned when the result is (in {@link Exchange}'s end).
   */
  static String withMessage(String prefix, String message) {
    return hasPrintable(message) ? prefix + ": " + message : prefix;
  }

  private static boolean hasPrintable(String text) {
    if (text == null) {
      return false;
    }
    for (int i = 0; i < text.length(); ) {
      int cp = text.codePointAt(i);
      i += Character.charCount(cp);
      if (cp == 0x1B || cp == 0x9B) {
        return !clean(text).isEmpty(); // a CSI sequence's bytes are printable: clean decides
      }
      if (!Character.isWhitespace(cp) && printable(cp)) {
        return true;
      }
    }
    return false;
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

  /** Where the request stood when its time ran out: a fixed phrase. */
  static String timeout(boolean connected, boolean headers, boolean firstToken) {
    if (!connected) {
      return TIMED_OUT_WAITING;
    }
    if (!headers) {
      return TIMED_OUT_BEFORE_HEADERS;
    }
    return firstToken ? TIMED_OUT_MID_STREAM : TIMED_OUT_BEFORE_END;
  }

  /**
   * Where the connection failed, and how: closed or reset by the peer (a fixed phrase), or another
   * failure named by its exception's class (never its message, which may quote what was read).
   */
  static String reset(Throwable cause, boolean sent, boolean headers) {
    boolean closed = StaleConnections.closedConnection(cause);
    if (!sent) {
      return closed ? CLOSED_BEFORE_SENT : failed(BEFORE_SENT, cause);
    }
    if (!headers) {
      return closed ? CLOSED_BEFORE_HEADERS : failed(BEFORE_HEADERS, cause);
    }
    return closed ? CLOSED_MID_RESPONSE : failed(MID_RESPONSE, cause);
  }

  private static String failed(String where, Throwable cause) {
    return "connection failed " + where + " (" + rootClass(cause) + ")";
  }

  /**
   * An HTTP error whose body never arrived whole: {@code HTTP <status> (body cut: <how>)}, the
   * status kept, how from {@link #timeout} or {@link #reset}.
   */
  static String httpCut(int status, String how) {
    return "HTTP " + status + " (body cut: " + how + ")";
  }

  /** The bearer token of {@code headers}' {@code Authorization}, or its whole value, or null. */
  static String bearerToken(Map<String, String> headers) {
    for (Map.Entry<String, String> h : headers.entrySet()) {
      String v = h.getValue();
      if (h.getKey().equalsIgnoreCase("authorization") && v != null) {
        return v.regionMatches(true, 0, "Bearer ", 0, 7) ? v.substring(7).trim() : v;
      }
    }
    return null;
  }

  /** Why a connection could not be made: a short fixed phrase, never the exception's message. */
  static String connect(Throwable cause) {
    for (Throwable t = cause; t != null; t = t.getCause()) {
      if (t instanceof UnknownHostException) {
        return UNKNOWN_HOST;
      }
      if (t instanceof NoRouteToHostException) {
        return NO_ROUTE;
      }
      if (t instanceof SSLException) {
        return TLS_FAILED;
      }
      if (t instanceof ConnectTimeoutException) {
        return CONNECT_TIMED_OUT;
      }
      if (t instanceof ConnectException) {
        String m = t.getMessage();
        return m != null && m.toLowerCase(Locale.ROOT).contains("refused")
            ? REFUSED
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

  /** Whether {@code cp} is kept by {@link #clean} (a blank when it is not). */
  static boolean printable(int cp) {
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
