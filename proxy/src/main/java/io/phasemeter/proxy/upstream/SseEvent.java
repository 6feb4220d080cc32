package io.phasemeter.proxy.upstream;

import io.vertx.core.buffer.Buffer;

/**
 * One Server-Sent Event as it came from the upstream.
 *
 * @param raw the exact bytes of the event, including the blank line that ends it; written to the
 *     client unchanged. It may share memory with the chunk it was cut from.
 * @param data the event's {@code data} lines joined with {@code "\n"} (WHATWG SSE), or {@code null}
 *     when the event had no {@code data} field (a comment-only keep-alive, or a stray blank line)
 */
public record SseEvent(Buffer raw, String data) {

  /** Whether the event carried a {@code data} field. */
  public boolean hasData() {
    return data != null;
  }
}
