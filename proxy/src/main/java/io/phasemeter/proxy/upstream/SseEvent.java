package io.phasemeter.proxy.upstream;

import io.vertx.core.buffer.Buffer;

/**
 * One Server-Sent Event as it came from the upstream: its exact bytes, and where its {@code data}
 * payload lies in them.
 *
 * <p>A view, not a value: {@link SseParser} hands the same instance to its sink for every event of
 * a stream and repoints it, so that relaying an event allocates nothing. Read an event during the
 * sink call; {@link #copy()} keeps one beyond it.
 */
public final class SseEvent {

  private Buffer raw;
  // Where the data payload lies: raw itself when the event has one data line, a joined copy when it
  // has several; null when the event has no data field.
  private Buffer data;
  private int dataStart;
  private int dataEnd;

  SseEvent() {}

  private SseEvent(Buffer raw, Buffer data, int dataStart, int dataEnd) {
    set(raw, data, dataStart, dataEnd);
  }

  void set(Buffer raw, Buffer data, int dataStart, int dataEnd) {
    this.raw = raw;
    this.data = data;
    this.dataStart = dataStart;
    this.dataEnd = dataEnd;
  }

  /**
   * The exact bytes of the event, including the blank line that ends it; written to the client
   * unchanged. It is the network chunk the event arrived in when the event is exactly that chunk,
   * and otherwise shares memory with it wherever it can. It stays valid after the sink call.
   */
  public Buffer raw() {
    return raw;
  }

  /**
   * Whether the event carried a {@code data} field; one that did not is a comment-only keep-alive
   * or a stray blank line.
   */
  public boolean hasData() {
    return data != null;
  }

  /**
   * The event's {@code data} lines joined with {@code "\n"} (WHATWG SSE), decoded as UTF-8, or
   * {@code null} when the event had no {@code data} field. Decodes on every call: for logs and
   * tests, not for the relay path ({@link StreamChunk#inspect(SseEvent)} reads the bytes).
   */
  public String data() {
    return data == null ? null : data.getString(dataStart, dataEnd);
  }

  /** An independent event with the same bytes, valid after the sink call that received this one. */
  public SseEvent copy() {
    return new SseEvent(raw, data, dataStart, dataEnd);
  }

  /** The buffer that holds the data payload at [{@link #dataStart}, {@link #dataEnd}); or null. */
  Buffer dataBuffer() {
    return data;
  }

  int dataStart() {
    return dataStart;
  }

  int dataEnd() {
    return dataEnd;
  }

  @Override
  public String toString() {
    return raw == null ? "SseEvent{}" : "SseEvent{" + raw.length() + " bytes, data=" + data() + "}";
  }
}
