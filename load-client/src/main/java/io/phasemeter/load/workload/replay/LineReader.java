package io.phasemeter.load.workload.replay;

import java.io.IOException;
import java.io.InputStream;

/**
 * Lines of a stream as bytes, each at most {@code maxLineBytes} long: a longer line is refused as
 * soon as its first {@code maxLineBytes + 1} bytes are read, so a file with a line of gigabytes
 * costs one buffer, never the line. Lines end at {@code \n}; a {@code \r} before it is dropped, and
 * a UTF-8 byte order mark at the start of the stream too. Not thread-safe.
 */
final class LineReader {
  /** Thrown for a line past the limit. */
  static final class TooLong extends IOException {
    final long line;

    TooLong(long line) {
      super("line " + line + " is too long");
      this.line = line;
    }
  }

  private final InputStream in;
  private final int maxLineBytes;
  private final byte[] buf = new byte[64 * 1024];
  private int pos;
  private int lim;
  private byte[] line = new byte[1024];
  private int length;
  private long number;
  private boolean atStart = true;

  LineReader(InputStream in, int maxLineBytes) {
    this.in = in;
    this.maxLineBytes = maxLineBytes;
  }

  /**
   * Reads the next line.
   *
   * @return false at the end of the stream
   * @throws TooLong when the line is longer than the limit
   */
  boolean next() throws IOException {
    length = 0;
    boolean any = false;
    while (true) {
      if (pos == lim) {
        lim = in.read(buf, 0, buf.length);
        pos = 0;
        if (lim <= 0) {
          lim = 0;
          if (!any) {
            return false;
          }
          break;
        }
      }
      if (!any) {
        any = true;
        number++;
      }
      int start = pos;
      while (pos < lim && buf[pos] != '\n') {
        pos++;
      }
      append(start, pos - start);
      if (pos < lim) {
        pos++;
        break;
      }
    }
    if (length > 0 && line[length - 1] == '\r') {
      length--;
    }
    if (atStart) {
      atStart = false;
      if (length >= 3
          && line[0] == (byte) 0xEF
          && line[1] == (byte) 0xBB
          && line[2] == (byte) 0xBF) {
        System.arraycopy(line, 3, line, 0, length - 3);
        length -= 3;
      }
    }
    return true;
  }

  /** The current line's bytes, valid up to {@link #length()} until the next call. */
  byte[] bytes() {
    return line;
  }

  int length() {
    return length;
  }

  /** The current line's number, from 1. */
  long number() {
    return number;
  }

  /** Whether the current line holds nothing but blanks. */
  boolean blank() {
    for (int i = 0; i < length; i++) {
      byte b = line[i];
      if (b != ' ' && b != '\t' && b != '\r') {
        return false;
      }
    }
    return true;
  }

  /**
   * Reads the rest of the stream and counts its lines that hold more than blanks (as {@link #blank}
   * judges), without keeping any: a line of any length costs nothing here.
   */
  long countRest() throws IOException {
    long n = 0;
    boolean content = false;
    while (true) {
      if (pos == lim) {
        lim = in.read(buf, 0, buf.length);
        pos = 0;
        if (lim <= 0) {
          lim = 0;
          break;
        }
      }
      for (; pos < lim; pos++) {
        byte b = buf[pos];
        if (b == '\n') {
          if (content) {
            n++;
          }
          content = false;
        } else if (b != ' ' && b != '\t' && b != '\r') {
          content = true;
        }
      }
    }
    return content ? n + 1 : n;
  }

  private void append(int from, int n) throws TooLong {
    // A carriage return before the newline is not part of the line's length.
    if ((long) length + n > maxLineBytes + 1L) {
      throw new TooLong(number);
    }
    if (length + n > line.length) {
      line =
          java.util.Arrays.copyOf(
              line, Math.min(maxLineBytes + 1, Math.max(length + n, 2 * line.length)));
    }
    System.arraycopy(buf, from, line, length, n);
    length += n;
    if (length > maxLineBytes && (length > maxLineBytes + 1 || line[length - 1] != '\r')) {
      throw new TooLong(number);
    }
  }
}
