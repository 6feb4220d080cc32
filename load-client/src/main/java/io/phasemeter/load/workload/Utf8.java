package io.phasemeter.load.workload;

/**
 * UTF-8 without encoding: whether bytes are well-formed (a replayed trace's lines), and a string's
 * length and prefix in UTF-8 bytes (a chat session's answers and history, counted against their
 * bounds without a copy).
 */
public final class Utf8 {
  private Utf8() {}

  /**
   * Whether the first {@code length} bytes of {@code b} are well-formed UTF-8 (RFC 3629: no
   * overlongs, no surrogates, up to U+10FFFF).
   */
  public static boolean valid(byte[] b, int length) {
    int i = 0;
    while (i < length) {
      int c = b[i] & 0xff;
      if (c < 0x80) {
        i++;
        continue;
      }
      int n;
      int min;
      if (c >= 0xc2 && c <= 0xdf) {
        n = 1;
        min = 0x80;
      } else if (c >= 0xe0 && c <= 0xef) {
        n = 2;
        min = 0x800;
      } else if (c >= 0xf0 && c <= 0xf4) {
        n = 3;
        min = 0x10000;
      } else {
        return false;
      }
      if (i + n >= length) {
        return false;
      }
      int cp = c & (0x3f >> n);
      for (int k = 1; k <= n; k++) {
        int d = b[i + k] & 0xff;
        if ((d & 0xc0) != 0x80) {
          return false;
        }
        cp = (cp << 6) | (d & 0x3f);
      }
      if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return false;
      }
      i += n + 1;
    }
    return true;
  }

  /**
   * The length of {@code s} in UTF-8 bytes; an unpaired surrogate counts 3, never less than sent.
   */
  public static int length(String s) {
    int bytes = 0;
    int n = s.length();
    for (int i = 0; i < n; i++) {
      char ch = s.charAt(i);
      if (Character.isHighSurrogate(ch) && i + 1 < n) {
        bytes += 4;
        i++;
      } else {
        bytes += ch < 0x80 ? 1 : ch < 0x800 ? 2 : 3;
      }
    }
    return bytes;
  }

  /**
   * How many chars of {@code s} from its start make at most {@code maxBytes} of UTF-8, in whole
   * characters (a surrogate pair is never split).
   */
  public static int prefix(String s, long maxBytes) {
    int n = s.length();
    long bytes = 0;
    int i = 0;
    while (i < n) {
      char ch = s.charAt(i);
      boolean pair = Character.isHighSurrogate(ch) && i + 1 < n;
      int size = pair ? 4 : ch < 0x80 ? 1 : ch < 0x800 ? 2 : 3;
      if (bytes + size > maxBytes) {
        return i;
      }
      bytes += size;
      i += pair ? 2 : 1;
    }
    return n;
  }
}
