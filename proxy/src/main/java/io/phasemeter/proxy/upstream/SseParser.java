package io.phasemeter.proxy.upstream;

import io.vertx.core.buffer.Buffer;
import java.util.function.Consumer;

/**
 * Incremental parser for a {@code text/event-stream} body (WHATWG HTML, "Server-sent events"),
 * built for a proxy that relays the stream byte for byte while watching its events.
 *
 * <p>Every byte fed ends up in exactly one place: the {@link SseEvent#raw() raw} bytes of an event,
 * or {@link #pending()}. Concatenating the raw bytes of all events in order, then {@code
 * pending()}, gives back the concatenated input exactly.
 *
 * <p>Lines end with {@code \n}, {@code \r\n} or a bare {@code \r}; a blank line ends an event and
 * belongs to its raw bytes. When a chunk ends with the {@code \r} of a blank line, the event is
 * delivered at once (a bare {@code \r} is a complete line end) and a {@code \n} that opens the next
 * chunk is taken as the rest of that line end: it does not start a new line, and it becomes the
 * first raw byte of the next event (or of {@code pending()}).
 *
 * <p>Relaying allocates nothing per event on the common path: the sink gets the same {@link
 * SseEvent} every time, repointed; an event that is exactly the chunk it arrived in has that chunk
 * as its raw bytes, and its data payload is a range of them. Several events in one chunk are slices
 * of it; an event that straddles chunks is copied once; data of several lines is joined.
 *
 * <p>Not thread-safe: feed one stream from one thread (a Vert.x context). A parser that threw
 * {@link SseException} refuses further input.
 */
public final class SseParser {

  private static final byte LF = '\n';
  private static final byte CR = '\r';

  private final int maxEventBytes;

  // Bytes of the event in progress that came in earlier chunks; null when there are none. Only
  // events that straddle a chunk boundary are copied (once, into here); all others are slices.
  private Buffer carry;
  // Offsets below are event-relative: 0 is the first byte of the event in progress, wherever it
  // lives (carry first, then the current chunk).
  private int lineStart;
  // 1 when the event in progress starts with the \n of a \r\n whose \r ended the previous event.
  private int ownStart;
  // The last chunk ended with \r: a \n at the start of the next one completes that line end.
  private boolean skipLf;
  // No line ended yet; a UTF-8 byte order mark before the first line is not part of it.
  private boolean firstLine = true;
  // [start, end) of the first data value of the event in progress, and how many it has; the
  // values after the first, in pairs, are in moreData (made for the first event that needs it).
  private int dataStart;
  private int dataEnd;
  private int dataLines;
  private int[] moreData;
  private boolean failed;
  // Handed to the sink for every event, repointed each time.
  private final SseEvent event = new SseEvent();

  /**
   * @param maxEventBytes the largest event accepted, in bytes including its line ends; a longer one
   *     (complete or still pending) makes {@link #feed} throw
   */
  public SseParser(int maxEventBytes) {
    if (maxEventBytes <= 0) {
      throw new IllegalArgumentException("maxEventBytes must be positive: " + maxEventBytes);
    }
    this.maxEventBytes = maxEventBytes;
  }

  /**
   * Feeds one network chunk; calls {@code sink} for every event completed by it, in order, with the
   * same {@link SseEvent} instance, valid until the call returns ({@link SseEvent#copy()} keeps
   * one). The chunk must not be modified afterwards: events may share its memory. An exception from
   * {@code sink} propagates and leaves the parser refusing further input.
   *
   * @throws SseException when an event, complete or pending, is longer than {@code maxEventBytes}
   */
  public void feed(Buffer chunk, Consumer<SseEvent> sink) {
    if (failed) {
      throw new IllegalStateException("the parser already failed");
    }
    int n = chunk.length();
    if (n == 0) {
      return;
    }
    int carried = carry == null ? 0 : carry.length();
    // The event in progress continues at chunk[eventStart]; event-relative offset of chunk[i] is
    // carried + i - eventStart.
    int eventStart = 0;
    int i = 0;
    if (skipLf) {
      skipLf = false;
      if (chunk.getByte(0) == LF) {
        i = 1;
        lineStart = carried + 1;
        if (carried == 0) {
          // The \r ended the previous event (a \r ending any other line is still carried).
          ownStart = 1;
        }
      }
    }
    for (; i < n; i++) {
      byte b = chunk.getByte(i);
      if (b != LF && b != CR) {
        continue;
      }
      int next = i + 1;
      if (b == CR) {
        if (next == n) {
          skipLf = true;
        } else if (chunk.getByte(next) == LF) {
          next++;
        }
      }
      int lineEnd = carried + i - eventStart;
      int contentStart = lineStart;
      if (firstLine) {
        firstLine = false;
        contentStart += bomLength(chunk, eventStart, carried, lineStart, lineEnd);
      }
      if (contentStart < lineEnd) {
        parseLine(chunk, eventStart, carried, contentStart, lineEnd);
        lineStart = carried + next - eventStart;
      } else {
        cutEvent(chunk, eventStart, carried, next);
        eventStart = next;
        carried = 0;
        try {
          sink.accept(event);
        } catch (RuntimeException e) {
          // The rest of this chunk is not parsed; refuse input rather than lose bytes silently.
          failed = true;
          throw e;
        }
        // A sink that kept the event past its call now reads nothing rather than the next event.
        event.set(null, null, 0, 0);
      }
      i = next - 1;
    }
    if (eventStart < n) {
      int tail = n - eventStart;
      if (carry == null) {
        carry = Buffer.buffer(Math.max(tail, 256));
      }
      carry.appendBuffer(chunk, eventStart, tail);
      checkSize(carry.length());
    }
  }

  /**
   * Whether a body whose first byte is {@code first} can be an OpenAI-style event stream: one that
   * opens with a field the stream uses ({@code data}, {@code event}, {@code id}, {@code retry}), a
   * comment ({@code :}), a blank line, or a UTF-8 byte order mark. The grammar alone would take any
   * text (an unknown field is ignored), so without this a JSON object, an HTML page or compressed
   * bytes under {@code text/event-stream} would be read as a stream of no events.
   */
  public static boolean opensEventStream(byte first) {
    return switch (first) {
      case 'd', 'e', 'i', 'r', ':', CR, LF, (byte) 0xEF -> true;
      default -> false;
    };
  }

  /**
   * Bytes received but not yet part of a complete event, such as the start of an event cut off by
   * the end of the stream. A copy; forward it to keep the relayed stream byte-exact.
   */
  public Buffer pending() {
    return carry == null ? Buffer.buffer() : carry.copy();
  }

  /**
   * Whether an event has started and not ended: the stream was cut mid-event if this is true at its
   * end. A lone {@code \n} that completes the {@code \r\n} of the last event does not count, though
   * {@link #pending()} still returns it.
   */
  public boolean hasPending() {
    return carry != null && carry.length() > ownStart;
  }

  /**
   * Ends the event in progress at chunk[end), points {@link #event} at it and resets the per-event
   * state.
   */
  private void cutEvent(Buffer chunk, int eventStart, int carried, int end) {
    checkSize(carried + end - eventStart);
    Buffer raw;
    if (carried > 0) {
      raw = carry.appendBuffer(chunk, eventStart, end - eventStart);
      carry = null;
    } else if (eventStart == 0 && end == chunk.length()) {
      // One event per chunk, as vLLM flushes them: the chunk itself is the event.
      raw = chunk;
    } else {
      raw = chunk.slice(eventStart, end);
    }
    if (dataLines == 0) {
      event.set(raw, null, 0, 0);
    } else if (dataLines == 1) {
      event.set(raw, raw, dataStart, dataEnd);
    } else {
      Buffer joined = joinData(raw);
      event.set(raw, joined, 0, joined.length());
    }
    lineStart = 0;
    ownStart = 0;
    dataLines = 0;
  }

  private void parseLine(Buffer chunk, int eventStart, int carried, int start, int end) {
    // A field named exactly "data": "data", "data:value" or "data: value". Comments (":...") and
    // other fields are left in the raw bytes only.
    if (end - start < 4
        || byteAt(chunk, eventStart, carried, start) != 'd'
        || byteAt(chunk, eventStart, carried, start + 1) != 'a'
        || byteAt(chunk, eventStart, carried, start + 2) != 't'
        || byteAt(chunk, eventStart, carried, start + 3) != 'a') {
      return;
    }
    int value = start + 4;
    if (value < end) {
      if (byteAt(chunk, eventStart, carried, value) != ':') {
        return;
      }
      value++;
      if (value < end && byteAt(chunk, eventStart, carried, value) == ' ') {
        value++;
      }
    }
    if (dataLines == 0) {
      dataStart = value;
      dataEnd = end;
    } else {
      int at = 2 * (dataLines - 1);
      if (moreData == null) {
        moreData = new int[8];
      } else if (at == moreData.length) {
        int[] grown = new int[at * 2];
        System.arraycopy(moreData, 0, grown, 0, at);
        moreData = grown;
      }
      moreData[at] = value;
      moreData[at + 1] = end;
    }
    dataLines++;
  }

  /** The data values of a multi-line event joined with \n: the rare path, which copies. */
  private Buffer joinData(Buffer raw) {
    int length = dataLines - 1 + dataEnd - dataStart;
    for (int k = 0; k < 2 * (dataLines - 1); k += 2) {
      length += moreData[k + 1] - moreData[k];
    }
    Buffer joined = Buffer.buffer(length);
    joined.appendBuffer(raw, dataStart, dataEnd - dataStart);
    for (int k = 0; k < 2 * (dataLines - 1); k += 2) {
      joined.appendByte(LF).appendBuffer(raw, moreData[k], moreData[k + 1] - moreData[k]);
    }
    return joined;
  }

  private int bomLength(Buffer chunk, int eventStart, int carried, int start, int end) {
    return end - start >= 3
            && byteAt(chunk, eventStart, carried, start) == (byte) 0xEF
            && byteAt(chunk, eventStart, carried, start + 1) == (byte) 0xBB
            && byteAt(chunk, eventStart, carried, start + 2) == (byte) 0xBF
        ? 3
        : 0;
  }

  private byte byteAt(Buffer chunk, int eventStart, int carried, int offset) {
    return offset < carried ? carry.getByte(offset) : chunk.getByte(eventStart + offset - carried);
  }

  private void checkSize(int eventBytes) {
    if (eventBytes > maxEventBytes) {
      failed = true;
      throw new SseException(
          "server-sent event longer than " + maxEventBytes + " bytes (" + eventBytes + " so far)");
    }
  }

  /** The upstream's event stream broke a limit of the parser; the stream cannot be followed. */
  public static final class SseException extends RuntimeException {
    SseException(String message) {
      super(message);
    }
  }
}
