package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.phasemeter.load.workload.Utf8;
import java.io.IOException;

/**
 * The text of one chat answer, kept for a multi-turn session's history: the next turn sends it back
 * as the assistant's message. Only a request of a session carries one ({@link
 * RequestRunner#run(long, io.phasemeter.load.workload.RequestSpec, String, String, int, long,
 * java.util.function.LongConsumer, io.vertx.core.Handler, AnswerText)}); every other request reads
 * its response as before, its text parsed on the fly and dropped.
 *
 * <p>What is kept: the {@code content} of the first choice, the {@code delta}s of a stream's
 * content events in order, or the {@code message} of a whole body; reasoning and tool calls are not
 * part of the history. At most {@code maxBytes} of it in UTF-8, cut at a character boundary ({@link
 * #truncated()} then says so). Held in memory for the live session only; never logged, and {@link
 * #toString()} gives its length, not its text.
 *
 * <p>Not thread-safe: one exchange, one context.
 */
public final class AnswerText {
  private final int maxBytes;
  private final StringBuilder text = new StringBuilder();
  private int bytes;
  private boolean truncated;

  /**
   * @param maxBytes the most of the answer kept, in UTF-8 bytes
   */
  public AnswerText(int maxBytes) {
    if (maxBytes < 0 || maxBytes == Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "maxBytes must be 0 or more and below Integer.MAX_VALUE, got " + maxBytes);
    }
    this.maxBytes = maxBytes;
  }

  /** One content event of a chat stream ({@code data: {chunk}}): its delta's content. */
  void event(String data) {
    String content = JsonObjects.parse(data, this::firstContent);
    if (content != null) {
      append(content);
    }
  }

  /** A whole chat body: its message's content. */
  void body(byte[] body) {
    String content = JsonObjects.parse(body, this::firstContent);
    if (content != null) {
      append(content);
    }
  }

  /** Appends {@code s}, whole characters only, up to the limit. */
  void append(String s) {
    if (truncated) {
      return;
    }
    int fit = Utf8.prefix(s, maxBytes - bytes);
    text.append(s, 0, fit);
    bytes += Utf8.length(s.substring(0, fit));
    truncated = fit < s.length();
  }

  /** The answer kept so far. */
  public String text() {
    return text.toString();
  }

  /**
   * Whether some of the answer was not kept (beyond the limit): a session counts it ({@code
   * answers_truncated}).
   */
  public boolean truncated() {
    return truncated;
  }

  /** Its length only: the text itself never reaches a log. */
  @Override
  public String toString() {
    return "AnswerText[bytes=" + bytes + ", truncated=" + truncated + "]";
  }

  /**
   * The root object's first choice's {@code delta.content} or {@code message.content}; null when
   * there is none. Of a longer text only {@code maxBytes + 1} characters are made a String: more
   * than the limit in any encoding, so that {@link #append} still sees it is cut.
   */
  private String firstContent(JsonParser p) throws IOException {
    String content = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if (name.equals("choices") && v == JsonToken.START_ARRAY) {
        boolean first = true;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
          if (first && t == JsonToken.START_OBJECT) {
            content = choiceContent(p);
            first = false;
          } else {
            p.skipChildren();
          }
        }
      } else {
        p.skipChildren();
      }
    }
    return content;
  }

  /** At the start of a choice: its {@code delta} or {@code message} object's {@code content}. */
  private String choiceContent(JsonParser p) throws IOException {
    String content = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if ((name.equals("delta") || name.equals("message")) && v == JsonToken.START_OBJECT) {
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String field = p.currentName();
          JsonToken fv = p.nextToken();
          if (field.equals("content") && fv == JsonToken.VALUE_STRING) {
            int length = Math.min(p.getTextLength(), maxBytes + 1);
            content = new String(p.getTextCharacters(), p.getTextOffset(), length);
          } else {
            p.skipChildren();
          }
        }
      } else {
        p.skipChildren();
      }
    }
    return content;
  }
}
