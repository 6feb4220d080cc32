package io.phasemeter.load.http;

import io.vertx.core.buffer.Buffer;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;

/**
 * Incremental {@code text/event-stream} parser (WHATWG HTML, "Server-sent events") that hands out
 * the data of each event, and its {@code event} type when a sink asks for it. Lines end with {@code
 * \n}, {@code \r\n} or a bare {@code \r}, also when the two bytes of a {@code \r\n} arrive in
 * different reads; comments ({@code :…}) and fields other than {@code data}, {@code event} and
 * {@code id} are skipped; several {@code data} lines join with {@code \n}; an event without data is
 * not dispatched (and its type is forgotten), but one that carried an {@code id} is told to {@link
 * EventSink#idOnly}. An {@code error} field (llama.cpp's server once reported a failure with one)
 * is not part of the format: it is handed to {@link EventSink#errorField} as it comes and is no
 * part of any event. The {@code id} sets the stream's last event id ({@link #lastEventId()}), which
 * stays until another {@code id} changes it. Lines are decoded as UTF-8 only once complete, so a
 * character split across reads survives.
 *
 * <p>Not thread-safe: one stream, one context.
 */
public final class SseParser {
  private final ByteArrayOutputStream line = new ByteArrayOutputStream(256);
  private final int maxLineBytes;
  private StringBuilder data;
  private String eventType;
  private String lastEventId;
  private boolean idInEvent;
  private boolean skipLf;
  private boolean firstLine = true;

  /**
   * @param maxLineBytes the longest line accepted; a longer one makes {@link #feed} throw
   */
  public SseParser(int maxLineBytes) {
    this.maxLineBytes = maxLineBytes;
  }

  /** Receives each event: its {@code event} field (null when it had none) and its data. */
  @FunctionalInterface
  public interface EventSink {
    void event(String type, String data);

    /** An event that carried an {@code id} and no data (nothing dispatched): the id it set. */
    default void idOnly(String id) {}

    /** An {@code error} field's value (not an SSE field; llama.cpp's server wrote one). */
    default void errorField(String value) {}
  }

  /** The stream's last event id (the last {@code id} field seen), or null before any. */
  public String lastEventId() {
    return lastEventId;
  }

  /**
   * Feeds one read; calls {@code sink} with the data of every event it completes, in order.
   *
   * @throws IllegalStateException when a line is longer than the limit
   */
  public void feed(Buffer chunk, Consumer<String> sink) {
    feedEvents(chunk, (type, data) -> sink.accept(data));
  }

  /**
   * Feeds one read; calls {@code sink} with the type and data of every event it completes, in
   * order.
   *
   * @throws IllegalStateException when a line is longer than the limit
   */
  public void feedEvents(Buffer chunk, EventSink sink) {
    int n = chunk.length();
    for (int i = 0; i < n; i++) {
      byte b = chunk.getByte(i);
      if (skipLf) {
        skipLf = false;
        if (b == '\n') {
          continue;
        }
      }
      if (b == '\r' || b == '\n') {
        skipLf = b == '\r';
        endLine(sink);
      } else {
        if (line.size() >= maxLineBytes) {
          throw new IllegalStateException(
              "an event line is longer than " + maxLineBytes + " bytes");
        }
        line.write(b);
      }
    }
  }

  /** Whether an event or line has started and not ended. */
  boolean hasPending() {
    return line.size() > 0 || data != null;
  }

  private void endLine(EventSink sink) {
    String text = line.toString(StandardCharsets.UTF_8);
    line.reset();
    if (firstLine) {
      firstLine = false;
      if (text.startsWith("\uFEFF")) {
        text = text.substring(1);
      }
    }
    if (text.isEmpty()) {
      String type = eventType;
      eventType = null;
      boolean hadId = idInEvent;
      idInEvent = false;
      if (data != null) {
        String event = data.toString();
        data = null;
        sink.event(type, event);
      } else if (hadId) {
        sink.idOnly(lastEventId);
      }
      return;
    }
    if (text.charAt(0) == ':') {
      return;
    }
    int colon = text.indexOf(':');
    String field = colon < 0 ? text : text.substring(0, colon);
    boolean isData = field.equals("data");
    boolean isId = field.equals("id");
    boolean isError = field.equals("error");
    if (!isData && !isId && !isError && !field.equals("event")) {
      return;
    }
    String value = colon < 0 ? "" : text.substring(colon + 1);
    if (value.startsWith(" ")) {
      value = value.substring(1);
    }
    if (isError) {
      sink.errorField(value);
      return;
    }
    if (isId) {
      // WHATWG: an id holding NUL is ignored.
      if (value.indexOf('\u0000') < 0) {
        lastEventId = value;
        idInEvent = true;
      }
      return;
    }
    if (!isData) {
      eventType = value;
      return;
    }
    if (data == null) {
      data = new StringBuilder(value.length());
    } else {
      data.append('\n');
    }
    data.append(value);
  }
}
