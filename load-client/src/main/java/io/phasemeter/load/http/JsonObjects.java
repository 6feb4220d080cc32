package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;

/**
 * One JSON object read by a streaming parser, as the readers of response bodies and stream events
 * do: anything that is not one JSON object (or fails to parse) is null, never an exception.
 */
final class JsonObjects {
  private static final JsonFactory JSON = new JsonFactory();

  /** Reads the fields of an object whose {@code START_OBJECT} was just read. */
  interface Reader<T> {
    T read(JsonParser p) throws IOException;
  }

  private JsonObjects() {}

  /** {@code json}'s object as {@code reader} reads it, or null when it is not a JSON object. */
  static <T> T parse(String json, Reader<T> reader) {
    try (JsonParser p = JSON.createParser(json)) {
      return read(p, reader);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** Like {@link #parse(String, Reader)}, for a whole body. */
  static <T> T parse(byte[] json, Reader<T> reader) {
    try (JsonParser p = JSON.createParser(json)) {
      return read(p, reader);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * The current string value, at most {@link FailureReason#MAX_READ_CHARS} characters of it: an
   * engine's message is cut later, and a message of megabytes is not kept whole (Jackson has
   * decoded it; 800 characters are kept).
   */
  static String boundedText(JsonParser p) throws IOException {
    int length = p.getTextLength();
    if (length <= FailureReason.MAX_READ_CHARS) {
      return p.getText();
    }
    return new String(p.getTextCharacters(), p.getTextOffset(), FailureReason.MAX_READ_CHARS);
  }

  private static <T> T read(JsonParser p, Reader<T> reader) throws IOException {
    return p.nextToken() == JsonToken.START_OBJECT ? reader.read(p) : null;
  }
}
