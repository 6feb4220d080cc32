package io.phasemeter.proxy.pipeline;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * The one form of a request path that the route table matches and the upstream receives. The
 * engine's web framework decodes percent-escapes before it routes ({@code /%73leep} is {@code
 * /sleep} to it), so a deny list matched on the raw path could be walked around; here the path is
 * decoded, dot-segments resolved, empty segments and a trailing slash dropped, and the result is
 * what is matched and, re-encoded, what is forwarded: the upstream routes exactly what the table
 * judged. An escaped slash or NUL, bad UTF-8, a control character or a backslash make the path
 * invalid (400), since servers disagree on what they mean.
 */
final class PathNormalizer {
  /** The longest path accepted, decoded. */
  static final int MAX_LENGTH = 2048;

  private PathNormalizer() {}

  /** The decoded, normalised path ({@code "/"} at least), or null when it is not acceptable. */
  static String normalize(String raw) {
    if (raw == null || raw.isEmpty() || raw.charAt(0) != '/' || raw.length() > 3 * MAX_LENGTH) {
      return null;
    }
    if (isPlain(raw)) {
      return raw;
    }
    Deque<String> segments = new ArrayDeque<>();
    int from = 1;
    while (from <= raw.length()) {
      int slash = raw.indexOf('/', from);
      int to = slash < 0 ? raw.length() : slash;
      String seg = decode(raw, from, to);
      if (seg == null) {
        return null;
      }
      if (seg.equals("..")) {
        segments.pollLast();
      } else if (!seg.isEmpty() && !seg.equals(".")) {
        segments.addLast(seg);
      }
      from = to + 1;
    }
    String path = "/" + String.join("/", segments);
    return path.length() > MAX_LENGTH ? null : path;
  }

  /**
   * Already normal: no escapes, no empty or dot segments, no trailing slash, only characters a path
   * may carry unescaped. The common case, answered without building anything.
   */
  private static boolean isPlain(String raw) {
    if (raw.length() > MAX_LENGTH || (raw.length() > 1 && raw.charAt(raw.length() - 1) == '/')) {
      return false;
    }
    char prev = '/';
    for (int i = 1; i < raw.length(); i++) {
      char c = raw.charAt(i);
      if (c == '/' && prev == '/') {
        return false;
      }
      if (c == '.' && prev == '/') {
        return false;
      }
      if (!(c == '/' || pathChar(c))) {
        return false;
      }
      prev = c;
    }
    return true;
  }

  /** A character a path segment may carry as it is (RFC 3986 pchar, less '%'). */
  private static boolean pathChar(char c) {
    return (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || "-._~!$&'()*+,;=:@".indexOf(c) >= 0;
  }

  private static String decode(String raw, int from, int to) {
    if (raw.indexOf('%', from) < 0 || raw.indexOf('%', from) >= to) {
      for (int i = from; i < to; i++) {
        char c = raw.charAt(i);
        if (c < 0x20 || c == 0x7f || c == '\\') {
          return null;
        }
      }
      return raw.substring(from, to);
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(to - from);
    for (int i = from; i < to; i++) {
      char c = raw.charAt(i);
      if (c == '%') {
        if (i + 2 >= to) {
          return null;
        }
        int hi = Character.digit(raw.charAt(i + 1), 16);
        int lo = Character.digit(raw.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) {
          return null;
        }
        int b = hi << 4 | lo;
        if (b == '/' || b == 0 || b == '\\' || b < 0x20 || b == 0x7f) {
          return null;
        }
        bytes.write(b);
        i += 2;
      } else if (c < 0x20 || c == 0x7f || c == '\\' || c > 0x7e) {
        return null;
      } else {
        bytes.write(c);
      }
    }
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes.toByteArray()))
          .toString();
    } catch (CharacterCodingException e) {
      return null;
    }
  }

  /**
   * {@code path} (normalised) as it goes on the wire: every byte a segment cannot carry escaped.
   */
  static String encode(String path) {
    boolean plain = true;
    for (int i = 0; i < path.length() && plain; i++) {
      char c = path.charAt(i);
      plain = c == '/' || pathChar(c);
    }
    if (plain) {
      return path;
    }
    StringBuilder out = new StringBuilder(path.length() + 16);
    for (byte b : path.getBytes(StandardCharsets.UTF_8)) {
      char c = (char) (b & 0xff);
      if (c < 0x80 && (c == '/' || pathChar(c))) {
        out.append(c);
      } else {
        out.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)));
        out.append(Character.toUpperCase(Character.forDigit(c & 0xf, 16)));
      }
    }
    return out.toString();
  }
}
