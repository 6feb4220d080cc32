package io.phasemeter.load.workload.dataset;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashSet;
import java.util.Set;

/**
 * The bytes of a UTF-8 JSON text with every string cut after {@code limit} bytes of its content:
 * the parser above never holds more than that of one string, however long the file's are (Jackson
 * buffers a whole string once it is read; a value of 2 GB would be 4 GB of heap). The rest of a
 * long string is dropped up to its closing quote, which is kept, so the text stays valid JSON; the
 * cut happens at a character boundary, never inside an escape or a multi-byte character.
 *
 * <p>{@link #wasCut} says whether the string that ended at a given offset of the output was cut:
 * the reader asks it right after reading a string, with the parser's position, which is then just
 * past the closing quote.
 *
 * <p>Not thread-safe: one parser reads it.
 */
final class LongStringCutter extends InputStream {
  private final InputStream in;
  private final long limit;
  private final byte[] scratch = new byte[64 * 1024];

  /** Offsets (in the output) just past the closing quote of each string that was cut. */
  private final Set<Long> cutEnds = new HashSet<>();

  /** Bytes handed out so far. */
  private long emitted;

  private boolean inString;
  private boolean escape;
  private int hexLeft;
  private long stringBytes;
  private boolean dropping;

  LongStringCutter(InputStream in, long limit) {
    this.in = in;
    this.limit = limit;
  }

  /**
   * Whether the string whose closing quote ends just before {@code endOffset} (the parser's byte
   * offset after reading it) was cut. Each cut string answers true once.
   */
  boolean wasCut(long endOffset) {
    return cutEnds.remove(endOffset);
  }

  @Override
  public int read() throws IOException {
    byte[] one = new byte[1];
    int n = read(one, 0, 1);
    return n < 0 ? -1 : one[0] & 0xFF;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (len == 0) {
      return 0;
    }
    while (true) {
      int n = in.read(scratch, 0, Math.min(len, scratch.length));
      if (n < 0) {
        return -1;
      }
      int out = off;
      for (int i = 0; i < n; i++) {
        byte c = scratch[i];
        int step = step(c);
        if (step != DROP) {
          b[out++] = c;
          if (step == CUT_END) {
            cutEnds.add(emitted + (out - off));
          }
        }
      }
      if (out > off) {
        emitted += out - off;
        return out - off;
      }
      // Everything read was dropped (the middle of a long string): read on.
    }
  }

  private static final int KEEP = 0;
  private static final int DROP = 1;

  /** Kept: the closing quote of a string that was cut. */
  private static final int CUT_END = 2;

  /** What becomes of byte {@code c}; tracks the strings it passes through. */
  private int step(byte c) {
    if (!inString) {
      if (c == '"') {
        inString = true;
        stringBytes = 0;
        escape = false;
        hexLeft = 0;
        dropping = false;
      }
      return KEEP;
    }
    if (dropping) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        inString = false;
        dropping = false;
        return CUT_END;
      }
      return DROP;
    }
    // A character starts here: not inside an escape, not a UTF-8 continuation byte.
    boolean boundary = !escape && hexLeft == 0 && (c & 0xC0) != 0x80;
    if (boundary && c == '"') {
      inString = false;
      return KEEP;
    }
    if (boundary && stringBytes >= limit) {
      dropping = true;
      return step(c);
    }
    if (escape) {
      escape = false;
      if (c == 'u') {
        hexLeft = 4;
      }
    } else if (hexLeft > 0) {
      hexLeft--;
    } else if (c == '\\') {
      escape = true;
    }
    stringBytes++;
    return KEEP;
  }

  @Override
  public void close() throws IOException {
    in.close();
  }
}
