package io.phasemeter.load.workload.dataset;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Locale;

/**
 * Reads a jsonl dataset: one {@code {"prompt": "…", "output_tokens": N}} a line (other fields are
 * ignored; blank lines too). Every line is checked, and the first bad one stops the run before any
 * request: a line longer than {@link Limits#maxLineBytes()} (found without holding more of it than
 * that), invalid JSON, a missing or empty prompt, an {@code output_tokens} that is not an integer
 * from 1 to 2<sup>31</sup> − 1 (optional when {@code --output-tokens} gives every length). The
 * error names the file, the line and the field, never the text.
 */
final class JsonlReader {
  private static final JsonFactory JSON = new JsonFactory();

  private final Path file;
  private final DatasetEntries.Builder entries;

  private JsonlReader(Path file, DatasetEntries.Builder entries) {
    this.file = file;
    this.entries = entries;
  }

  static DatasetEntries read(Path file, Limits limits, DatasetEntries.Builder entries) {
    MessageDigest sha = ShareGptReader.sha256();
    JsonlReader reader = new JsonlReader(file, entries);
    try (InputStream in =
        new DigestInputStream(new BufferedInputStream(Files.newInputStream(file), 1 << 16), sha)) {
      if (!reader.lines(in, limits.maxLineBytes())) {
        // A limit stopped the reading: the digest still covers the whole file.
        in.transferTo(OutputStream.nullOutputStream());
      }
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "--dataset " + file + ": cannot read it (" + e.getClass().getSimpleName() + ")");
    }
    return entries.build(HexFormat.of().formatHex(sha.digest()));
  }

  /**
   * Every line of {@code in}, each held whole only when it is at most {@code maxLine} bytes long.
   *
   * @return false when a limit stopped the reading before the end
   */
  private boolean lines(InputStream in, int maxLine) throws IOException {
    byte[] buf = new byte[1 << 16];
    // One byte past the limit: a '\r' before the '\n' is not part of the line.
    byte[] line = new byte[Math.min(8192, maxLine + 1)];
    int len = 0;
    long lineNo = 1;
    boolean any = false;
    int n;
    while ((n = in.read(buf)) > 0) {
      any = true;
      for (int i = 0; i < n; i++) {
        byte c = buf[i];
        if (c == '\n') {
          if (!line(lineNo, line, len, maxLine)) {
            return false;
          }
          len = 0;
          lineNo++;
          continue;
        }
        if (len > maxLine) {
          throw tooLong(lineNo, maxLine);
        }
        if (len == line.length) {
          line = Arrays.copyOf(line, (int) Math.min((long) line.length * 2, maxLine + 1L));
        }
        line[len++] = c;
      }
    }
    if (!any) {
      throw new IllegalArgumentException("--dataset " + file + ": the file is empty");
    }
    return len == 0 || line(lineNo, line, len, maxLine);
  }

  private IllegalArgumentException tooLong(long lineNo, int maxLine) {
    return error(
        lineNo,
        String.format(Locale.ROOT, "the line is longer than %,d bytes, the limit", maxLine));
  }

  /**
   * One line, without its {@code '\n'}.
   *
   * @return false when a limit stopped the reading
   */
  private boolean line(long lineNo, byte[] line, int len, int maxLine) throws IOException {
    if (len > 0 && line[len - 1] == '\r') {
      len--;
    }
    if (len > maxLine) {
      throw tooLong(lineNo, maxLine);
    }
    boolean blank = true;
    for (int i = 0; i < len && blank; i++) {
      blank = line[i] == ' ' || line[i] == '\t';
    }
    if (blank) {
      return true;
    }
    entries.read();
    String prompt = null;
    int output = -1;
    try (JsonParser p = JSON.createParser(line, 0, len)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw error(lineNo, "not a JSON object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        if ("prompt".equals(name)) {
          if (v != JsonToken.VALUE_STRING) {
            throw error(lineNo, "\"prompt\" must be a string, got " + kind(v));
          }
          prompt = p.getText();
        } else if ("output_tokens".equals(name)) {
          output = outputTokens(lineNo, p, v);
        } else {
          p.skipChildren();
        }
      }
      if (p.nextToken() != null) {
        throw error(lineNo, "more than one JSON value on the line");
      }
    } catch (JsonProcessingException e) {
      // Jackson's message may quote the line: only where, never what.
      throw error(lineNo, "not valid JSON");
    }
    if (prompt == null) {
      throw error(lineNo, "no \"prompt\"");
    }
    if (prompt.isEmpty()) {
      throw error(lineNo, "\"prompt\" is empty");
    }
    if (output < 0 && entries.outputOverride() == 0) {
      throw error(
          lineNo, "no \"output_tokens\" (give it on every line, or --output-tokens N for all)");
    }
    return entries.add(prompt, DatasetEntries.estimateTokens(prompt), output);
  }

  private int outputTokens(long lineNo, JsonParser p, JsonToken v) throws IOException {
    String want = "\"output_tokens\" must be an integer from 1 to " + Integer.MAX_VALUE + ", got ";
    if (v == JsonToken.VALUE_NUMBER_INT) {
      if (p.getNumberType() == JsonParser.NumberType.INT && p.getIntValue() >= 1) {
        return p.getIntValue();
      }
      String text = p.getText();
      throw error(lineNo, want + (text.length() > 24 ? text.substring(0, 24) + "…" : text));
    }
    if (v == JsonToken.VALUE_NUMBER_FLOAT) {
      throw error(lineNo, want + "a fraction");
    }
    p.skipChildren();
    throw error(lineNo, want + kind(v));
  }

  /** A JSON value's kind in words, never its content. */
  private static String kind(JsonToken v) {
    return switch (v) {
      case VALUE_STRING -> "a string";
      case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "a number";
      case VALUE_TRUE, VALUE_FALSE -> "a boolean";
      case VALUE_NULL -> "null";
      case START_ARRAY -> "an array";
      case START_OBJECT -> "an object";
      default -> "something else";
    };
  }

  private IllegalArgumentException error(long lineNo, String what) {
    return new IllegalArgumentException("--dataset " + file + ":" + lineNo + ": " + what);
  }
}
