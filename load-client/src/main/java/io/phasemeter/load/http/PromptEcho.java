package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.vertx.core.buffer.Buffer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The request's own text echoed in a failure's reason, replaced by {@code [prompt]}: an engine's
 * message may quote what it was sent (llama.cpp's {@code Invalid diff: '…' not found at start of
 * '…'}, a validation error's rejected value).
 *
 * <p>Every window of {@value #MIN_RUN} characters of the reason (at most {@value
 * FailureReason#MAX_CHARS} characters, so at most ~185 windows) goes into a small hash table; the
 * request body is then read once, its JSON string values unescaped by Jackson and folded the way
 * {@link FailureReason#clean} folds blanks, with a rolling hash over its last {@value #MIN_RUN}
 * characters looked up in that table (and compared character by character on a hit). A reason
 * character covered by a window found in the body is the request's; each run of them becomes one
 * {@code [prompt]}. The cost is one pass over the body with no allocation per character, and it is
 * paid on failures only. The {@code model} field is not read: a message naming the model ({@code
 * The model `…` does not exist}) keeps it. A body that is not JSON is read as UTF-8 text.
 */
final class PromptEcho {
  /** The shortest run of the request's text that is replaced. */
  static final int MIN_RUN = 16;

  static final String MARK = "[prompt]";

  private static final JsonFactory JSON = new JsonFactory();
  private static final long BASE = 0x100000001B3L;
  private static final long BASE_POW; // BASE^MIN_RUN, to drop the character leaving the window

  static {
    long p = 1;
    for (int i = 0; i < MIN_RUN; i++) {
      p *= BASE;
    }
    BASE_POW = p;
  }

  private final String reason;
  private final long[] hashes;
  private final int[] starts; // window start + 1; 0 for an empty slot
  private final int mask;
  private final boolean[] covered;
  private final char[] ring = new char[MIN_RUN];
  private int filled;
  private long hash;
  private boolean blank;

  private PromptEcho(String reason) {
    this.reason = reason;
    int windows = reason.length() - MIN_RUN + 1;
    int size = Integer.highestOneBit(windows * 2 - 1) << 1;
    hashes = new long[size];
    starts = new int[size];
    mask = size - 1;
    covered = new boolean[reason.length()];
    long h = 0;
    for (int i = 0; i < reason.length(); i++) {
      h = roll(h, reason.charAt(i), i >= MIN_RUN ? reason.charAt(i - MIN_RUN) : 0, i >= MIN_RUN);
      if (i >= MIN_RUN - 1) {
        int slot = slot(h);
        while (starts[slot] != 0) {
          slot = (slot + 1) & mask;
        }
        hashes[slot] = h;
        starts[slot] = i - MIN_RUN + 2;
      }
    }
  }

  /**
   * {@code reason} with each run of {@value #MIN_RUN} or more characters that {@code body} also
   * holds replaced by {@value #MARK}; {@code reason} itself when there is none.
   */
  static String scrub(String reason, Buffer body) {
    if (reason == null || reason.length() < MIN_RUN || body == null || body.length() < MIN_RUN) {
      return reason;
    }
    PromptEcho echo = new PromptEcho(reason);
    byte[] bytes = body.getBytes();
    if (!echo.readJson(bytes)) {
      echo.restart();
      String text = new String(bytes, StandardCharsets.UTF_8);
      echo.feed(text.toCharArray(), 0, text.length());
    }
    return echo.replaced();
  }

  /** Feeds the body's string values but the model's; false when it is not JSON. */
  private boolean readJson(byte[] body) {
    try (JsonParser p = JSON.createParser(body)) {
      JsonToken t;
      while ((t = p.nextToken()) != null) {
        if (t == JsonToken.VALUE_STRING && !"model".equals(p.currentName())) {
          restart(); // a run never spans two values
          feed(p.getTextCharacters(), p.getTextOffset(), p.getTextLength());
        }
      }
      return true;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private void restart() {
    filled = 0;
    hash = 0;
    blank = false;
  }

  /** Feeds text, folded as {@link FailureReason#clean} folds it: a blank run is one space. */
  private void feed(char[] text, int offset, int length) {
    int end = offset + length;
    for (int i = offset; i < end; ) {
      int cp = Character.codePointAt(text, i, end);
      i += Character.charCount(cp);
      if (Character.isWhitespace(cp) || !FailureReason.printable(cp)) {
        blank = filled > 0;
        continue;
      }
      if (blank) {
        push(' ');
        blank = false;
      }
      if (Character.isBmpCodePoint(cp)) {
        push((char) cp);
      } else {
        push(Character.highSurrogate(cp));
        push(Character.lowSurrogate(cp));
      }
    }
  }

  private void push(char c) {
    int at = filled % MIN_RUN;
    char out = ring[at];
    hash = roll(hash, c, out, filled >= MIN_RUN);
    ring[at] = c;
    filled++;
    if (filled < MIN_RUN) {
      return;
    }
    for (int slot = slot(hash); starts[slot] != 0; slot = (slot + 1) & mask) {
      if (hashes[slot] == hash && matches(starts[slot] - 1)) {
        Arrays.fill(covered, starts[slot] - 1, starts[slot] - 1 + MIN_RUN, true);
      }
    }
  }

  /** Whether the ring (the last {@value #MIN_RUN} characters fed) equals the window at start. */
  private boolean matches(int start) {
    for (int k = 0; k < MIN_RUN; k++) {
      if (ring[(filled + k) % MIN_RUN] != reason.charAt(start + k)) {
        return false;
      }
    }
    return true;
  }

  private String replaced() {
    StringBuilder b = null;
    for (int i = 0; i < covered.length; i++) {
      if (covered[i]) {
        if (b == null) {
          b = new StringBuilder(reason.length()).append(reason, 0, i);
        }
        b.append(MARK);
        while (i + 1 < covered.length && covered[i + 1]) {
          i++;
        }
      } else if (b != null) {
        b.append(reason.charAt(i));
      }
    }
    return b == null ? reason : b.toString();
  }

  private int slot(long h) {
    return (int) (h ^ (h >>> 29) ^ (h >>> 47)) & mask;
  }

  private static long roll(long h, char in, char out, boolean full) {
    return h * BASE + in - (full ? out * BASE_POW : 0);
  }
}
